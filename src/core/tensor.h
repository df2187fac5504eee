/* Tensors: Caffe's blobs.  An N-d shape (at most CT_MAX_AXES axes), an
 * element type (core/dtype.h: float32, bfloat16, float16), the device the
 * values live on, and two arrays of `count` values of that type: data
 * (forward values) and diff (gradients).  Code that computes in float32
 * takes the arrays through ct_f32 / ct_f32_diff, which check the type.
 *
 * A tensor lives on exactly one device; nothing is copied behind the caller's
 * back.  Its storage is either owned (grown on reshape, freed with the
 * tensor) or a view into memory owned by someone else (the net's flat
 * parameter buffers, or an activation arena): see ct_tensor_set_view.
 *
 * Glossary for shapes in comments: N batch, C channels, H height, W width,
 * K output channels, (…) lists the axes of an array. */
#ifndef CT_CORE_TENSOR_H
#define CT_CORE_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/mem.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_MAX_AXES 32

/* Memory orders of a tensor's values.  The shape is always the logical one
 * (N, C, spatial...), as in Caffe, whatever the order:
 *   CT_NCHW  as shaped (row-major over the axes);
 *   CT_NHWC  channels last: axis 1 moved behind the others, so that the
 *            values lie as (N, spatial..., C) (cuDNN's NHWC, PyTorch's
 *            channels_last).
 * A tensor of fewer than 3 axes, or whose spatial axes multiply to 1, has
 * the same memory in both.  The net picks NHWC for the 16-bit GPU layers
 * that declare it (ct_layer_ops.layouts_gpu) and puts Cast layers where
 * neighbours differ; everything else is NCHW. */
typedef enum ct_layout { CT_NCHW = 0, CT_NHWC = 1, CT_LAYOUTS } ct_layout;
/* "NCHW", "NHWC". */
const char *ct_layout_name(ct_layout l);

typedef struct ct_tensor {
  char *name;              /* owned; the blob's name in the net, may be NULL */
  int ndim;
  int shape[CT_MAX_AXES];  /* (ndim) */
  size_t count;            /* product of shape; 1 for a 0-d tensor */
  size_t capacity;         /* values allocated in data/diff when owned */
  ct_dtype dtype;          /* of data and diff (CT_F32 unless set) */
  ct_layout layout;        /* memory order of data and diff (CT_NCHW unless set) */
  int device;              /* CT_DEVICE_CPU or a GPU ordinal */
  void *data;              /* (count) values of dtype on device */
  void *diff;              /* (count) on device; NULL until ct_tensor_need_diff */
  bool owns_data;
  bool owns_diff;
  bool has_diff;           /* diff wanted: allocated with data on reshape */
  bool own_diff_on_view;   /* data is another tensor's (ct_tensor_alias_data), the diff its own */
  size_t diff_capacity;    /* values allocated in diff when owned */
  bool no_storage;         /* shape only: nothing is ever allocated for it (a blob or parameter
                              that another process holds: ct_tensor_drop_storage) */
} ct_tensor;

/* The arrays as float32 values: the tensor must be CT_F32 (a bug otherwise). */
static inline float *ct_f32(const ct_tensor *t) {
  CT_ASSERTF(t->dtype == CT_F32, "%s holds %s values, read as float32", t->name ? t->name : "a tensor",
             ct_dtype_name(t->dtype));
  return (float *)t->data;
}
static inline float *ct_f32_diff(const ct_tensor *t) {
  CT_ASSERTF(t->dtype == CT_F32, "%s holds %s gradients, read as float32",
             t->name ? t->name : "a tensor", ct_dtype_name(t->dtype));
  return (float *)t->diff;
}
/* Bytes of count values of t's type. */
static inline size_t ct_tensor_bytes(const ct_tensor *t, size_t count) {
  return count * ct_dtype_size(t->dtype);
}

/* A new empty (0 axes, count 1, nothing allocated) tensor on device. */
ct_tensor *ct_tensor_new(int device, const char *name);
/* A new tensor of the given shape with zeroed data (and diff when with_diff). */
ct_tensor *ct_tensor_new_shape(int device, const char *name, int ndim, const int *shape,
                               bool with_diff);
void ct_tensor_free(ct_tensor *t);

/* Sets the shape.  Owned storage grows (values not kept when it grows) and
 * never shrinks; views must already be large enough (bug otherwise).
 * Returns CT_ERR_INVALID for a negative dimension, too many axes, or a count
 * that overflows. */
ct_status ct_tensor_reshape(ct_tensor *t, int ndim, const int *shape, ct_error *err);
/* Reshape for callers whose shape is already validated (asserts on error). */
void ct_tensor_reshape_or_die(ct_tensor *t, int ndim, const int *shape);
void ct_tensor_reshape_like(ct_tensor *t, const ct_tensor *other);
/* 4-d shorthand, as Caffe's Reshape(n, c, h, w). */
void ct_tensor_reshape4(ct_tensor *t, int n, int c, int h, int w);

/* Sets the element type; storage the tensor owns is dropped when the
 * element size changes (the next reshape allocates it again, values
 * lost).  A view's type must be set before it is pointed at memory. */
void ct_tensor_set_dtype(ct_tensor *t, ct_dtype dtype);

/* Sets the memory order (values are not moved: set it before filling). */
void ct_tensor_set_layout(ct_tensor *t, ct_layout layout);
/* The tensor's shape as (outer, channels, inner) of its memory order: for
 * NCHW (N, C, spatial), for NHWC (N, spatial, C) read as rows of channels.
 * n = N, c = C (1 for fewer than 2 axes), s = the product of the axes
 * after C (1 for fewer than 3). */
void ct_tensor_ncs(const ct_tensor *t, size_t *n, size_t *c, size_t *s);

/* Makes t a shape without storage: its arrays are freed (views are let
 * go), and reshapes, ct_tensor_need_diff and ct_tensor_alias_data set
 * shapes and flags but allocate nothing from then on; data and diff stay
 * NULL.  What a process builds of the layers another process holds (a
 * pipeline stage's, net.h). */
void ct_tensor_drop_storage(ct_tensor *t);

/* Marks that this tensor needs a diff and allocates it for the current shape. */
void ct_tensor_need_diff(ct_tensor *t);

/* Points data (and diff, may be NULL) at external memory of at least count
 * values of the tensor's type; the tensor will not free it. */
void ct_tensor_set_view(ct_tensor *t, void *data, void *diff);
/* Makes t share other's data (and diff) as views (Caffe's ShareData/ShareDiff). */
void ct_tensor_share_data(ct_tensor *t, const ct_tensor *other);
void ct_tensor_share_diff(ct_tensor *t, const ct_tensor *other);
/* Makes t take src's shape and view src's data while keeping a diff of its
 * own (Caffe's Split tops: top->ShareData(bottom) without ShareDiff).  An
 * owned data array of t is freed.  When t has_diff (or later on
 * ct_tensor_need_diff) and its own diff is missing or too small, a diff of
 * count values is allocated; a diff t views (a pool's) is left for its
 * owner to re-point.  Call again whenever src's shape or data pointer
 * changed. */
void ct_tensor_alias_data(ct_tensor *t, const ct_tensor *src);

/* Axis helpers (Caffe's CanonicalAxisIndex / count(start, end) / shape(i)). */
/* Maps axis in [-ndim, ndim) to [0, ndim); CT_ERR_INVALID otherwise. */
ct_status ct_tensor_canonical_axis(const ct_tensor *t, int axis, int *out, ct_error *err);
/* Product of shape[start..end). */
size_t ct_tensor_count_range(const ct_tensor *t, int start, int end);
/* shape[axis] with negative axes counting from the end. */
int ct_tensor_dim(const ct_tensor *t, int axis);
/* Caffe's LegacyShape: 1 for axes past ndim (for 4-d style layers). */
int ct_tensor_legacy_dim(const ct_tensor *t, int axis);
/* "2 3 4 5 (120)" into buf; returns buf. */
char *ct_tensor_shape_string(const ct_tensor *t, char *buf, size_t len);
bool ct_tensor_same_shape(const ct_tensor *a, const ct_tensor *b);

/* Zero the diff (on the tensor's device). */
void ct_tensor_zero_diff(ct_tensor *t);
/* Copy data from src into dst, across devices; counts, types and layouts
 * must match. */
void ct_tensor_copy_data(ct_tensor *dst, const ct_tensor *src);
/* Host <-> tensor copies of count values, as float32 on the host (converted
 * from or to the tensor's type), always in the logical (NCHW) order on the
 * host: an NHWC tensor's values are reordered on the way. */
void ct_tensor_upload(ct_tensor *t, const float *host_data);
void ct_tensor_download(const ct_tensor *t, float *host_data);
void ct_tensor_upload_diff(ct_tensor *t, const float *host_diff);
void ct_tensor_download_diff(const ct_tensor *t, float *host_diff);

#ifdef __cplusplus
}
#endif

#endif
