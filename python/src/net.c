/* Net: pycaffe's Net over a cortado_net.  The low-level members carry
 * _caffe's names (_forward, _backward, _blobs, _blob_names, _layer_names,
 * _inputs, _outputs, _top_ids, _bottom_ids, _blob_loss_weights,
 * _set_input_arrays); cortado/pycaffe.py adds forward, backward, blobs,
 * params and the rest on top, as pycaffe.py does. */

#include "pyext.h"

PyTypeObject *ct_py_net_type;

typedef struct {
  PyObject_HEAD
  PyObject *dict;       /* pycaffe caches its OrderedDicts on the net */
  PyObject *weakrefs;
  cortado_net *n;
  PyObject *owner;      /* a solver keeping a net it owns alive, or NULL */
  bool owned;
  PyObject *blobs;      /* list of Blob, made on first use */
  PyObject *layers;     /* list of Layer (Python layers as their own objects) */
  Py_buffer inputs[2];  /* _set_input_arrays' data and labels, held while used */
  bool have_inputs;
} NetObject;

static void release_inputs(NetObject *o) {
  if (!o->have_inputs) return;
  PyBuffer_Release(&o->inputs[0]);
  PyBuffer_Release(&o->inputs[1]);
  o->have_inputs = false;
}

static int net_check(NetObject *o) {
  if (o->n) return 0;
  PyErr_SetString(ct_py_error, "this Net was not built (its constructor failed) or its solver's "
                               "training has ended");
  return -1;
}

PyObject *ct_py_net_wrap(cortado_net *n, PyObject *owner, bool owned) {
  NetObject *o = (NetObject *)ct_py_net_type->tp_alloc(ct_py_net_type, 0);
  if (!o) return NULL;
  o->n = n;
  o->owner = Py_XNewRef(owner);
  o->owned = owned;
  return (PyObject *)o;
}

void ct_py_net_invalidate(PyObject *net) {
  NetObject *o = (NetObject *)net;
  o->n = NULL;
  Py_CLEAR(o->blobs);
  Py_CLEAR(o->layers);
}

int ct_py_owner_alive(PyObject *owner) {
  if (owner && PyObject_TypeCheck(owner, ct_py_net_type) && !((NetObject *)owner)->n) return net_check((NetObject *)owner);
  if (owner && PyObject_TypeCheck(owner, ct_py_layer_type)) return ct_py_layer_alive(owner);
  return 0;
}

/* Net(network_file, phase, level=0, stages=None, weights=None), and the
 * old Net(network_file, weights_file, phase). */
static int net_init(PyObject *self, PyObject *args, PyObject *kw) {
  NetObject *o = (NetObject *)self;
  if (o->n) {
    PyErr_SetString(PyExc_RuntimeError, "Net.__init__ called twice");
    return -1;
  }
  PyObject *file = NULL, *phase = NULL, *weights = Py_None, *stages = Py_None, *level = NULL, *second = NULL,
           *third = NULL;
  static char *kwlist[] = {"network_file", "phase", "weights_file", "level", "stages", "weights", NULL};
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO$OOO:Net", kwlist, &file, &second, &third, &level, &stages,
                                   &weights))
    return -1;
  /* the old form: the second positional is the weights file */
  if (second && (PyUnicode_Check(second) || PyBytes_Check(second) || PyObject_HasAttrString(second, "__fspath__"))) {
    if (weights != Py_None) {
      PyErr_SetString(PyExc_TypeError, "Net(): weights given twice");
      return -1;
    }
    weights = second;
    phase = third;
  } else {
    phase = second;
    if (third) {
      PyErr_SetString(PyExc_TypeError, "Net(network_file, phase, level=0, stages=None, weights=None)");
      return -1;
    }
  }
  if (!phase) {
    PyErr_SetString(PyExc_TypeError, "Net() needs the phase: cortado.TRAIN or cortado.TEST");
    return -1;
  }
  long ph = PyLong_AsLong(phase);
  if (ph == -1 && PyErr_Occurred()) return -1;
  if (ph != CORTADO_TRAIN && ph != CORTADO_TEST) {
    PyErr_Format(PyExc_ValueError, "phase %ld: give cortado.TRAIN (0) or cortado.TEST (1)", ph);
    return -1;
  }
  cortado_net_options opts = CORTADO_NET_OPTIONS_INIT;
  opts.phase = (cortado_phase)ph;
  if (level) {
    long lv = PyLong_AsLong(level);
    if (lv == -1 && PyErr_Occurred()) return -1;
    opts.level = (int)lv;
  }
  PyObject *path = NULL, *wpath = NULL, *stage_list = NULL;
  const char **stage_ptrs = NULL;
  int rc = -1;
  if (!PyUnicode_FSConverter(file, &path)) goto done;
  if (weights != Py_None) {
    if (!PyUnicode_FSConverter(weights, &wpath)) goto done;
    opts.weights = PyBytes_AS_STRING(wpath);
  }
  if (stages != Py_None) {
    stage_list = PySequence_Fast(stages, "stages must be a list of strings");
    if (!stage_list) goto done;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(stage_list);
    stage_ptrs = PyMem_Calloc((size_t)ns + 1, sizeof *stage_ptrs);
    for (Py_ssize_t i = 0; i < ns; i++) {
      stage_ptrs[i] = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(stage_list, i));
      if (!stage_ptrs[i]) goto done;
    }
    opts.stages = stage_ptrs;
    opts.nstages = (int)ns;
  }
  cortado_context *ctx;
  if (ct_py_new_context(&ctx) < 0) goto done;
  cortado_status st;
  cortado_net *n = NULL;
  Py_BEGIN_ALLOW_THREADS
  st = cortado_net_create(ctx, PyBytes_AS_STRING(path), &opts, &n);
  Py_END_ALLOW_THREADS
  cortado_context_free(ctx);
  if (st != CORTADO_OK) {
    ct_py_raise(st);
    goto done;
  }
  o->n = n;
  o->owned = true;
  rc = 0;
done:
  PyMem_Free(stage_ptrs);
  Py_XDECREF(stage_list);
  Py_XDECREF(path);
  Py_XDECREF(wpath);
  return rc;
}

static int net_traverse(PyObject *self, visitproc visit, void *arg) {
  NetObject *o = (NetObject *)self;
  Py_VISIT(o->dict);
  Py_VISIT(o->owner);
  Py_VISIT(o->blobs);
  Py_VISIT(o->layers);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int net_clear(PyObject *self) {
  NetObject *o = (NetObject *)self;
  Py_CLEAR(o->dict);
  Py_CLEAR(o->blobs);
  Py_CLEAR(o->layers);
  return 0;
}

static void net_dealloc(PyObject *self) {
  NetObject *o = (NetObject *)self;
  PyObject_GC_UnTrack(self);
  if (o->weakrefs) PyObject_ClearWeakRefs(self);
  net_clear(self);
  if (o->n && o->owned) {
    /* Python layers' objects are released with the GIL held */
    cortado_net_free(o->n);
  }
  o->n = NULL;
  release_inputs(o);
  Py_CLEAR(o->owner);
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

/* ------------------------------------------------------------------ computing */

static int layer_arg(NetObject *o, PyObject *v, int *out) {
  long i = PyLong_AsLong(v);
  if (i == -1 && PyErr_Occurred()) return -1;
  if (i < 0 || i >= cortado_net_num_layers(o->n)) {
    PyErr_Format(PyExc_IndexError, "layer index %ld: the net has layers 0 to %d", i,
                 cortado_net_num_layers(o->n) - 1);
    return -1;
  }
  *out = (int)i;
  return 0;
}

static PyObject *net_forward_range(PyObject *self, PyObject *args) {
  NetObject *o = (NetObject *)self;
  PyObject *a, *b;
  int start, end;
  if (net_check(o) < 0 || !PyArg_ParseTuple(args, "OO:_forward", &a, &b) || layer_arg(o, a, &start) < 0 ||
      layer_arg(o, b, &end) < 0)
    return NULL;
  double loss = 0;
  cortado_status st;
  Py_BEGIN_ALLOW_THREADS
  st = cortado_net_forward_range(o->n, start, end, &loss);
  Py_END_ALLOW_THREADS
  if (st != CORTADO_OK) return ct_py_raise(st);
  if (ct_py_reraise_kept()) return NULL;
  return PyFloat_FromDouble(loss);
}

static PyObject *net_backward_range(PyObject *self, PyObject *args) {
  NetObject *o = (NetObject *)self;
  PyObject *a, *b;
  int start, end;
  if (net_check(o) < 0 || !PyArg_ParseTuple(args, "OO:_backward", &a, &b) || layer_arg(o, a, &start) < 0 ||
      layer_arg(o, b, &end) < 0)
    return NULL;
  cortado_status st;
  Py_BEGIN_ALLOW_THREADS
  st = cortado_net_backward_range(o->n, start, end);
  Py_END_ALLOW_THREADS
  if (st != CORTADO_OK) return ct_py_raise(st);
  if (ct_py_reraise_kept()) return NULL;
  Py_RETURN_NONE;
}

static PyObject *net_reshape(PyObject *self, PyObject *unused) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  cortado_status st;
  Py_BEGIN_ALLOW_THREADS
  st = cortado_net_reshape(o->n);
  Py_END_ALLOW_THREADS
  if (st != CORTADO_OK) return ct_py_raise(st);
  Py_RETURN_NONE;
}

static PyObject *net_clear_param_diffs(PyObject *self, PyObject *unused) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  cortado_net_clear_param_diffs(o->n);
  Py_RETURN_NONE;
}

static PyObject *net_copy_from(PyObject *self, PyObject *arg) {
  NetObject *o = (NetObject *)self;
  PyObject *path;
  if (net_check(o) < 0 || !PyUnicode_FSConverter(arg, &path)) return NULL;
  cortado_status st;
  Py_BEGIN_ALLOW_THREADS
  st = cortado_net_copy_from(o->n, PyBytes_AS_STRING(path));
  Py_END_ALLOW_THREADS
  Py_DECREF(path);
  if (st != CORTADO_OK) return ct_py_raise(st);
  Py_RETURN_NONE;
}

static PyObject *net_share_with(PyObject *self, PyObject *arg) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  if (!PyObject_TypeCheck(arg, ct_py_net_type)) {
    PyErr_SetString(PyExc_TypeError, "share_with takes a Net");
    return NULL;
  }
  NetObject *other = (NetObject *)arg;
  if (net_check(other) < 0) return NULL;
  cortado_status st = cortado_net_share_with(o->n, other->n);
  if (st != CORTADO_OK) return ct_py_raise(st);
  /* the other net's memory is ours now: keep it alive */
  PyObject *keep = PyObject_GetAttrString(self, "_shared_with");
  if (!keep) {
    PyErr_Clear();
    keep = PyList_New(0);
    if (!keep || PyObject_SetAttrString(self, "_shared_with", keep) < 0) {
      Py_XDECREF(keep);
      return NULL;
    }
  }
  int r = PyList_Append(keep, arg);
  Py_DECREF(keep);
  if (r < 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject *net_save(PyObject *self, PyObject *args, PyObject *kw) {
  NetObject *o = (NetObject *)self;
  static char *kwlist[] = {"filename", "write_diff", NULL};
  PyObject *path;
  int diff = 0;
  if (net_check(o) < 0 || !PyArg_ParseTupleAndKeywords(args, kw, "O&|p:save", kwlist, PyUnicode_FSConverter,
                                                       &path, &diff))
    return NULL;
  cortado_status st;
  Py_BEGIN_ALLOW_THREADS
  st = cortado_net_save(o->n, PyBytes_AS_STRING(path), diff != 0);
  Py_END_ALLOW_THREADS
  Py_DECREF(path);
  if (st != CORTADO_OK) return ct_py_raise(st);
  Py_RETURN_NONE;
}

/* A C-contiguous 4-axis float32 array of the given trailing dimensions
 * (pycaffe's CheckContiguousArray and its messages). */
static int get_array(PyObject *arr, const char *name, int c, int h, int w, Py_buffer *view) {
  if (PyObject_GetBuffer(arr, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
    PyErr_Clear();
    PyErr_Format(ct_py_error, "%s must be C contiguous", name);
    return -1;
  }
  const char *f = view->format ? view->format : "B";
  if (*f == '<' || *f == '=' || *f == '@') f++;
  const char *why = NULL;
  if (view->ndim != 4) why = "must be 4-d";
  else if (strcmp(f, "f") != 0 || view->itemsize != 4) why = "must be float32";
  else if (view->shape[1] != c) why = "has wrong number of channels";
  else if (view->shape[2] != h) why = "has wrong height";
  else if (view->shape[3] != w) why = "has wrong width";
  if (why) {
    PyBuffer_Release(view);
    PyErr_Format(ct_py_error, "%s %s", name, why);
    return -1;
  }
  return 0;
}

static PyObject *net_set_input_arrays(PyObject *self, PyObject *args) {
  NetObject *o = (NetObject *)self;
  PyObject *data, *labels;
  if (net_check(o) < 0 || !PyArg_ParseTuple(args, "OO:_set_input_arrays", &data, &labels)) return NULL;
  if (cortado_net_num_layers(o->n) == 0 || strcmp(cortado_net_layer_type(o->n, 0), "MemoryData") != 0 ||
      cortado_net_layer_num_tops(o->n, 0) < 1) {
    PyErr_SetString(ct_py_error, "set_input_arrays may only be called if the first layer is a MemoryDataLayer");
    return NULL;
  }
  const cortado_blob *top = cortado_net_blob(o->n, cortado_net_layer_top(o->n, 0, 0));
  const int *s = cortado_blob_shape(top);
  const int nd = cortado_blob_num_axes(top);
  const int batch = nd > 0 ? s[0] : 1, c = nd > 1 ? s[1] : 1, h = nd > 2 ? s[2] : 1, w = nd > 3 ? s[3] : 1;
  Py_buffer v[2];
  if (get_array(data, "data array", c, h, w, &v[0]) < 0) return NULL;
  if (get_array(labels, "labels array", 1, 1, 1, &v[1]) < 0) {
    PyBuffer_Release(&v[0]);
    return NULL;
  }
  const char *why = NULL;
  if (v[0].shape[0] != v[1].shape[0]) why = "data and labels must have the same first dimension";
  else if (v[0].shape[0] == 0 || v[0].shape[0] % batch != 0)
    why = "first dimensions of input arrays must be a multiple of batch size";
  if (why) {
    PyBuffer_Release(&v[0]);
    PyBuffer_Release(&v[1]);
    PyErr_SetString(ct_py_error, why);
    return NULL;
  }
  cortado_status st = cortado_net_set_input_arrays(o->n, v[0].buf, v[1].buf, (int)v[0].shape[0]);
  if (st != CORTADO_OK) {
    PyBuffer_Release(&v[0]);
    PyBuffer_Release(&v[1]);
    return ct_py_raise(st);
  }
  release_inputs(o); /* the layer holds the new arrays now */
  o->inputs[0] = v[0];
  o->inputs[1] = v[1];
  o->have_inputs = true;
  Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ looking */

static PyObject *net_get_blobs(PyObject *self, void *c) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  if (!o->blobs) {
    int n = cortado_net_num_blobs(o->n);
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (int i = 0; i < n; i++) {
      PyObject *b = ct_py_blob_new(self, cortado_net_blob(o->n, i));
      if (!b) {
        Py_DECREF(list);
        return NULL;
      }
      PyList_SET_ITEM(list, i, b);
    }
    o->blobs = list;
  }
  return PyList_GetSlice(o->blobs, 0, PyList_GET_SIZE(o->blobs));
}

static PyObject *net_get_layers(PyObject *self, void *c) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  if (!o->layers) {
    int n = cortado_net_num_layers(o->n);
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (int i = 0; i < n; i++) {
      PyObject *state = cortado_net_layer_state(o->n, i);
      /* a Python layer's state is its object */
      PyObject *l = state && strcmp(cortado_net_layer_type(o->n, i), "Python") == 0
                        ? Py_NewRef(state)
                        : ct_py_layer_wrap_builtin(self, o->n, i);
      if (!l) {
        Py_DECREF(list);
        return NULL;
      }
      PyList_SET_ITEM(list, i, l);
    }
    o->layers = list;
  }
  return PyList_GetSlice(o->layers, 0, PyList_GET_SIZE(o->layers));
}

static PyObject *string_list(int n, const char *(*get)(const cortado_net *, int), const cortado_net *net) {
  PyObject *list = PyList_New(n);
  if (!list) return NULL;
  for (int i = 0; i < n; i++) {
    PyObject *s = PyUnicode_FromString(get(net, i));
    if (!s) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, i, s);
  }
  return list;
}

static PyObject *net_get_blob_names(PyObject *self, void *c) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  return string_list(cortado_net_num_blobs(o->n), cortado_net_blob_name, o->n);
}

static PyObject *net_get_layer_names(PyObject *self, void *c) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  return string_list(cortado_net_num_layers(o->n), cortado_net_layer_name, o->n);
}

static PyObject *int_list(int n, int (*get)(const cortado_net *, int), const cortado_net *net) {
  PyObject *list = PyList_New(n);
  if (!list) return NULL;
  for (int i = 0; i < n; i++) PyList_SET_ITEM(list, i, PyLong_FromLong(get(net, i)));
  return list;
}

static PyObject *net_get_inputs(PyObject *self, void *c) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  return int_list(cortado_net_num_inputs(o->n), cortado_net_input, o->n);
}

static PyObject *net_get_outputs(PyObject *self, void *c) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  return int_list(cortado_net_num_outputs(o->n), cortado_net_output, o->n);
}

static PyObject *net_get_loss_weights(PyObject *self, void *c) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  int n = cortado_net_num_blobs(o->n);
  PyObject *list = PyList_New(n);
  if (!list) return NULL;
  for (int i = 0; i < n; i++) PyList_SET_ITEM(list, i, PyFloat_FromDouble(cortado_net_blob_loss_weight(o->n, i)));
  return list;
}

static PyObject *ids(PyObject *self, PyObject *arg, bool top) {
  NetObject *o = (NetObject *)self;
  int l;
  if (net_check(o) < 0 || layer_arg(o, arg, &l) < 0) return NULL;
  int n = top ? cortado_net_layer_num_tops(o->n, l) : cortado_net_layer_num_bottoms(o->n, l);
  PyObject *list = PyList_New(n);
  if (!list) return NULL;
  for (int i = 0; i < n; i++)
    PyList_SET_ITEM(list, i, PyLong_FromLong(top ? cortado_net_layer_top(o->n, l, i) : cortado_net_layer_bottom(o->n, l, i)));
  return list;
}

static PyObject *net_top_ids(PyObject *self, PyObject *arg) { return ids(self, arg, true); }
static PyObject *net_bottom_ids(PyObject *self, PyObject *arg) { return ids(self, arg, false); }

static PyObject *net_get_name(PyObject *self, void *c) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  return PyUnicode_FromString(cortado_net_name(o->n));
}

static PyObject *net_get_phase(PyObject *self, void *c) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  return PyLong_FromLong(cortado_net_phase(o->n));
}

static PyObject *net_get_device(PyObject *self, void *c) {
  NetObject *o = (NetObject *)self;
  if (net_check(o) < 0) return NULL;
  return PyLong_FromLong(cortado_context_device(cortado_net_context(o->n)));
}

static PyMethodDef net_methods[] = {
    {"_forward", net_forward_range, METH_VARARGS, "_forward(start, end): layers start..end (inclusive)."},
    {"_backward", net_backward_range, METH_VARARGS, "_backward(start, end): layers start down to end."},
    {"reshape", net_reshape, METH_NOARGS, "Propagates the input blobs' shapes through the net."},
    {"clear_param_diffs", net_clear_param_diffs, METH_NOARGS, "Zeroes every parameter gradient."},
    {"copy_from", net_copy_from, METH_O, "copy_from(caffemodel): copies trained weights by layer name."},
    {"share_with", net_share_with, METH_O, "share_with(net): uses the other net's weights by layer name."},
    {"save", (PyCFunction)(void (*)(void))net_save, METH_VARARGS | METH_KEYWORDS,
     "save(filename, write_diff=False): writes a .caffemodel."},
    {"_set_input_arrays", net_set_input_arrays, METH_VARARGS, "The MemoryData layer's arrays."},
    {"_top_ids", net_top_ids, METH_O, "Blob indices of layer i's tops."},
    {"_bottom_ids", net_bottom_ids, METH_O, "Blob indices of layer i's bottoms."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef net_getset[] = {
    {"_blobs", net_get_blobs, NULL, "The blobs, in order.", NULL},
    {"_blob_names", net_get_blob_names, NULL, "The blobs' names.", NULL},
    {"layers", net_get_layers, NULL, "The layers, in order.", NULL},
    {"_layer_names", net_get_layer_names, NULL, "The layers' names.", NULL},
    {"_inputs", net_get_inputs, NULL, "Blob indices of the inputs.", NULL},
    {"_outputs", net_get_outputs, NULL, "Blob indices of the outputs.", NULL},
    {"_blob_loss_weights", net_get_loss_weights, NULL, "Each blob's loss weight.", NULL},
    {"name", net_get_name, NULL, "The net's name.", NULL},
    {"phase", net_get_phase, NULL, "TRAIN (0) or TEST (1).", NULL},
    {"device", net_get_device, NULL, "-1 for the CPU, else the GPU ordinal.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef net_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(NetObject, dict), READONLY, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(NetObject, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyType_Slot net_slots[] = {
    {Py_tp_init, net_init},
    {Py_tp_dealloc, net_dealloc},
    {Py_tp_traverse, net_traverse},
    {Py_tp_clear, net_clear},
    {Py_tp_methods, net_methods},
    {Py_tp_getset, net_getset},
    {Py_tp_members, net_members},
    {Py_tp_doc, "Net(network_file, phase, level=0, stages=None, weights=None): a Caffe net built from a "
                "prototxt, as pycaffe's Net (also Net(network_file, weights_file, phase))."},
    {0, NULL}};

static PyType_Spec net_spec = {"cortado._cortado.Net", sizeof(NetObject), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, net_slots};

int ct_py_net_setup(PyObject *m) {
  ct_py_net_type = (PyTypeObject *)PyType_FromSpec(&net_spec);
  if (!ct_py_net_type) return -1;
  return PyModule_AddObjectRef(m, "Net", (PyObject *)ct_py_net_type);
}
