/* Blob: pycaffe's Blob over a cortado_blob.  .data and .diff are numpy
 * arrays over Cortado's memory (on a GPU its host copy): a small exporter
 * object gives numpy the pointer and shape through the buffer protocol and
 * keeps the Blob (and so its net) alive as long as the array lives.
 * .device_data / .device_diff are device arrays for CuPy, PyTorch and
 * anything else that speaks __cuda_array_interface__ or DLPack. */
#include <stdint.h>

#include "pyext.h"

PyTypeObject *ct_py_blob_type, *ct_py_buffer_type, *ct_py_device_array_type;

typedef struct {
  PyObject_HEAD
  PyObject *owner; /* keeps b's memory alive */
  cortado_blob *b;
} BlobObject;

/* ------------------------------------------------------------------ buffer exporter */

typedef struct {
  PyObject_HEAD
  PyObject *blob;  /* BlobObject */
  float *ptr;
  int ndim;
  Py_ssize_t shape[CORTADO_MAX_AXES];
  Py_ssize_t strides[CORTADO_MAX_AXES];
} BufferObject;

static void fill_shape(cortado_blob *b, int *ndim, Py_ssize_t *shape, Py_ssize_t *strides) {
  *ndim = cortado_blob_num_axes(b);
  const int *s = cortado_blob_shape(b);
  Py_ssize_t stride = sizeof(float);
  for (int i = *ndim - 1; i >= 0; i--) {
    shape[i] = s[i];
    if (strides) strides[i] = stride;
    stride *= s[i] > 0 ? s[i] : 1;
  }
}

static int buffer_get(PyObject *self, Py_buffer *view, int flags) {
  BufferObject *o = (BufferObject *)self;
  view->obj = Py_NewRef(self);
  view->buf = o->ptr;
  view->len = sizeof(float);
  for (int i = 0; i < o->ndim; i++) view->len *= o->shape[i];
  view->readonly = 0;
  view->itemsize = sizeof(float);
  view->format = (flags & PyBUF_FORMAT) ? "f" : NULL;
  view->ndim = o->ndim;
  view->shape = (flags & PyBUF_ND) ? o->shape : NULL;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? o->strides : NULL;
  view->suboffsets = NULL;
  view->internal = NULL;
  return 0;
}

static void buffer_dealloc(PyObject *self) {
  BufferObject *o = (BufferObject *)self;
  Py_XDECREF(o->blob);
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyType_Slot buffer_slots[] = {
    {Py_bf_getbuffer, buffer_get},
    {Py_tp_dealloc, buffer_dealloc},
    {Py_tp_doc, "Cortado memory seen through the buffer protocol (what a Blob's numpy arrays view)."},
    {0, NULL}};

static PyType_Spec buffer_spec = {"cortado._cortado._BlobBuffer", sizeof(BufferObject), 0,
                                  Py_TPFLAGS_DEFAULT, buffer_slots};

static PyObject *g_np_asarray; /* numpy.asarray, imported on first use */

/* A numpy array over ptr with the blob's shape, kept alive by it. */
static PyObject *array_over(PyObject *blob, float *ptr) {
  if (!ptr) {
    PyErr_SetString(ct_py_error, "this blob has no memory for that array");
    return NULL;
  }
  if (!g_np_asarray) {
    PyObject *np = PyImport_ImportModule("numpy");
    if (!np) return NULL;
    g_np_asarray = PyObject_GetAttrString(np, "asarray");
    Py_DECREF(np);
    if (!g_np_asarray) return NULL;
  }
  BufferObject *o = PyObject_New(BufferObject, ct_py_buffer_type);
  if (!o) return NULL;
  o->blob = Py_NewRef(blob);
  o->ptr = ptr;
  fill_shape(((BlobObject *)blob)->b, &o->ndim, o->shape, o->strides);
  PyObject *arr = PyObject_CallOneArg(g_np_asarray, (PyObject *)o);
  Py_DECREF(o);
  return arr;
}

/* ------------------------------------------------------------------ device arrays */

/* DLPack's ABI (dlpack.h, v0.8): the structures a consumer reads from the
 * capsule named "dltensor". */
typedef struct {
  int32_t device_type; /* kDLCPU 1, kDLCUDA 2 */
  int32_t device_id;
} DLDevice;
typedef struct {
  uint8_t code; /* kDLFloat 2 */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
/* DLPack 1.0's versioned tensor (capsule "dltensor_versioned"), which says
 * whether the consumer may write. */
typedef struct {
  uint32_t major, minor;
} DLPackVersion;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags; /* bit 0 read-only, bit 1 is a copy: neither here */
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

typedef struct {
  PyObject_HEAD
  PyObject *blob;
  void *ptr;
  int device;   /* CORTADO_CPU or a GPU */
  int ndim;
  Py_ssize_t shape[CORTADO_MAX_AXES];
} DeviceArrayObject;

/* What a DLPack tensor owns: the shape and a reference to the array; one
 * of the two layouts is used. */
typedef struct {
  DLManagedTensor t;
  DLManagedTensorVersioned v;
  int64_t shape[CORTADO_MAX_AXES];
  PyObject *keep;
} ManagedTensor;

static void managed_free(ManagedTensor *m) {
  PyGILState_STATE g = PyGILState_Ensure();
  Py_XDECREF(m->keep);
  PyGILState_Release(g);
  PyMem_RawFree(m);
}

static void managed_delete(DLManagedTensor *t) { managed_free(t->manager_ctx); }
static void managed_delete_versioned(DLManagedTensorVersioned *v) { managed_free(v->manager_ctx); }

/* A consumer renames the capsule when it takes the tensor; one never taken
 * is freed here. */
static void capsule_destructor(PyObject *capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    DLManagedTensor *t = PyCapsule_GetPointer(capsule, "dltensor");
    if (t && t->deleter) t->deleter(t);
  } else if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    DLManagedTensorVersioned *v = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (v && v->deleter) v->deleter(v);
  }
}

static PyObject *dev_dlpack(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$OOO", kwlist, &stream, &max_version, &dl_device, &copy))
    return NULL;
  if (copy == Py_True) {
    PyErr_SetString(PyExc_BufferError, "a Cortado blob is exported without copies (copy=True is not supported)");
    return NULL;
  }
  /* DLPack 1.0 when the consumer takes it (it can then write) */
  long major = 0;
  if (max_version != Py_None) {
    PyObject *m = PySequence_GetItem(max_version, 0);
    if (!m) return NULL;
    major = PyLong_AsLong(m);
    Py_DECREF(m);
    if (major == -1 && PyErr_Occurred()) return NULL;
  }
  DeviceArrayObject *o = (DeviceArrayObject *)self;
  ManagedTensor *m = PyMem_RawCalloc(1, sizeof *m);
  if (!m) return PyErr_NoMemory();
  m->keep = Py_NewRef(self);
  for (int i = 0; i < o->ndim; i++) m->shape[i] = o->shape[i];
  DLTensor *t = major >= 1 ? &m->v.dl_tensor : &m->t.dl_tensor;
  t->data = o->ptr;
  t->device.device_type = o->device == CORTADO_CPU ? 1 : 2;
  t->device.device_id = o->device == CORTADO_CPU ? 0 : o->device;
  t->ndim = o->ndim;
  t->dtype.code = 2;
  t->dtype.bits = 32;
  t->dtype.lanes = 1;
  t->shape = m->shape;
  t->strides = NULL; /* compact row-major */
  PyObject *cap;
  if (major >= 1) {
    m->v.version.major = 1;
    m->v.version.minor = 0;
    m->v.manager_ctx = m;
    m->v.deleter = managed_delete_versioned;
    m->v.flags = 0;
    cap = PyCapsule_New(&m->v, "dltensor_versioned", capsule_destructor);
  } else {
    m->t.manager_ctx = m;
    m->t.deleter = managed_delete;
    cap = PyCapsule_New(&m->t, "dltensor", capsule_destructor);
  }
  if (!cap) managed_free(m);
  return cap;
}

static PyObject *dev_dlpack_device(PyObject *self, PyObject *unused) {
  DeviceArrayObject *o = (DeviceArrayObject *)self;
  if (o->device == CORTADO_CPU) return Py_BuildValue("(ii)", 1, 0);
  return Py_BuildValue("(ii)", 2, o->device);
}

static PyObject *dev_shape_tuple(DeviceArrayObject *o) {
  PyObject *t = PyTuple_New(o->ndim);
  if (!t) return NULL;
  for (int i = 0; i < o->ndim; i++) PyTuple_SET_ITEM(t, i, PyLong_FromSsize_t(o->shape[i]));
  return t;
}

static PyObject *dev_get_shape(PyObject *self, void *closure) { return dev_shape_tuple((DeviceArrayObject *)self); }

static PyObject *dev_get_device(PyObject *self, void *closure) {
  return PyLong_FromLong(((DeviceArrayObject *)self)->device);
}

static PyObject *dev_get_ptr(PyObject *self, void *closure) {
  return PyLong_FromVoidPtr(((DeviceArrayObject *)self)->ptr);
}

/* Numba's CUDA Array Interface, version 3: GPU memory only. */
static PyObject *dev_get_cai(PyObject *self, void *closure) {
  DeviceArrayObject *o = (DeviceArrayObject *)self;
  if (o->device == CORTADO_CPU) {
    PyErr_SetString(PyExc_AttributeError,
                    "__cuda_array_interface__: this blob is in host memory (a CPU net); use "
                    "numpy's view (.data) or DLPack");
    return NULL;
  }
  PyObject *shape = dev_shape_tuple(o);
  if (!shape) return NULL;
  /* stream None: nothing to wait for (every call of Cortado that computes
   * has waited for its stream before returning) */
  return Py_BuildValue("{s:N,s:s,s:(NO),s:O,s:i,s:O}", "shape", shape, "typestr", "<f4", "data",
                       PyLong_FromVoidPtr(o->ptr), Py_False, "strides", Py_None, "version", 3,
                       "stream", Py_None);
}

static void dev_dealloc(PyObject *self) {
  DeviceArrayObject *o = (DeviceArrayObject *)self;
  Py_XDECREF(o->blob);
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

static PyObject *dev_repr(PyObject *self) {
  DeviceArrayObject *o = (DeviceArrayObject *)self;
  PyObject *shape = dev_shape_tuple(o);
  if (!shape) return NULL;
  PyObject *r = o->device == CORTADO_CPU ? PyUnicode_FromFormat("<cortado device array %R float32 on the CPU>", shape)
                                         : PyUnicode_FromFormat("<cortado device array %R float32 on GPU %d>", shape, o->device);
  Py_DECREF(shape);
  return r;
}

static PyMethodDef dev_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))dev_dlpack, METH_VARARGS | METH_KEYWORDS,
     "The array as a DLPack capsule (no copy)."},
    {"__dlpack_device__", dev_dlpack_device, METH_NOARGS, "(device type, device id) as DLPack names them."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef dev_getset[] = {
    {"shape", dev_get_shape, NULL, "The shape.", NULL},
    {"device", dev_get_device, NULL, "-1 for the CPU, else the GPU ordinal.", NULL},
    {"ptr", dev_get_ptr, NULL, "The address of the first value.", NULL},
    {"__cuda_array_interface__", dev_get_cai, NULL, "CUDA Array Interface (version 3), GPU only.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot dev_slots[] = {
    {Py_tp_dealloc, dev_dealloc},
    {Py_tp_repr, dev_repr},
    {Py_tp_methods, dev_methods},
    {Py_tp_getset, dev_getset},
    {Py_tp_doc, "A blob's values or gradients in the memory of its device, for CuPy, PyTorch, JAX or "
                "numpy.from_dlpack without a copy.  Taking it makes the device's memory the current "
                "one (a host array taken before is refreshed at its next .data)."},
    {0, NULL}};

static PyType_Spec dev_spec = {"cortado._cortado.DeviceArray", sizeof(DeviceArrayObject), 0,
                               Py_TPFLAGS_DEFAULT, dev_slots};

static PyObject *device_array(PyObject *blob, int diff) {
  BlobObject *bo = (BlobObject *)blob;
  float *p = diff ? cortado_blob_device_diff(bo->b) : cortado_blob_device_data(bo->b);
  if (!p) {
    PyErr_SetString(ct_py_error, "this blob has no memory for that array");
    return NULL;
  }
  DeviceArrayObject *o = PyObject_New(DeviceArrayObject, ct_py_device_array_type);
  if (!o) return NULL;
  o->blob = Py_NewRef(blob);
  o->ptr = p;
  o->device = cortado_blob_device(bo->b);
  fill_shape(bo->b, &o->ndim, o->shape, NULL);
  return (PyObject *)o;
}

/* ------------------------------------------------------------------ Blob */

PyObject *ct_py_blob_new(PyObject *owner, cortado_blob *b) {
  BlobObject *o = PyObject_New(BlobObject, ct_py_blob_type);
  if (!o) return NULL;
  o->owner = Py_XNewRef(owner);
  o->b = b;
  return (PyObject *)o;
}

void ct_py_blob_kill(PyObject *blob) { ((BlobObject *)blob)->b = NULL; }

static void blob_dealloc(PyObject *self) {
  BlobObject *o = (BlobObject *)self;
  Py_XDECREF(o->owner);
  PyTypeObject *tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

/* The owner still holds the blob's memory (a worker's net may have ended). */
#define ALIVE(self)                                                                   \
  do {                                                                                \
    if (!((BlobObject *)(self))->b) {                                                 \
      PyErr_SetString(ct_py_error, "this Blob belonged to a layer whose net is gone"); \
      return NULL;                                                                    \
    }                                                                                 \
    if (ct_py_owner_alive(((BlobObject *)(self))->owner) < 0) return NULL;            \
  } while (0)

static PyObject *blob_get_data(PyObject *self, void *closure) {
  ALIVE(self);
  return array_over(self, cortado_blob_host_data(((BlobObject *)self)->b));
}

static PyObject *blob_get_diff(PyObject *self, void *closure) {
  ALIVE(self);
  return array_over(self, cortado_blob_host_diff(((BlobObject *)self)->b));
}

static PyObject *blob_get_device_data(PyObject *self, void *closure) {
  ALIVE(self);
  return device_array(self, 0);
}

static PyObject *blob_get_device_diff(PyObject *self, void *closure) {
  ALIVE(self);
  return device_array(self, 1);
}

static PyObject *blob_get_shape(PyObject *self, void *closure) {
  ALIVE(self);
  cortado_blob *b = ((BlobObject *)self)->b;
  int n = cortado_blob_num_axes(b);
  const int *s = cortado_blob_shape(b);
  PyObject *t = PyTuple_New(n);
  if (!t) return NULL;
  for (int i = 0; i < n; i++) PyTuple_SET_ITEM(t, i, PyLong_FromLong(s[i]));
  return t;
}

/* Caffe's LegacyShape: a 4-axis view (1 for missing axes); more than 4
 * axes has no num/channels/height/width. */
static PyObject *legacy_axis(PyObject *self, int axis) {
  ALIVE(self);
  cortado_blob *b = ((BlobObject *)self)->b;
  int n = cortado_blob_num_axes(b);
  if (n > 4) {
    PyErr_Format(ct_py_error, "blob '%s' has %d axes: num/channels/height/width are for blobs of at most 4",
                 cortado_blob_name(b), n);
    return NULL;
  }
  return PyLong_FromLong(axis < n ? cortado_blob_shape(b)[axis] : 1);
}

static PyObject *blob_get_num(PyObject *self, void *c) { return legacy_axis(self, 0); }
static PyObject *blob_get_channels(PyObject *self, void *c) { return legacy_axis(self, 1); }
static PyObject *blob_get_height(PyObject *self, void *c) { return legacy_axis(self, 2); }
static PyObject *blob_get_width(PyObject *self, void *c) { return legacy_axis(self, 3); }

static PyObject *blob_get_count(PyObject *self, void *c) {
  ALIVE(self);
  return PyLong_FromSize_t(cortado_blob_count(((BlobObject *)self)->b));
}

static PyObject *blob_get_name(PyObject *self, void *c) {
  return PyUnicode_FromString(cortado_blob_name(((BlobObject *)self)->b));
}

static PyObject *blob_get_device(PyObject *self, void *c) {
  return PyLong_FromLong(cortado_blob_device(((BlobObject *)self)->b));
}

/* reshape(*dims) as pycaffe, or reshape(shape_sequence). */
static PyObject *blob_reshape(PyObject *self, PyObject *args, PyObject *kw) {
  ALIVE(self);
  if (kw && PyDict_Size(kw) > 0) {
    PyErr_SetString(PyExc_TypeError, "Blob.reshape takes no keyword arguments");
    return NULL;
  }
  PyObject *seq = args;
  if (PyTuple_GET_SIZE(args) == 1 && !PyLong_Check(PyTuple_GET_ITEM(args, 0)) &&
      PySequence_Check(PyTuple_GET_ITEM(args, 0)))
    seq = PyTuple_GET_ITEM(args, 0);
  PyObject *fast = PySequence_Fast(seq, "Blob.reshape takes integers");
  if (!fast) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  if (n > CORTADO_MAX_AXES) {
    Py_DECREF(fast);
    PyErr_Format(PyExc_ValueError, "Blob.reshape: %zd axes (at most %d)", n, CORTADO_MAX_AXES);
    return NULL;
  }
  int shape[CORTADO_MAX_AXES];
  for (Py_ssize_t i = 0; i < n; i++) {
    long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return NULL;
    }
    if (v < 0 || v > INT32_MAX) {
      Py_DECREF(fast);
      PyErr_Format(PyExc_ValueError, "Blob.reshape: dimension %ld out of range", v);
      return NULL;
    }
    shape[i] = (int)v;
  }
  Py_DECREF(fast);
  cortado_status st = cortado_blob_reshape(((BlobObject *)self)->b, (int)n, shape);
  if (st != CORTADO_OK) return ct_py_raise(st);
  Py_RETURN_NONE;
}

static PyObject *blob_repr(PyObject *self) {
  if (!((BlobObject *)self)->b) return PyUnicode_FromString("<cortado Blob of a net that is gone>");
  PyObject *shape = blob_get_shape(self, NULL);
  if (!shape) return NULL;
  PyObject *r = PyUnicode_FromFormat("<cortado Blob '%s' %R>", cortado_blob_name(((BlobObject *)self)->b), shape);
  Py_DECREF(shape);
  return r;
}

static PyMethodDef blob_methods[] = {
    {"reshape", (PyCFunction)(void (*)(void))blob_reshape, METH_VARARGS | METH_KEYWORDS,
     "reshape(*dims): new dimensions; the net reshapes the layers above at its next forward."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef blob_getset[] = {
    {"data", blob_get_data, NULL, "The values: a numpy float32 array over the blob's memory (no copy).", NULL},
    {"diff", blob_get_diff, NULL, "The gradients, as data.", NULL},
    {"device_data", blob_get_device_data, NULL, "The values in device memory (DLPack, CUDA Array Interface).", NULL},
    {"device_diff", blob_get_device_diff, NULL, "The gradients in device memory.", NULL},
    {"shape", blob_get_shape, NULL, "The dimensions, a tuple.", NULL},
    {"num", blob_get_num, NULL, "Axis 0 (Caffe's legacy 4-axis view).", NULL},
    {"channels", blob_get_channels, NULL, "Axis 1 (1 when absent).", NULL},
    {"height", blob_get_height, NULL, "Axis 2 (1 when absent).", NULL},
    {"width", blob_get_width, NULL, "Axis 3 (1 when absent).", NULL},
    {"count", blob_get_count, NULL, "The number of values.", NULL},
    {"name", blob_get_name, NULL, "The blob's name in its net ('' for parameters).", NULL},
    {"device", blob_get_device, NULL, "-1 for the CPU, else the GPU ordinal.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot blob_slots[] = {
    {Py_tp_dealloc, blob_dealloc},
    {Py_tp_repr, blob_repr},
    {Py_tp_methods, blob_methods},
    {Py_tp_getset, blob_getset},
    {Py_tp_doc, "A Caffe blob: an N-d float32 array of values (data) and gradients (diff)."},
    {0, NULL}};

static PyType_Spec blob_spec = {"cortado._cortado.Blob", sizeof(BlobObject), 0, Py_TPFLAGS_DEFAULT,
                                blob_slots};

int ct_py_blob_setup(PyObject *m) {
  ct_py_buffer_type = (PyTypeObject *)PyType_FromSpec(&buffer_spec);
  if (!ct_py_buffer_type) return -1;
  ct_py_blob_type = (PyTypeObject *)PyType_FromSpec(&blob_spec);
  ct_py_device_array_type = (PyTypeObject *)PyType_FromSpec(&dev_spec);
  if (!ct_py_blob_type || !ct_py_device_array_type) return -1;
  if (PyModule_AddObjectRef(m, "Blob", (PyObject *)ct_py_blob_type) < 0) return -1;
  return PyModule_AddObjectRef(m, "DeviceArray", (PyObject *)ct_py_device_array_type);
}
