/* The extension module cortado._cortado: Caffe's _caffe module over
 * cortado.h, in the CPython C API.  Its Python half (cortado/pycaffe.py
 * and the rest of the package) adds pycaffe's pure-Python methods to these
 * types, as pycaffe does to _caffe's.
 *
 * Ownership: every object that hands out a handle keeps its owner alive (a
 * Blob its Net, a Net its Solver, a numpy array its Blob through the
 * buffer exporter), so a view never outlives the memory it points at
 * unless that memory is reallocated by a reshape (as in pycaffe).
 *
 * The GIL is released while Cortado computes; Python layers and solver
 * callbacks take it back (they may run on data-parallel worker threads).
 * An exception raised by Python code called from Cortado is kept (per
 * process, under the GIL) and raised again by the call that reached it. */
#ifndef CORTADO_PY_PYEXT_H
#define CORTADO_PY_PYEXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdbool.h>

#include "cortado.h"

/* The types (heap types, so that the Python half can add methods). */
extern PyTypeObject *ct_py_blob_type, *ct_py_net_type, *ct_py_layer_type, *ct_py_solver_type,
    *ct_py_blobvec_type, *ct_py_buffer_type, *ct_py_device_array_type;
/* cortado.CortadoError (a RuntimeError, as pycaffe's errors are). */
extern PyObject *ct_py_error;

/* Raises the kept exception of Python code that failed inside the call
 * (with Cortado's message as a note), else CortadoError with
 * cortado_last_error(); returns NULL. */
PyObject *ct_py_raise(cortado_status st);
/* With the GIL and a Python exception set: keeps it for ct_py_raise
 * (the first one wins until taken) and clears it. */
void ct_py_keep_exception(void);
/* The kept exception, if any, is raised again (1) or there is none (0). */
int ct_py_reraise_kept(void);
/* Sets cortado's error from the Python exception set now (for the C
 * side's message) and keeps the exception; returns CORTADO_ERR_INVALID. */
cortado_status ct_py_fail_from_exception(const char *where);

/* A new context for a Net or Solver made from Python: the device of
 * set_mode_cpu / set_mode_gpu / set_device, and a seed from
 * set_random_seed (the n-th context after it gets seed + n) or fresh. */
int ct_py_new_context(cortado_context **out);
/* The device new nets go to (CORTADO_CPU or a GPU). */
int ct_py_current_device(void);

/* Objects. */
PyObject *ct_py_blob_new(PyObject *owner, cortado_blob *b);
/* The blob's memory is gone (its layer ended): its calls raise from now on. */
void ct_py_blob_kill(PyObject *blob);
/* A Net object over n; owner (may be NULL) is kept alive; owned: the
 * object frees n. */
PyObject *ct_py_net_wrap(cortado_net *n, PyObject *owner, bool owned);
/* A Net object of a solver whose worker ended: its calls raise from now on. */
void ct_py_net_invalidate(PyObject *net);
/* False (with an exception set) when a Blob's owner no longer holds its memory. */
int ct_py_owner_alive(PyObject *owner);
/* A Solver object over a data-parallel worker's solver (not owned), and
 * its end (its calls, and its nets', raise from then on). */
PyObject *ct_py_solver_wrap_worker(cortado_solver *s);
void ct_py_solver_invalidate(PyObject *solver);
/* A BlobVec (pycaffe's layer.blobs): the blobs of a net's layer, or of a
 * custom layer (which may add_blob during setup). */
PyObject *ct_py_blobvec_for_net_layer(PyObject *net_obj, cortado_net *n, int layer);
PyObject *ct_py_blobvec_for_custom(PyObject *layer_obj, cortado_layer *cl);

/* A Layer object for built-in layer i of a net (net_obj kept alive). */
PyObject *ct_py_layer_wrap_builtin(PyObject *net_obj, cortado_net *n, int i);
/* Python layers: registers the "Python" layer class (idempotent); the
 * second sets a Python exception on failure. */
cortado_status ct_py_python_layer_class_register(void);
int ct_py_register_python_layer(void);
/* Called before a Python layer is made, when set (the `cortado` command
 * starts its interpreter there); -1 with cortado's error set on failure. */
extern int (*ct_py_interpreter_hook)(void);
/* The `cortado` command's Python layers (python/src/embed.c). */
void ct_cli_python_setup(void);
/* Binds a Python layer object to its Cortado layer (for .blobs). */
void ct_py_layer_bind(PyObject *obj, cortado_layer *cl);
/* 0, or -1 with an exception when a Python layer's Cortado layer is gone. */
int ct_py_layer_alive(PyObject *layer);

/* SIGINT while Cortado runs (the main thread is in C, where Python's own
 * handler cannot run): the handler asks the running work to stop; after
 * it, KeyboardInterrupt is raised. */
typedef struct ct_py_sigint {
  bool installed;
  char old[256]; /* struct sigaction */
} ct_py_sigint;
void ct_py_sigint_begin(ct_py_sigint *g, cortado_solver *solver);
/* Restores the handler; returns -1 with KeyboardInterrupt set when SIGINT came. */
int ct_py_sigint_end(ct_py_sigint *g);

/* Module parts. */
int ct_py_blob_setup(PyObject *m);
int ct_py_net_setup(PyObject *m);
int ct_py_layer_setup(PyObject *m);
int ct_py_solver_setup(PyObject *m);
int ct_py_train_setup(PyObject *m);

/* The module's init function (also called by the `cortado` command's
 * embedded interpreter). */
PyMODINIT_FUNC PyInit__cortado(void);

#endif
