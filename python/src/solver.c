/* Solver: pycaffe's Solver over a cortado_solver.  SGDSolver and the
 * other update rules are Python subclasses (cortado/pycaffe.py) naming
 * their rule in _solver_type; get_solver takes the file's.  Also the
 * solvers of data-parallel workers (cortado.train), which live while
 * their worker trains. */
#include <signal.h>
#include <string.h>

#include "pyext.h"

PyTypeObject *ct_py_solver_type;

/* A pair of pycaffe callbacks (on_start, on_gradients). */
typedef struct py_callback {
  PyObject *on_start, *on_gradients;
  cortado_solver *s;
} py_callback;

typedef struct {
  PyObject_HEAD
  PyObject *dict;
  PyObject *weakrefs;
  cortado_solver *s;
  bool owned;
  PyObject *net;        /* the train net's Net, made on first use */
  PyObject *test_nets;  /* list of Net */
  py_callback **cbs;
  int ncbs;
} SolverObject;

static int solver_check(SolverObject *o) {
  if (o->s) return 0;
  PyErr_SetString(ct_py_error, "this Solver was not built (its constructor failed) or its worker has "
                               "finished training");
  return -1;
}

PyObject *ct_py_solver_wrap_worker(cortado_solver *s) {
  SolverObject *o = (SolverObject *)ct_py_solver_type->tp_alloc(ct_py_solver_type, 0);
  if (!o) return NULL;
  o->s = s;
  o->owned = false;
  return (PyObject *)o;
}

static void invalidate_nets(SolverObject *o) {
  if (o->net) ct_py_net_invalidate(o->net);
  for (Py_ssize_t i = 0; o->test_nets && i < PyList_GET_SIZE(o->test_nets); i++)
    ct_py_net_invalidate(PyList_GET_ITEM(o->test_nets, i));
}

void ct_py_solver_invalidate(PyObject *obj) {
  SolverObject *o = (SolverObject *)obj;
  invalidate_nets(o);
  o->s = NULL;
}

static int solver_init(PyObject *self, PyObject *args, PyObject *kw) {
  SolverObject *o = (SolverObject *)self;
  static char *kwlist[] = {"filename", NULL};
  PyObject *path;
  if (o->s) {
    PyErr_SetString(PyExc_RuntimeError, "Solver.__init__ called twice");
    return -1;
  }
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&:Solver", kwlist, PyUnicode_FSConverter, &path)) return -1;
  cortado_solver_options opts = CORTADO_SOLVER_OPTIONS_INIT;
  opts.keep_blob_diffs = true; /* pycaffe reads any blob's diff */
  PyObject *type = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "_solver_type");
  if (!type) PyErr_Clear();
  if (type && type != Py_None) {
    opts.type = PyUnicode_AsUTF8(type);
    if (!opts.type) {
      Py_DECREF(type);
      Py_DECREF(path);
      return -1;
    }
  }
  cortado_context *ctx;
  if (ct_py_new_context(&ctx) < 0) {
    Py_XDECREF(type);
    Py_DECREF(path);
    return -1;
  }
  cortado_status st;
  cortado_solver *s = NULL;
  Py_BEGIN_ALLOW_THREADS
  st = cortado_solver_create(ctx, PyBytes_AS_STRING(path), &opts, &s);
  Py_END_ALLOW_THREADS
  cortado_context_free(ctx);
  Py_XDECREF(type);
  if (st != CORTADO_OK) {
    Py_DECREF(path);
    ct_py_raise(st);
    return -1;
  }
  o->s = s;
  o->owned = true;
  PyObject *name = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(path));
  Py_DECREF(path);
  int rc = name ? PyObject_SetAttrString(self, "_filename", name) : -1;
  Py_XDECREF(name);
  return rc;
}

static int solver_traverse(PyObject *self, visitproc visit, void *arg) {
  SolverObject *o = (SolverObject *)self;
  Py_VISIT(o->dict);
  Py_VISIT(o->net);
  Py_VISIT(o->test_nets);
  for (int i = 0; i < o->ncbs; i++) {
    Py_VISIT(o->cbs[i]->on_start);
    Py_VISIT(o->cbs[i]->on_gradients);
  }
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int solver_clear(PyObject *self) {
  SolverObject *o = (SolverObject *)self;
  Py_CLEAR(o->dict);
  Py_CLEAR(o->net);
  Py_CLEAR(o->test_nets);
  return 0;
}

static void solver_dealloc(PyObject *self) {
  SolverObject *o = (SolverObject *)self;
  PyObject_GC_UnTrack(self);
  if (o->weakrefs) PyObject_ClearWeakRefs(self);
  invalidate_nets(o);
  solver_clear(self);
  if (o->s && o->owned) cortado_solver_free(o->s);
  o->s = NULL;
  for (int i = 0; i < o->ncbs; i++) {
    Py_XDECREF(o->cbs[i]->on_start);
    Py_XDECREF(o->cbs[i]->on_gradients);
    PyMem_Free(o->cbs[i]);
  }
  PyMem_Free(o->cbs);
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

/* ------------------------------------------------------------------ running */

/* Runs fn on the solver without the GIL, with SIGINT asking it to stop;
 * raises what failed (a kept Python exception first). */
static PyObject *run(SolverObject *o, cortado_status (*fn)(cortado_solver *, void *), void *arg) {
  if (solver_check(o) < 0) return NULL;
  ct_py_sigint guard;
  ct_py_sigint_begin(&guard, o->s);
  cortado_status st;
  Py_BEGIN_ALLOW_THREADS
  st = fn(o->s, arg);
  Py_END_ALLOW_THREADS
  int interrupted = ct_py_sigint_end(&guard);
  if (st != CORTADO_OK) {
    if (interrupted < 0) PyErr_Clear();
    return ct_py_raise(st);
  }
  if (ct_py_reraise_kept()) return NULL;
  if (interrupted < 0) return NULL;
  Py_RETURN_NONE;
}

static cortado_status do_step(cortado_solver *s, void *arg) { return cortado_solver_step(s, *(int *)arg); }
static cortado_status do_solve(cortado_solver *s, void *arg) { return cortado_solver_solve(s, arg); }
static cortado_status do_restore(cortado_solver *s, void *arg) { return cortado_solver_restore(s, arg); }
static cortado_status do_snapshot(cortado_solver *s, void *arg) { return cortado_solver_snapshot(s); }
static cortado_status do_update(cortado_solver *s, void *arg) { return cortado_solver_apply_update(s); }
static cortado_status do_test(cortado_solver *s, void *arg) { return cortado_solver_test_all(s); }

static PyObject *solver_step(PyObject *self, PyObject *arg) {
  long n = PyLong_AsLong(arg);
  if (n == -1 && PyErr_Occurred()) return NULL;
  if (n < 0 || n > INT32_MAX) {
    PyErr_Format(PyExc_ValueError, "step(%ld): give a number of iterations of at least 0", n);
    return NULL;
  }
  int iters = (int)n;
  return run((SolverObject *)self, do_step, &iters);
}

static PyObject *solver_solve(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"resume_file", NULL};
  PyObject *resume = Py_None, *path = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:solve", kwlist, &resume)) return NULL;
  if (resume != Py_None && !PyUnicode_FSConverter(resume, &path)) return NULL;
  PyObject *r = run((SolverObject *)self, do_solve, path ? PyBytes_AS_STRING(path) : NULL);
  Py_XDECREF(path);
  return r;
}

static PyObject *solver_restore(PyObject *self, PyObject *arg) {
  PyObject *path;
  if (!PyUnicode_FSConverter(arg, &path)) return NULL;
  PyObject *r = run((SolverObject *)self, do_restore, PyBytes_AS_STRING(path));
  Py_DECREF(path);
  return r;
}

static PyObject *solver_snapshot(PyObject *self, PyObject *u) { return run((SolverObject *)self, do_snapshot, NULL); }
static PyObject *solver_apply_update(PyObject *self, PyObject *u) { return run((SolverObject *)self, do_update, NULL); }
static PyObject *solver_test_all(PyObject *self, PyObject *u) { return run((SolverObject *)self, do_test, NULL); }

/* ------------------------------------------------------------------ callbacks */

static void cb_on_start(void *user) {
  py_callback *c = user;
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject *r = PyObject_CallNoArgs(c->on_start);
  if (!r) {
    /* on_start cannot fail in Caffe's loop: the step stops after this
     * iteration and raises the exception */
    ct_py_keep_exception();
    cortado_solver_request(c->s, CORTADO_REQUEST_STOP);
  }
  Py_XDECREF(r);
  PyGILState_Release(g);
}

static cortado_status cb_on_gradients(void *user) {
  py_callback *c = user;
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject *r = PyObject_CallNoArgs(c->on_gradients);
  cortado_status st = r ? CORTADO_OK : ct_py_fail_from_exception("solver callback on_gradients");
  Py_XDECREF(r);
  PyGILState_Release(g);
  return st;
}

static PyObject *solver_add_callback(PyObject *self, PyObject *args, PyObject *kw) {
  SolverObject *o = (SolverObject *)self;
  static char *kwlist[] = {"on_start", "on_gradients", NULL};
  PyObject *on_start, *on_gradients;
  if (solver_check(o) < 0 ||
      !PyArg_ParseTupleAndKeywords(args, kw, "OO:add_callback", kwlist, &on_start, &on_gradients))
    return NULL;
  if ((on_start != Py_None && !PyCallable_Check(on_start)) ||
      (on_gradients != Py_None && !PyCallable_Check(on_gradients))) {
    PyErr_SetString(PyExc_TypeError, "add_callback(on_start, on_gradients) takes two callables (or None)");
    return NULL;
  }
  py_callback *c = PyMem_Calloc(1, sizeof *c);
  py_callback **cbs = c ? PyMem_Realloc(o->cbs, (size_t)(o->ncbs + 1) * sizeof *cbs) : NULL;
  if (!cbs) {
    PyMem_Free(c);
    return PyErr_NoMemory();
  }
  o->cbs = cbs;
  c->on_start = on_start != Py_None ? Py_NewRef(on_start) : NULL;
  c->on_gradients = on_gradients != Py_None ? Py_NewRef(on_gradients) : NULL;
  c->s = o->s;
  o->cbs[o->ncbs++] = c;
  const cortado_solver_callback cb = {c->on_start ? cb_on_start : NULL, c->on_gradients ? cb_on_gradients : NULL, c};
  cortado_solver_add_callback(o->s, &cb);
  Py_RETURN_NONE;
}

static PyObject *solver_join_nccl(PyObject *self, PyObject *args) {
  SolverObject *o = (SolverObject *)self;
  Py_buffer id;
  int rank, count;
  if (solver_check(o) < 0 || !PyArg_ParseTuple(args, "y*ii:_join_nccl", &id, &rank, &count)) return NULL;
  if (id.len != CORTADO_NCCL_ID_BYTES) {
    PyBuffer_Release(&id);
    PyErr_Format(PyExc_ValueError, "an NCCL uid has %d bytes", CORTADO_NCCL_ID_BYTES);
    return NULL;
  }
  cortado_status st;
  Py_BEGIN_ALLOW_THREADS
  st = cortado_solver_join_nccl(o->s, id.buf, rank, count);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&id);
  if (st != CORTADO_OK) return ct_py_raise(st);
  Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ looking */

static PyObject *solver_get_net(PyObject *self, void *c) {
  SolverObject *o = (SolverObject *)self;
  if (solver_check(o) < 0) return NULL;
  if (!o->net) o->net = ct_py_net_wrap(cortado_solver_net(o->s), self, false);
  return Py_XNewRef(o->net);
}

static PyObject *solver_get_test_nets(PyObject *self, void *c) {
  SolverObject *o = (SolverObject *)self;
  if (solver_check(o) < 0) return NULL;
  if (!o->test_nets) {
    int n = cortado_solver_num_test_nets(o->s);
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (int i = 0; i < n; i++) {
      PyObject *net = ct_py_net_wrap(cortado_solver_test_net(o->s, i), self, false);
      if (!net) {
        Py_DECREF(list);
        return NULL;
      }
      PyList_SET_ITEM(list, i, net);
    }
    o->test_nets = list;
  }
  return PyList_GetSlice(o->test_nets, 0, PyList_GET_SIZE(o->test_nets));
}

#define INT_GETTER(name, expr)                                  \
  static PyObject *name(PyObject *self, void *c) {              \
    SolverObject *o = (SolverObject *)self;                     \
    if (solver_check(o) < 0) return NULL;                       \
    return PyLong_FromLong(expr);                               \
  }
INT_GETTER(solver_get_iter, cortado_solver_iter(o->s))
INT_GETTER(solver_get_max_iter, cortado_solver_max_iter(o->s))
INT_GETTER(solver_get_rank, cortado_solver_rank(o->s))
INT_GETTER(solver_get_world, cortado_solver_world(o->s))

static PyObject *solver_get_type(PyObject *self, void *c) {
  SolverObject *o = (SolverObject *)self;
  if (solver_check(o) < 0) return NULL;
  return PyUnicode_FromString(cortado_solver_type(o->s));
}

static PyObject *solver_get_loss(PyObject *self, void *c) {
  SolverObject *o = (SolverObject *)self;
  if (solver_check(o) < 0) return NULL;
  return PyFloat_FromDouble(cortado_solver_smoothed_loss(o->s));
}

static PyObject *solver_get_rate(PyObject *self, void *c) {
  SolverObject *o = (SolverObject *)self;
  if (solver_check(o) < 0) return NULL;
  return PyFloat_FromDouble(cortado_solver_rate(o->s));
}

static PyMethodDef solver_methods[] = {
    {"step", solver_step, METH_O, "step(iters): runs iters iterations (Caffe's Step)."},
    {"solve", (PyCFunction)(void (*)(void))solver_solve, METH_VARARGS | METH_KEYWORDS,
     "solve(resume_file=None): trains to max_iter, resuming from a .solverstate when given."},
    {"restore", solver_restore, METH_O, "restore(solverstate): continues from a snapshot."},
    {"snapshot", solver_snapshot, METH_NOARGS, "Writes <prefix>_iter_N.caffemodel and .solverstate."},
    {"apply_update", solver_apply_update, METH_NOARGS,
     "One update from the train net's parameter gradients (iter is not advanced)."},
    {"test_all", solver_test_all, METH_NOARGS, "Runs every test net for its test_iter passes."},
    {"add_callback", (PyCFunction)(void (*)(void))solver_add_callback, METH_VARARGS | METH_KEYWORDS,
     "add_callback(on_start, on_gradients): called at each iteration's start and once its gradients "
     "are ready."},
    {"_join_nccl", solver_join_nccl, METH_VARARGS, "NCCL(solver, uid)'s work."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef solver_getset[] = {
    {"net", solver_get_net, NULL, "The train net.", NULL},
    {"test_nets", solver_get_test_nets, NULL, "The test nets (sharing the train net's weights).", NULL},
    {"iter", solver_get_iter, NULL, "Updates done.", NULL},
    {"max_iter", solver_get_max_iter, NULL, "The solver's max_iter.", NULL},
    {"type", solver_get_type, NULL, "The update rule: 'SGD', 'Adam', ...", NULL},
    {"rank", solver_get_rank, NULL, "This worker's rank (data-parallel training; 0 otherwise).", NULL},
    {"world", solver_get_world, NULL, "The number of workers (1 without data parallelism).", NULL},
    {"smoothed_loss", solver_get_loss, NULL, "The loss as the last display logged it.", NULL},
    {"learning_rate", solver_get_rate, NULL, "The rate of the last update.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef solver_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(SolverObject, dict), READONLY, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(SolverObject, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyType_Slot solver_slots[] = {
    {Py_tp_init, solver_init},
    {Py_tp_dealloc, solver_dealloc},
    {Py_tp_traverse, solver_traverse},
    {Py_tp_clear, solver_clear},
    {Py_tp_methods, solver_methods},
    {Py_tp_getset, solver_getset},
    {Py_tp_members, solver_members},
    {Py_tp_doc, "Solver(solver_prototxt): Caffe's solver; the update rule is the subclass's "
                "(SGDSolver, AdamSolver, ...) or, for get_solver, the file's."},
    {0, NULL}};

static PyType_Spec solver_spec = {"cortado._cortado.Solver", sizeof(SolverObject), 0,
                                  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, solver_slots};

int ct_py_solver_setup(PyObject *m) {
  ct_py_solver_type = (PyTypeObject *)PyType_FromSpec(&solver_spec);
  if (!ct_py_solver_type) return -1;
  return PyModule_AddObjectRef(m, "Solver", (PyObject *)ct_py_solver_type);
}
