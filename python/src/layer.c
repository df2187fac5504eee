/* Layer: pycaffe's Layer, both the wrapper of a net's built-in layer
 * (net.layers[i]: .blobs, .type) and the base class of Python layers.
 * BlobVec: a layer's learnable blobs (pycaffe's layer.blobs, with
 * add_blob for Python layers during setup).
 *
 * The "Python" layer type (Caffe's PythonLayer) is a cortado.h custom
 * layer class whose state is the Python object: create imports
 * python_param.module and makes python_param.layer(param) through
 * cortado/_pylayer.py; setup, reshape, forward and backward call the
 * object's methods with lists of Blobs, holding the GIL (they may run on
 * data-parallel worker threads). */

#include "pyext.h"

PyTypeObject *ct_py_layer_type, *ct_py_blobvec_type;

typedef struct {
  PyObject_HEAD
  PyObject *dict;
  PyObject *weakrefs;
  /* a net's built-in layer */
  PyObject *net_obj;
  cortado_net *n;
  int index;
  /* a Python layer */
  cortado_layer *cl;
  PyObject *bottom, *top;      /* lists of Blob for the handles below */
  cortado_blob *const *bh, *const *th;
  int nb, nt;
} LayerObject;

/* ------------------------------------------------------------------ BlobVec */

typedef struct {
  PyObject_HEAD
  PyObject *owner;
  cortado_net *n;  /* a net's layer ... */
  int layer;
  cortado_layer *cl; /* ... or a custom layer */
} BlobVecObject;

static Py_ssize_t blobvec_len(PyObject *self) {
  BlobVecObject *o = (BlobVecObject *)self;
  return o->n ? cortado_net_layer_num_params(o->n, o->layer) : cortado_layer_num_params(o->cl);
}

static PyObject *blobvec_item(PyObject *self, Py_ssize_t i) {
  BlobVecObject *o = (BlobVecObject *)self;
  Py_ssize_t n = blobvec_len(self);
  if (i < 0) i += n;
  if (i < 0 || i >= n) {
    PyErr_SetString(PyExc_IndexError, "blob index out of range");
    return NULL;
  }
  cortado_blob *b = o->n ? cortado_net_layer_param(o->n, o->layer, (int)i) : cortado_layer_param(o->cl, (int)i);
  return ct_py_blob_new(o->owner, b);
}

static PyObject *blobvec_subscript(PyObject *self, PyObject *key) {
  if (PyIndex_Check(key)) {
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return NULL;
    return blobvec_item(self, i);
  }
  if (PySlice_Check(key)) {
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
    Py_ssize_t n = PySlice_AdjustIndices(blobvec_len(self), &start, &stop, step);
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
      PyObject *b = blobvec_item(self, start + k * step);
      if (!b) {
        Py_DECREF(list);
        return NULL;
      }
      PyList_SET_ITEM(list, k, b);
    }
    return list;
  }
  PyErr_SetString(PyExc_TypeError, "BlobVec indices must be integers or slices");
  return NULL;
}

/* add_blob(*shape): a Python layer's new learnable blob, in setup only. */
static PyObject *blobvec_add_blob(PyObject *self, PyObject *args, PyObject *kw) {
  BlobVecObject *o = (BlobVecObject *)self;
  if (kw && PyDict_Size(kw) > 0) {
    PyErr_SetString(PyExc_TypeError, "BlobVec.add_blob takes no kwargs");
    return NULL;
  }
  if (!o->cl) {
    PyErr_SetString(ct_py_error, "add_blob: only a Python layer adds blobs, in its setup");
    return NULL;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n > CORTADO_MAX_AXES) {
    PyErr_SetString(PyExc_ValueError, "add_blob: too many axes");
    return NULL;
  }
  int shape[CORTADO_MAX_AXES];
  for (Py_ssize_t i = 0; i < n; i++) {
    long v = PyLong_AsLong(PyTuple_GET_ITEM(args, i));
    if (v == -1 && PyErr_Occurred()) return NULL;
    shape[i] = v < 0 || v > INT32_MAX ? -1 : (int)v;
  }
  if (!cortado_layer_add_param(o->cl, (int)n, shape)) {
    PyErr_Format(ct_py_error,
                 "add_blob: layer '%s' adds blobs in setup only, with dimensions of at least 0, at most %d "
                 "blobs",
                 cortado_layer_name(o->cl), CORTADO_MAX_LAYER_PARAMS);
    return NULL;
  }
  Py_RETURN_NONE;
}

static void blobvec_dealloc(PyObject *self) {
  Py_XDECREF(((BlobVecObject *)self)->owner);
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyObject *blobvec_repr(PyObject *self) {
  return PyUnicode_FromFormat("<cortado BlobVec of %zd blobs>", blobvec_len(self));
}

static PyMethodDef blobvec_methods[] = {
    {"add_blob", (PyCFunction)(void (*)(void))blobvec_add_blob, METH_VARARGS | METH_KEYWORDS,
     "add_blob(*shape): a new learnable blob of zeros (Python layers, in setup)."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot blobvec_slots[] = {
    {Py_tp_dealloc, blobvec_dealloc},
    {Py_tp_repr, blobvec_repr},
    {Py_tp_methods, blobvec_methods},
    {Py_sq_length, blobvec_len},
    {Py_sq_item, blobvec_item},
    {Py_mp_length, blobvec_len},
    {Py_mp_subscript, blobvec_subscript},
    {Py_tp_doc, "A layer's learnable blobs (weights, bias, ...), as pycaffe's BlobVec."},
    {0, NULL}};

static PyType_Spec blobvec_spec = {"cortado._cortado.BlobVec", sizeof(BlobVecObject), 0, Py_TPFLAGS_DEFAULT,
                                   blobvec_slots};

static PyObject *blobvec_new(PyObject *owner, cortado_net *n, int layer, cortado_layer *cl) {
  BlobVecObject *o = PyObject_New(BlobVecObject, ct_py_blobvec_type);
  if (!o) return NULL;
  o->owner = Py_NewRef(owner);
  o->n = n;
  o->layer = layer;
  o->cl = cl;
  return (PyObject *)o;
}

PyObject *ct_py_blobvec_for_net_layer(PyObject *net_obj, cortado_net *n, int layer) {
  return blobvec_new(net_obj, n, layer, NULL);
}

PyObject *ct_py_blobvec_for_custom(PyObject *layer_obj, cortado_layer *cl) {
  return blobvec_new(layer_obj, NULL, 0, cl);
}

/* ------------------------------------------------------------------ Layer */

static int layer_init(PyObject *self, PyObject *args, PyObject *kw) {
  return 0; /* Layer(layer_param): the param is Caffe's; a Python layer reads param_str */
}

PyObject *ct_py_layer_wrap_builtin(PyObject *net_obj, cortado_net *n, int i) {
  LayerObject *o = (LayerObject *)ct_py_layer_type->tp_alloc(ct_py_layer_type, 0);
  if (!o) return NULL;
  o->net_obj = Py_NewRef(net_obj);
  o->n = n;
  o->index = i;
  return (PyObject *)o;
}

void ct_py_layer_bind(PyObject *obj, cortado_layer *cl) { ((LayerObject *)obj)->cl = cl; }

int ct_py_layer_alive(PyObject *layer) {
  LayerObject *o = (LayerObject *)layer;
  if (o->n || o->cl) return 0;
  PyErr_SetString(ct_py_error, "this Python layer's net is gone");
  return -1;
}

static PyObject *layer_get_blobs(PyObject *self, void *c) {
  LayerObject *o = (LayerObject *)self;
  if (o->n) return ct_py_blobvec_for_net_layer(o->net_obj, o->n, o->index);
  if (o->cl) return ct_py_blobvec_for_custom(self, o->cl);
  PyErr_SetString(ct_py_error, "this Layer is not part of a net yet");
  return NULL;
}

static PyObject *layer_get_type(PyObject *self, void *c) {
  LayerObject *o = (LayerObject *)self;
  if (o->n) return PyUnicode_FromString(cortado_net_layer_type(o->n, o->index));
  return PyUnicode_FromString("Python");
}

static PyObject *layer_get_name(PyObject *self, void *c) {
  LayerObject *o = (LayerObject *)self;
  if (o->n) return PyUnicode_FromString(cortado_net_layer_name(o->n, o->index));
  if (o->cl) return PyUnicode_FromString(cortado_layer_name(o->cl));
  return PyUnicode_FromString("");
}

static int layer_traverse(PyObject *self, visitproc visit, void *arg) {
  LayerObject *o = (LayerObject *)self;
  Py_VISIT(o->dict);
  Py_VISIT(o->net_obj);
  Py_VISIT(o->bottom);
  Py_VISIT(o->top);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

static int layer_clear(PyObject *self) {
  LayerObject *o = (LayerObject *)self;
  Py_CLEAR(o->dict);
  Py_CLEAR(o->bottom);
  Py_CLEAR(o->top);
  return 0;
}

static void layer_dealloc(PyObject *self) {
  LayerObject *o = (LayerObject *)self;
  PyObject_GC_UnTrack(self);
  if (o->weakrefs) PyObject_ClearWeakRefs(self);
  layer_clear(self);
  Py_CLEAR(o->net_obj);
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyGetSetDef layer_getset[] = {
    {"blobs", layer_get_blobs, NULL, "The learnable blobs (a BlobVec).", NULL},
    {"type", layer_get_type, NULL, "The layer type, e.g. 'Convolution' ('Python' for Python layers).", NULL},
    {"name", layer_get_name, NULL, "The layer's name.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef layer_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(LayerObject, dict), READONLY, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(LayerObject, weakrefs), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyType_Slot layer_slots[] = {
    {Py_tp_init, layer_init},
    {Py_tp_dealloc, layer_dealloc},
    {Py_tp_traverse, layer_traverse},
    {Py_tp_clear, layer_clear},
    {Py_tp_getset, layer_getset},
    {Py_tp_members, layer_members},
    {Py_tp_doc, "A layer of a net; subclass it for a Python layer (type: \"Python\" with python_param "
                "{ module layer param_str }) and define setup, reshape, forward and backward, each "
                "taking lists of Blobs, as in pycaffe.  self.param_str and self.phase are set before "
                "setup."},
    {0, NULL}};

static PyType_Spec layer_spec = {"cortado._cortado.Layer", sizeof(LayerObject), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, layer_slots};

/* ------------------------------------------------------------------ the "Python" layer class */

static PyObject *g_pylayer; /* cortado._pylayer */

static PyObject *pylayer_module(void) {
  if (!g_pylayer) g_pylayer = PyImport_ImportModule("cortado._pylayer");
  return g_pylayer;
}

/* Lists of Blobs for the handles of a call, kept while the handles are the
 * same (they are for a layer's life; a layer shared by data-parallel
 * workers sees each worker's). */
static PyObject *blob_list(PyObject **cache, cortado_blob *const **cached, int *ncached, PyObject *owner,
                           cortado_blob *const *h, int n) {
  if (*cache && *cached == h && *ncached == n) return *cache;
  PyObject *list = PyList_New(n);
  if (!list) return NULL;
  for (int i = 0; i < n; i++) {
    PyObject *b = ct_py_blob_new(owner, h[i]);
    if (!b) {
      Py_DECREF(list);
      return NULL;
    }
    PyList_SET_ITEM(list, i, b);
  }
  Py_XSETREF(*cache, list);
  *cached = h;
  *ncached = n;
  return list;
}

static bool interpreter_gone(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsInitialized() || Py_IsFinalizing();
#else
  return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

int (*ct_py_interpreter_hook)(void);

static cortado_status py_create(void *user, cortado_layer *cl, const void *param, size_t size, void **state) {
  if (ct_py_interpreter_hook && ct_py_interpreter_hook() < 0) return CORTADO_ERR_UNSUPPORTED;
  if (interpreter_gone())
    return cortado_set_error(CORTADO_ERR_UNSUPPORTED, "Python layers need a running Python interpreter");
  PyGILState_STATE g = PyGILState_Ensure();
  cortado_status st = CORTADO_OK;
  PyObject *mod = pylayer_module();
  PyObject *obj = mod ? PyObject_CallMethod(mod, "create", "y#iiis", (const char *)param, (Py_ssize_t)size,
                                            (int)cortado_layer_phase(cl), cortado_layer_rank(cl),
                                            cortado_layer_world(cl), cortado_layer_name(cl))
                      : NULL;
  if (!obj) {
    st = ct_py_fail_from_exception("creating the layer");
  } else if (!PyObject_TypeCheck(obj, ct_py_layer_type)) {
    Py_DECREF(obj);
    st = cortado_set_error(CORTADO_ERR_INVALID, "the python_param layer class must derive from caffe.Layer");
  } else {
    ct_py_layer_bind(obj, cl);
    *state = obj;
  }
  PyGILState_Release(g);
  return st;
}

/* Calls fn(obj, bottom, top) (or obj.method(bottom, top)) with the GIL. */
static cortado_status call2(void *state, cortado_layer *cl, const char *method, bool helper,
                            cortado_blob *const *bottom, int nb, cortado_blob *const *top, int nt) {
  PyGILState_STATE g = PyGILState_Ensure();
  LayerObject *o = state;
  o->cl = cl;
  cortado_status st = CORTADO_OK;
  /* the blobs live with the layer, which lives with its net: no owner
   * (one would be a cycle through objects the collector cannot see) */
  PyObject *bl = blob_list(&o->bottom, &o->bh, &o->nb, NULL, bottom, nb);
  PyObject *tl = bl ? blob_list(&o->top, &o->th, &o->nt, NULL, top, nt) : NULL;
  PyObject *r = NULL;
  if (tl) {
    if (helper) {
      PyObject *mod = pylayer_module();
      r = mod ? PyObject_CallMethod(mod, method, "OOO", state, bl, tl) : NULL;
    } else {
      r = PyObject_CallMethod(state, method, "OO", bl, tl);
    }
  }
  if (!r) st = ct_py_fail_from_exception(method);
  Py_XDECREF(r);
  PyGILState_Release(g);
  return st;
}

static cortado_status py_setup(void *state, cortado_layer *cl, cortado_blob *const *bottom, int nb,
                               cortado_blob *const *top, int nt) {
  return call2(state, cl, "setup", true, bottom, nb, top, nt);
}

static cortado_status py_reshape(void *state, cortado_layer *cl, cortado_blob *const *bottom, int nb,
                                 cortado_blob *const *top, int nt) {
  return call2(state, cl, "reshape", false, bottom, nb, top, nt);
}

static cortado_status py_forward(void *state, cortado_layer *cl, cortado_blob *const *bottom, int nb,
                                 cortado_blob *const *top, int nt) {
  return call2(state, cl, "forward", false, bottom, nb, top, nt);
}

static cortado_status py_backward(void *state, cortado_layer *cl, cortado_blob *const *top, int nt,
                                  const bool *propagate_down, cortado_blob *const *bottom, int nb) {
  PyGILState_STATE g = PyGILState_Ensure();
  LayerObject *o = state;
  o->cl = cl;
  cortado_status st = CORTADO_OK;
  PyObject *tl = blob_list(&o->top, &o->th, &o->nt, NULL, top, nt);
  PyObject *bl = tl ? blob_list(&o->bottom, &o->bh, &o->nb, NULL, bottom, nb) : NULL;
  PyObject *pd = bl ? PyList_New(nb) : NULL;
  for (int i = 0; pd && i < nb; i++) PyList_SET_ITEM(pd, i, PyBool_FromLong(propagate_down[i]));
  PyObject *r = pd ? PyObject_CallMethod(state, "backward", "OOO", tl, pd, bl) : NULL;
  if (!r) st = ct_py_fail_from_exception("backward");
  Py_XDECREF(r);
  Py_XDECREF(pd);
  PyGILState_Release(g);
  return st;
}

/* The Blobs of a cached list die with the layer whose handles they wrap. */
static void kill_list(PyObject **list, cortado_blob *const **handles) {
  for (Py_ssize_t i = 0; *list && i < PyList_GET_SIZE(*list); i++) ct_py_blob_kill(PyList_GET_ITEM(*list, i));
  Py_CLEAR(*list);
  *handles = NULL;
}

static void py_destroy(void *state, cortado_layer *cl) {
  if (interpreter_gone()) return; /* the interpreter took its objects with it */
  PyGILState_STATE g = PyGILState_Ensure();
  LayerObject *o = state;
  PyObject *mod = pylayer_module();
  PyObject *r = mod ? PyObject_CallMethod(mod, "release", "O", (PyObject *)state) : NULL;
  if (!r) PyErr_Clear();
  Py_XDECREF(r);
  /* an object shared by data-parallel workers may hold another worker's
   * lists: only this layer's go */
  if (o->cl == cl) {
    kill_list(&o->bottom, &o->bh);
    kill_list(&o->top, &o->th);
    o->cl = NULL;
  }
  Py_DECREF((PyObject *)state);
  PyGILState_Release(g);
}

cortado_status ct_py_python_layer_class_register(void) {
  static const cortado_layer_class cls = {"Python", NULL, py_create, py_setup, py_reshape,
                                          py_forward, py_backward, py_destroy};
  return cortado_layer_class_register(&cls);
}

int ct_py_register_python_layer(void) {
  if (ct_py_python_layer_class_register() != CORTADO_OK) {
    PyErr_SetString(ct_py_error, cortado_last_error());
    return -1;
  }
  return 0;
}

int ct_py_layer_setup(PyObject *m) {
  ct_py_layer_type = (PyTypeObject *)PyType_FromSpec(&layer_spec);
  ct_py_blobvec_type = (PyTypeObject *)PyType_FromSpec(&blobvec_spec);
  if (!ct_py_layer_type || !ct_py_blobvec_type) return -1;
  if (PyModule_AddObjectRef(m, "Layer", (PyObject *)ct_py_layer_type) < 0) return -1;
  if (PyModule_AddObjectRef(m, "BlobVec", (PyObject *)ct_py_blobvec_type) < 0) return -1;
  return ct_py_register_python_layer();
}
