/* cortado._cortado: the module (pycaffe's _caffe): errors, the mode and
 * device of new nets, random seeds, logging, what the build has, and
 * SIGINT while Cortado runs. */
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pyext.h"
#include "pythread.h"

PyObject *ct_py_error;

/* ------------------------------------------------------------------ errors */

/* The exception of Python code (a layer, a callback) that failed inside a
 * call of Cortado, kept under the GIL until that call raises it. */
static PyObject *g_kept_type, *g_kept_value, *g_kept_tb;

void ct_py_keep_exception(void) {
  if (g_kept_type) {
    PyErr_Clear(); /* the first failure is the one reported */
    return;
  }
  PyErr_Fetch(&g_kept_type, &g_kept_value, &g_kept_tb);
  PyErr_NormalizeException(&g_kept_type, &g_kept_value, &g_kept_tb);
}

int ct_py_reraise_kept(void) {
  if (!g_kept_type) return 0;
  PyErr_Restore(g_kept_type, g_kept_value, g_kept_tb);
  g_kept_type = g_kept_value = g_kept_tb = NULL;
  return 1;
}

cortado_status ct_py_fail_from_exception(const char *where) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  const char *tname = type ? ((PyTypeObject *)type)->tp_name : "exception";
  PyObject *text = value ? PyObject_Str(value) : NULL;
  const char *msg = text ? PyUnicode_AsUTF8(text) : NULL;
  if (!msg) PyErr_Clear();
  cortado_set_error(CORTADO_ERR_INVALID, "%s: %s: %s", where, tname, msg ? msg : "");
  Py_XDECREF(text);
  PyErr_Restore(type, value, tb);
  ct_py_keep_exception();
  return CORTADO_ERR_INVALID;
}

PyObject *ct_py_raise(cortado_status st) {
  const char *msg = cortado_last_error();
  if (g_kept_type) {
    ct_py_reraise_kept();
#if PY_VERSION_HEX >= 0x030B0000
    /* Cortado's message (which layer, which worker) as a note */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *r = value ? PyObject_CallMethod(value, "add_note", "s", msg) : NULL;
    if (!r) PyErr_Clear();
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
#endif
    return NULL;
  }
  PyObject *args = Py_BuildValue("(s)", msg);
  PyObject *exc = args ? PyObject_Call(ct_py_error, args, NULL) : NULL;
  Py_XDECREF(args);
  if (!exc) return NULL;
  PyObject *code = PyLong_FromLong(st);
  if (code) PyObject_SetAttrString(exc, "status", code);
  Py_XDECREF(code);
  PyObject *name = PyUnicode_FromString(cortado_status_name(st));
  if (name) PyObject_SetAttrString(exc, "status_name", name);
  Py_XDECREF(name);
  PyErr_SetObject(ct_py_error, exc);
  Py_DECREF(exc);
  return NULL;
}

/* ------------------------------------------------------------------ mode */

static int g_device = CORTADO_CPU;  /* set_mode_gpu uses g_gpu */
static int g_gpu = 0;
static bool g_seeded;
static unsigned long long g_seed, g_seed_uses;
static int g_solver_rank = 0, g_solver_count = 1;
static bool g_multiprocess;
static bool g_tf32 = true;

int ct_py_current_device(void) { return g_device; }

int ct_py_new_context(cortado_context **out) {
  uint64_t seed;
  if (g_seeded) {
    seed = g_seed + g_seed_uses++;
  } else {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
  }
  cortado_status st = cortado_context_create(g_device, seed, out);
  if (st != CORTADO_OK) {
    ct_py_raise(st);
    return -1;
  }
  cortado_context_set_tf32(*out, g_tf32);
  if (g_solver_count > 1) cortado_context_set_worker(*out, g_solver_rank, g_solver_count);
  return 0;
}

static PyObject *set_mode_cpu(PyObject *m, PyObject *u) {
  g_device = CORTADO_CPU;
  Py_RETURN_NONE;
}

static PyObject *set_mode_gpu(PyObject *m, PyObject *u) {
  if (!cortado_has_cuda()) {
    PyErr_SetString(ct_py_error, "set_mode_gpu: this build of Cortado has no CUDA backend");
    return NULL;
  }
  if (cortado_gpu_count() <= g_gpu) {
    PyErr_Format(ct_py_error, "set_mode_gpu: GPU %d is not there (%d visible)", g_gpu, cortado_gpu_count());
    return NULL;
  }
  g_device = g_gpu;
  Py_RETURN_NONE;
}

static PyObject *set_device(PyObject *m, PyObject *arg) {
  long d = PyLong_AsLong(arg);
  if (d == -1 && PyErr_Occurred()) return NULL;
  if (d < 0) {
    PyErr_Format(PyExc_ValueError, "set_device(%ld): a GPU ordinal is at least 0", d);
    return NULL;
  }
  g_gpu = (int)d;
  if (g_device != CORTADO_CPU) g_device = g_gpu;
  Py_RETURN_NONE;
}

static PyObject *mode(PyObject *m, PyObject *u) { return PyLong_FromLong(g_device); }

static PyObject *set_random_seed(PyObject *m, PyObject *arg) {
  unsigned long long s = PyLong_AsUnsignedLongLongMask(arg);
  if (PyErr_Occurred()) return NULL;
  g_seed = s;
  g_seed_uses = 0;
  g_seeded = true;
  Py_RETURN_NONE;
}

static PyObject *set_math(PyObject *m, PyObject *arg) {
  const char *s = PyUnicode_AsUTF8(arg);
  if (!s) return NULL;
  if (strcmp(s, "tf32") == 0) g_tf32 = true;
  else if (strcmp(s, "fp32") == 0) g_tf32 = false;
  else {
    PyErr_Format(PyExc_ValueError, "set_math('%s'): give 'tf32' or 'fp32'", s);
    return NULL;
  }
  Py_RETURN_NONE;
}

#define INT_PAIR(getter, setter, var, lo)                                           \
  static PyObject *getter(PyObject *m, PyObject *u) { return PyLong_FromLong(var); } \
  static PyObject *setter(PyObject *m, PyObject *arg) {                              \
    long v = PyLong_AsLong(arg);                                                     \
    if (v == -1 && PyErr_Occurred()) return NULL;                                    \
    if (v < (lo)) {                                                                  \
      PyErr_Format(PyExc_ValueError, #setter "(%ld): at least %d", v, (lo));         \
      return NULL;                                                                   \
    }                                                                                \
    var = (int)v;                                                                    \
    Py_RETURN_NONE;                                                                  \
  }
INT_PAIR(solver_count, set_solver_count, g_solver_count, 1)
INT_PAIR(solver_rank, set_solver_rank, g_solver_rank, 0)

static PyObject *set_multiprocess(PyObject *m, PyObject *arg) {
  int v = PyObject_IsTrue(arg);
  if (v < 0) return NULL;
  g_multiprocess = v;
  Py_RETURN_NONE;
}

static PyObject *multiprocess(PyObject *m, PyObject *u) { return PyBool_FromLong(g_multiprocess); }

/* ------------------------------------------------------------------ the rest */

static PyObject *layer_type_list(PyObject *m, PyObject *u) {
  int n;
  const char *const *names = cortado_layer_types(&n);
  PyObject *list = PyList_New(n);
  if (!list) return NULL;
  for (int i = 0; i < n; i++) PyList_SET_ITEM(list, i, PyUnicode_FromString(names[i]));
  return list;
}

static PyObject *has_nccl(PyObject *m, PyObject *u) { return PyBool_FromLong(cortado_has_nccl()); }
static PyObject *has_cuda(PyObject *m, PyObject *u) { return PyBool_FromLong(cortado_has_cuda()); }
static PyObject *has_mpi(PyObject *m, PyObject *u) { return PyBool_FromLong(cortado_has_mpi()); }
static PyObject *has_gloo(PyObject *m, PyObject *u) { return PyBool_FromLong(cortado_has_gloo()); }
static PyObject *gpu_count(PyObject *m, PyObject *u) { return PyLong_FromLong(cortado_gpu_count()); }
static PyObject *mpi_launched(PyObject *m, PyObject *u) { return PyBool_FromLong(cortado_mpi_launched()); }

/* init_log(level=0, std_err=True): as pycaffe (logs go to stderr). */
static PyObject *init_log(PyObject *m, PyObject *args) {
  int level = -1, std_err = 1;
  if (!PyArg_ParseTuple(args, "|ip:init_log", &level, &std_err)) return NULL;
  if (level >= 0) cortado_set_log_level(level);
  Py_RETURN_NONE;
}

static PyObject *log_line(PyObject *m, PyObject *arg) {
  const char *s = PyUnicode_AsUTF8(arg);
  if (!s) return NULL;
  cortado_log(0, s);
  Py_RETURN_NONE;
}

static PyObject *new_nccl_uid(PyObject *m, PyObject *u) {
  unsigned char id[CORTADO_NCCL_ID_BYTES];
  cortado_status st = cortado_nccl_new_id(id);
  if (st != CORTADO_OK) return ct_py_raise(st);
  return PyBytes_FromStringAndSize((const char *)id, sizeof id);
}

static PyObject *seconds(PyObject *m, PyObject *u) { return PyFloat_FromDouble(cortado_seconds()); }

/* _image_read(path, color) -> (bytes of h*w*c pixels, h, w, c) */
static PyObject *image_read(PyObject *m, PyObject *args) {
  PyObject *path;
  int color = 1;
  if (!PyArg_ParseTuple(args, "O&|p:_image_read", PyUnicode_FSConverter, &path, &color)) return NULL;
  int h, w, c;
  unsigned char *px = NULL;
  cortado_status st;
  Py_BEGIN_ALLOW_THREADS
  st = cortado_image_read(PyBytes_AS_STRING(path), color != 0, &h, &w, &c, &px);
  Py_END_ALLOW_THREADS
  Py_DECREF(path);
  if (st != CORTADO_OK) return ct_py_raise(st);
  PyObject *r = Py_BuildValue("(y#iii)", (const char *)px, (Py_ssize_t)h * w * c, h, w, c);
  cortado_free(px);
  return r;
}

/* _image_write_png(path, pixels, h, w, c) */
static PyObject *image_write_png(PyObject *m, PyObject *args) {
  PyObject *path;
  Py_buffer px;
  int h, w, c;
  if (!PyArg_ParseTuple(args, "O&y*iii:_image_write_png", PyUnicode_FSConverter, &path, &px, &h, &w, &c))
    return NULL;
  cortado_status st = CORTADO_ERR_INVALID;
  if (h < 0 || w < 0 || c < 0 || px.len != (Py_ssize_t)h * w * c)
    cortado_set_error(st, "_image_write_png: %zd bytes for %d x %d x %d pixels", px.len, h, w, c);
  else
    st = cortado_image_write_png(PyBytes_AS_STRING(path), px.buf, h, w, c);
  PyBuffer_Release(&px);
  Py_DECREF(path);
  if (st != CORTADO_OK) return ct_py_raise(st);
  Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ SIGINT */

static cortado_solver *volatile g_sigint_solver;
static volatile sig_atomic_t g_sigint_seen;

static void on_sigint(int sig) {
  (void)sig;
  g_sigint_seen = 1;
  cortado_solver *s = g_sigint_solver;
  if (s) cortado_solver_request(s, CORTADO_REQUEST_STOP);
  cortado_train_request(CORTADO_REQUEST_STOP);
}

/* Whether this is Python's main thread (the one SIGINT is Python's on). */
static bool on_main_thread(void) {
  static unsigned long main_ident;
  if (!main_ident) {
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *t = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
    PyObject *id = t ? PyObject_GetAttrString(t, "ident") : NULL;
    if (id) main_ident = PyLong_AsUnsignedLong(id);
    if (PyErr_Occurred()) PyErr_Clear();
    Py_XDECREF(id);
    Py_XDECREF(t);
    Py_XDECREF(threading);
  }
  return main_ident && PyThread_get_thread_ident() == main_ident;
}

void ct_py_sigint_begin(ct_py_sigint *g, cortado_solver *solver) {
  g->installed = false;
  if (!on_main_thread()) return;
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  g_sigint_seen = 0;
  g_sigint_solver = solver;
  if (sigaction(SIGINT, &sa, &old) != 0) return;
  _Static_assert(sizeof old <= sizeof g->old, "room for the old action");
  memcpy(g->old, &old, sizeof old);
  g->installed = true;
}

int ct_py_sigint_end(ct_py_sigint *g) {
  if (!g->installed) return 0;
  struct sigaction old;
  memcpy(&old, g->old, sizeof old);
  sigaction(SIGINT, &old, NULL);
  g_sigint_solver = NULL;
  g->installed = false;
  if (!g_sigint_seen) return 0;
  g_sigint_seen = 0;
  PyErr_SetNone(PyExc_KeyboardInterrupt);
  return -1;
}

/* ------------------------------------------------------------------ module */

static PyMethodDef module_methods[] = {
    {"set_mode_cpu", set_mode_cpu, METH_NOARGS, "New nets and solvers compute on the CPU (the default)."},
    {"set_mode_gpu", set_mode_gpu, METH_NOARGS, "New nets and solvers compute on the GPU of set_device."},
    {"set_device", set_device, METH_O, "set_device(id): the GPU of set_mode_gpu (default 0)."},
    {"mode", mode, METH_NOARGS, "The device of new nets: -1 for the CPU, else the GPU."},
    {"set_random_seed", set_random_seed, METH_O,
     "set_random_seed(seed): fillers, dropout and shuffling of the nets made next repeat from seed."},
    {"set_math", set_math, METH_O, "set_math('tf32' | 'fp32'): GPU math of the nets made next."},
    {"solver_count", solver_count, METH_NOARGS, "Workers of pycaffe-style multi-GPU training."},
    {"set_solver_count", set_solver_count, METH_O, "set_solver_count(n), before making the solver."},
    {"solver_rank", solver_rank, METH_NOARGS, "This worker's rank."},
    {"set_solver_rank", set_solver_rank, METH_O, "set_solver_rank(r), before making the solver."},
    {"set_multiprocess", set_multiprocess, METH_O, "set_multiprocess(flag): workers are processes."},
    {"multiprocess", multiprocess, METH_NOARGS, "Whether workers are processes."},
    {"layer_type_list", layer_type_list, METH_NOARGS, "The registered layer types."},
    {"has_nccl", has_nccl, METH_NOARGS, "Whether this build has NCCL (multi-GPU)."},
    {"has_cuda", has_cuda, METH_NOARGS, "Whether this build has the CUDA backend."},
    {"has_mpi", has_mpi, METH_NOARGS, "Whether this build has MPI."},
    {"has_gloo", has_gloo, METH_NOARGS, "Whether this build has Gloo (CPU shards)."},
    {"gpu_count", gpu_count, METH_NOARGS, "Visible GPUs."},
    {"mpi_launched", mpi_launched, METH_NOARGS, "Whether mpirun started this process."},
    {"init_log", init_log, METH_VARARGS, "init_log(level=0, std_err=True): the lowest level logged."},
    {"log", log_line, METH_O, "log(message): an INFO line in Cortado's log."},
    {"_new_nccl_uid", new_nccl_uid, METH_NOARGS, "A fresh NCCL unique id (bytes)."},
    {"_seconds", seconds, METH_NOARGS, "A monotonic clock in seconds."},
    {"_image_read", image_read, METH_VARARGS, "Decodes a JPEG or PNG file (RGB or gray pixels)."},
    {"_image_write_png", image_write_png, METH_VARARGS, "Writes 8-bit pixels as a PNG file."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "cortado._cortado",
    "Cortado's compiled core (pycaffe's _caffe): nets, blobs, layers, solvers over cortado.h.", -1,
    module_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cortado(void) {
  PyObject *m = PyModule_Create(&module_def);
  if (!m) return NULL;
  ct_py_error = PyErr_NewExceptionWithDoc("cortado.CortadoError",
                                          "A failure reported by Cortado (bad input, a file that cannot be "
                                          "read, a device error); .status and .status_name say which kind.",
                                          PyExc_RuntimeError, NULL);
  if (!ct_py_error || PyModule_AddObjectRef(m, "CortadoError", ct_py_error) < 0 ||
      PyModule_AddStringConstant(m, "__version__", cortado_version()) < 0 ||
      PyModule_AddIntConstant(m, "API_VERSION", cortado_api_version()) < 0 ||
      PyModule_AddIntConstant(m, "TRAIN", CORTADO_TRAIN) < 0 || PyModule_AddIntConstant(m, "TEST", CORTADO_TEST) < 0 ||
      ct_py_blob_setup(m) < 0 || ct_py_net_setup(m) < 0 || ct_py_layer_setup(m) < 0 || ct_py_solver_setup(m) < 0 ||
      ct_py_train_setup(m) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
