/* _train: cortado_train (the engine of `cortado train`) from Python, with
 * a hook on each worker's solver and the root's displays. */
#include "pyext.h"

/* What the hooks of one _train call share (under the GIL). */
typedef struct train_call {
  PyObject *on_worker;  /* callable(solver) or NULL */
  PyObject *on_display; /* callable(dict) or NULL */
  PyObject *workers;    /* dict: address of the cortado_solver -> Solver object */
} train_call;

static cortado_status on_worker(void *user, cortado_solver *s) {
  train_call *t = user;
  PyGILState_STATE g = PyGILState_Ensure();
  cortado_status st = CORTADO_OK;
  PyObject *key = PyLong_FromVoidPtr(s);
  PyObject *obj = key ? ct_py_solver_wrap_worker(s) : NULL;
  if (!obj || PyDict_SetItem(t->workers, key, obj) < 0) {
    st = ct_py_fail_from_exception("on_worker");
  } else if (t->on_worker) {
    PyObject *r = PyObject_CallOneArg(t->on_worker, obj);
    if (!r) st = ct_py_fail_from_exception("on_worker");
    Py_XDECREF(r);
  }
  Py_XDECREF(obj);
  Py_XDECREF(key);
  PyGILState_Release(g);
  return st;
}

static void on_worker_end(void *user, cortado_solver *s) {
  train_call *t = user;
  PyGILState_STATE g = PyGILState_Ensure();
  PyObject *key = PyLong_FromVoidPtr(s);
  PyObject *obj = key ? PyDict_GetItemWithError(t->workers, key) : NULL;
  if (obj) {
    ct_py_solver_invalidate(obj);
    PyDict_DelItem(t->workers, key);
  }
  if (PyErr_Occurred()) PyErr_Clear();
  Py_XDECREF(key);
  PyGILState_Release(g);
}

static cortado_status on_display(void *user, const cortado_display *d) {
  train_call *t = user;
  if (!t->on_display) return CORTADO_OK;
  PyGILState_STATE g = PyGILState_Ensure();
  cortado_status st = CORTADO_OK;
  PyObject *scores = PyList_New(d->ntest_scores);
  for (int i = 0; scores && i < d->ntest_scores; i++)
    PyList_SET_ITEM(scores, i, PyFloat_FromDouble(d->test_scores[i]));
  PyObject *info = scores ? Py_BuildValue("{s:i,s:d,s:d,s:L,s:N}", "iter", d->iter, "loss", (double)d->loss,
                                          "lr", (double)d->rate, "inputs_per_iter", d->inputs_per_iter,
                                          "test_scores", scores)
                          : NULL;
  PyObject *r = info ? PyObject_CallOneArg(t->on_display, info) : NULL;
  if (!r) st = ct_py_fail_from_exception("on_display");
  Py_XDECREF(r);
  Py_XDECREF(info);
  PyGILState_Release(g);
  return st;
}

/* An optional string argument: NULL for None. */
static int opt_path(PyObject *v, PyObject **keep, const char **out) {
  *out = NULL;
  if (!v || v == Py_None) return 0;
  if (!PyUnicode_FSConverter(v, keep)) return -1;
  *out = PyBytes_AS_STRING(*keep);
  return 0;
}

static PyObject *py_train(PyObject *m, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"solver", "gpus", "cpu_workers", "mpi", "weights", "snapshot", "level", "stages",
                           "global_batch", "bucket_mb", "comm_timeout", "strict_fp32", "num_shards",
                           "shard_id", "run_id", "file_store_path", "redis_host", "redis_port",
                           "redis_password", "rendezvous_timeout", "gloo_iface", "gloo_host",
                           "process_rank", "nccl_id", "on_worker", "on_display", NULL};
  PyObject *solver, *gpus = Py_None, *weights = Py_None, *snapshot = Py_None, *stages = Py_None,
                    *run_id = Py_None, *store = Py_None, *redis_host = Py_None, *redis_password = Py_None,
                    *gloo_iface = Py_None, *gloo_host = Py_None, *nccl_id = Py_None, *worker_cb = Py_None,
                    *display_cb = Py_None;
  int cpu_workers = 0, mpi = 0, level = 0, global_batch = 0, strict = 0, num_shards = 1, shard_id = 0,
      redis_port = 0, process_rank = -1;
  double bucket_mb = 0, comm_timeout = 0, rdv_timeout = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OipOOiOpddpiiOOOiOdOOiOOO:_train", kwlist, &solver, &gpus,
                                   &cpu_workers, &mpi, &weights, &snapshot, &level, &stages, &global_batch,
                                   &bucket_mb, &comm_timeout, &strict, &num_shards, &shard_id, &run_id, &store,
                                   &redis_host, &redis_port, &redis_password, &rdv_timeout, &gloo_iface,
                                   &gloo_host, &process_rank, &nccl_id, &worker_cb, &display_cb))
    return NULL;
  cortado_train_options o = CORTADO_TRAIN_OPTIONS_INIT;
  PyObject *keep[12] = {NULL};
  PyObject *stage_list = NULL, *gpu_list = NULL, *result = NULL;
  int *gpu_ids = NULL;
  const char **stage_ptrs = NULL;
  const char *solver_path;
  Py_buffer id = {0};
  train_call t = {NULL, NULL, NULL};
  if (opt_path(solver, &keep[0], &solver_path) < 0 || opt_path(weights, &keep[1], &o.weights) < 0 ||
      opt_path(snapshot, &keep[2], &o.snapshot) < 0 || opt_path(run_id, &keep[3], &o.run_id) < 0 ||
      opt_path(store, &keep[4], &o.file_store_path) < 0 || opt_path(redis_host, &keep[5], &o.redis_host) < 0 ||
      opt_path(redis_password, &keep[6], &o.redis_password) < 0 ||
      opt_path(gloo_iface, &keep[7], &o.gloo_iface) < 0 || opt_path(gloo_host, &keep[8], &o.gloo_host) < 0)
    goto done;
  if (!solver_path) {
    PyErr_SetString(PyExc_TypeError, "train: give the solver prototxt");
    goto done;
  }
  if (gpus != Py_None) {
    gpu_list = PySequence_Fast(gpus, "gpus must be a list of GPU ordinals");
    if (!gpu_list) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(gpu_list);
    gpu_ids = PyMem_Calloc((size_t)n + 1, sizeof *gpu_ids);
    for (Py_ssize_t i = 0; i < n; i++) {
      long g = PyLong_AsLong(PySequence_Fast_GET_ITEM(gpu_list, i));
      if (g == -1 && PyErr_Occurred()) goto done;
      gpu_ids[i] = (int)g;
    }
    o.gpus = gpu_ids;
    o.ngpus = (int)n;
  }
  if (stages != Py_None) {
    stage_list = PySequence_Fast(stages, "stages must be a list of strings");
    if (!stage_list) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(stage_list);
    stage_ptrs = PyMem_Calloc((size_t)n + 1, sizeof *stage_ptrs);
    for (Py_ssize_t i = 0; i < n; i++)
      if (!(stage_ptrs[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(stage_list, i)))) goto done;
    o.stages = stage_ptrs;
    o.nstages = (int)n;
  }
  if (nccl_id != Py_None) {
    if (PyObject_GetBuffer(nccl_id, &id, PyBUF_SIMPLE) < 0) goto done;
    if (id.len != CORTADO_NCCL_ID_BYTES) {
      PyErr_Format(PyExc_ValueError, "nccl_id has %d bytes", CORTADO_NCCL_ID_BYTES);
      goto done;
    }
    o.nccl_id = id.buf;
  }
  o.cpu_workers = cpu_workers;
  o.mpi = mpi;
  o.level = level;
  o.global_batch = global_batch;
  o.bucket_mb = bucket_mb;
  o.comm_timeout_s = comm_timeout;
  o.strict_fp32 = strict;
  o.num_shards = num_shards;
  o.shard_id = shard_id;
  o.redis_port = redis_port;
  o.rendezvous_timeout_s = rdv_timeout;
  o.process_rank = process_rank;
  t.on_worker = worker_cb != Py_None ? worker_cb : NULL;
  t.on_display = display_cb != Py_None ? display_cb : NULL;
  t.workers = PyDict_New();
  if (!t.workers) goto done;
  o.on_worker = on_worker;
  o.on_worker_end = on_worker_end;
  o.on_display = on_display;
  o.user = &t;
  ct_py_sigint guard;
  ct_py_sigint_begin(&guard, NULL);
  cortado_status st;
  Py_BEGIN_ALLOW_THREADS
  st = cortado_train(solver_path, &o);
  Py_END_ALLOW_THREADS
  int interrupted = ct_py_sigint_end(&guard);
  if (st != CORTADO_OK) {
    if (interrupted < 0) PyErr_Clear();
    ct_py_raise(st);
  } else if (!ct_py_reraise_kept() && interrupted == 0) {
    result = Py_NewRef(Py_None);
  }
done:
  if (id.obj) PyBuffer_Release(&id);
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) Py_XDECREF(keep[i]);
  Py_XDECREF(stage_list);
  Py_XDECREF(gpu_list);
  Py_XDECREF(t.workers);
  PyMem_Free(stage_ptrs);
  PyMem_Free(gpu_ids);
  return result;
}

static PyMethodDef train_methods[] = {
    {"_train", (PyCFunction)(void (*)(void))py_train, METH_VARARGS | METH_KEYWORDS,
     "The engine of `cortado train` (see cortado.train)."},
    {NULL, NULL, 0, NULL}};

int ct_py_train_setup(PyObject *m) { return PyModule_AddFunctions(m, train_methods); }
