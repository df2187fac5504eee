#include "core/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ct_tensor *ct_tensor_new(int device, const char *name) {
  ct_tensor *t = ct_xcalloc(1, sizeof *t);
  t->device = device;
  t->dtype = CT_F32;
  t->count = 1;
  t->name = name ? ct_xstrdup(name) : NULL;
  return t;
}

ct_tensor *ct_tensor_new_shape(int device, const char *name, int ndim, const int *shape,
                               bool with_diff) {
  ct_tensor *t = ct_tensor_new(device, name);
  t->has_diff = with_diff;
  ct_tensor_reshape_or_die(t, ndim, shape);
  return t;
}

static void release(ct_tensor *t) {
  if (t->owns_data) ct_mem_free(t->device, t->data);
  if (t->owns_diff) ct_mem_free(t->device, t->diff);
  t->data = t->diff = NULL;
  t->owns_data = t->owns_diff = false;
  t->own_diff_on_view = false;
  t->capacity = 0;
  t->diff_capacity = 0;
}

void ct_tensor_free(ct_tensor *t) {
  if (!t) return;
  release(t);
  free(t->name);
  free(t);
}

/* CT_ERR_NOMEM naming the tensor and the size. */
static ct_status no_memory(const ct_tensor *t, const char *what, size_t bytes, ct_error *err) {
  char msg[256];
  ct_mem_out_of_host_memory(bytes, msg, sizeof msg);
  return ct_error_set(err, CT_ERR_NOMEM, "%s %s: %s", t->name ? t->name : "tensor", what, msg);
}

/* Makes sure owned storage holds count values; views are checked by callers.
 * Host memory that cannot be had is CT_ERR_NOMEM (the tensor then holds
 * nothing). */
static ct_status ensure_storage(ct_tensor *t, ct_error *err) {
  if (t->no_storage) return CT_OK;
  bool view = (t->data && !t->owns_data);
  if (view) return CT_OK;
  if (t->count > t->capacity || !t->data) {
    if (t->owns_data) ct_mem_free(t->device, t->data);
    if (t->owns_diff) ct_mem_free(t->device, t->diff);
    t->diff = NULL;
    t->owns_diff = false;
    t->data = ct_mem_try_alloc(t->device, ct_tensor_bytes(t, t->count));
    t->owns_data = t->data != NULL;
    t->capacity = t->data ? t->count : 0;
    if (!t->data) return no_memory(t, "data", ct_tensor_bytes(t, t->count), err);
  }
  if (t->has_diff && !t->diff) {
    t->diff = ct_mem_try_alloc(t->device, ct_tensor_bytes(t, t->capacity));
    if (!t->diff) return no_memory(t, "diff", ct_tensor_bytes(t, t->capacity), err);
    t->owns_diff = true;
    t->diff_capacity = t->capacity;
  }
  return CT_OK;
}

ct_status ct_tensor_reshape(ct_tensor *t, int ndim, const int *shape, ct_error *err) {
  if (ndim < 0 || ndim > CT_MAX_AXES)
    return ct_error_set(err, CT_ERR_INVALID, "%s: %d axes (at most %d)", t->name ? t->name : "tensor",
                        ndim, CT_MAX_AXES);
  size_t count = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return ct_error_set(err, CT_ERR_INVALID, "%s: negative dimension %d on axis %d",
                          t->name ? t->name : "tensor", shape[i], i);
    if (shape[i] && count > (SIZE_MAX / 8) / (size_t)shape[i])
      return ct_error_set(err, CT_ERR_INVALID, "%s: shape too large", t->name ? t->name : "tensor");
    count *= (size_t)shape[i];
  }
  if (count > INT32_MAX)
    return ct_error_set(err, CT_ERR_INVALID, "%s: %zu values exceed the 2^31 limit of one blob",
                        t->name ? t->name : "tensor", count);
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->count = count;
  if (t->data && !t->owns_data)
    CT_ASSERTF(count <= t->capacity, "view %s too small: %zu > %zu", t->name ? t->name : "?", count,
               t->capacity);
  return ensure_storage(t, err);
}

void ct_tensor_reshape_or_die(ct_tensor *t, int ndim, const int *shape) {
  ct_error err;
  ct_status s = ct_tensor_reshape(t, ndim, shape, &err);
  if (s == CT_ERR_NOMEM) ct_fatal(__FILE__, __LINE__, "%s", err.msg);
  if (s != CT_OK) ct_abort(__FILE__, __LINE__, "%s", err.msg);
}

void ct_tensor_reshape_like(ct_tensor *t, const ct_tensor *other) {
  ct_tensor_reshape_or_die(t, other->ndim, other->shape);
}

void ct_tensor_reshape4(ct_tensor *t, int n, int c, int h, int w) {
  int s[4] = {n, c, h, w};
  ct_tensor_reshape_or_die(t, 4, s);
}

void ct_tensor_drop_storage(ct_tensor *t) {
  release(t);
  t->no_storage = true;
}

void ct_tensor_need_diff(ct_tensor *t) {
  t->has_diff = true;
  if (!t->no_storage && !t->diff && t->data && (t->owns_data || t->own_diff_on_view)) {
    size_t n = t->capacity > t->count ? t->capacity : t->count;
    t->diff = ct_mem_alloc(t->device, ct_tensor_bytes(t, n));
    t->owns_diff = true;
    t->diff_capacity = n;
  }
}

void ct_tensor_set_dtype(ct_tensor *t, ct_dtype dtype) {
  CT_ASSERT(dtype >= 0 && dtype < CT_DTYPES);
  if (dtype == t->dtype) return;
  const bool resize = ct_dtype_size(dtype) != ct_dtype_size(t->dtype);
  if (resize && t->owns_data) {
    ct_mem_free(t->device, t->data);
    t->data = NULL;
    t->owns_data = false;
    t->capacity = 0;
  }
  if (resize && t->owns_diff) {
    ct_mem_free(t->device, t->diff);
    t->diff = NULL;
    t->owns_diff = false;
    t->diff_capacity = 0;
  }
  t->dtype = dtype;
}

void ct_tensor_set_view(ct_tensor *t, void *data, void *diff) {
  release(t);
  t->data = data;
  t->diff = diff;
  t->has_diff = diff != NULL;
  t->capacity = t->count;
}

void ct_tensor_share_data(ct_tensor *t, const ct_tensor *other) {
  CT_ASSERT(t->count == other->count && t->device == other->device);
  if (t->no_storage) return;
  if (t->owns_data) ct_mem_free(t->device, t->data);
  t->data = other->data;
  t->owns_data = false;
  t->capacity = other->count;
}

void ct_tensor_share_diff(ct_tensor *t, const ct_tensor *other) {
  CT_ASSERT(t->count == other->count && t->device == other->device);
  t->has_diff = true;
  if (t->no_storage) return;
  if (t->owns_diff) ct_mem_free(t->device, t->diff);
  t->diff = other->diff;
  t->owns_diff = false;
}

void ct_tensor_alias_data(ct_tensor *t, const ct_tensor *src) {
  CT_ASSERT(t != src && t->device == src->device);
  if (t->owns_data) ct_mem_free(t->device, t->data);
  t->data = t->no_storage ? NULL : src->data;
  t->owns_data = false;
  t->own_diff_on_view = true;
  t->ndim = src->ndim;
  memcpy(t->shape, src->shape, sizeof t->shape);
  t->count = src->count;
  t->capacity = src->count;
  if (t->owns_diff && t->diff_capacity < t->count) {
    ct_mem_free(t->device, t->diff);
    t->diff = NULL;
    t->owns_diff = false;
    t->diff_capacity = 0;
  }
  if (t->has_diff && !t->diff && !t->no_storage) {
    t->diff = ct_mem_alloc(t->device, ct_tensor_bytes(t, t->count));
    t->owns_diff = true;
    t->diff_capacity = t->count;
  }
}

ct_status ct_tensor_canonical_axis(const ct_tensor *t, int axis, int *out, ct_error *err) {
  if (axis < -t->ndim || axis >= t->ndim)
    return ct_error_set(err, CT_ERR_INVALID, "axis %d out of range for a %d-axis blob%s%s", axis,
                        t->ndim, t->name ? " " : "", t->name ? t->name : "");
  *out = axis < 0 ? axis + t->ndim : axis;
  return CT_OK;
}

size_t ct_tensor_count_range(const ct_tensor *t, int start, int end) {
  CT_ASSERT(start >= 0 && start <= end && end <= t->ndim);
  size_t c = 1;
  for (int i = start; i < end; i++) c *= (size_t)t->shape[i];
  return c;
}

int ct_tensor_dim(const ct_tensor *t, int axis) {
  int a = axis < 0 ? axis + t->ndim : axis;
  CT_ASSERTF(a >= 0 && a < t->ndim, "axis %d of a %d-axis tensor", axis, t->ndim);
  return t->shape[a];
}

int ct_tensor_legacy_dim(const ct_tensor *t, int axis) {
  CT_ASSERT(t->ndim <= 4 && axis >= -4 && axis < 4);
  if (axis >= t->ndim || axis < -t->ndim) return 1;
  return ct_tensor_dim(t, axis);
}

char *ct_tensor_shape_string(const ct_tensor *t, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; i < t->ndim && o < len; i++) o += snprintf(buf + o, len - o, "%d ", t->shape[i]);
  if (o < len) snprintf(buf + o, len - o, "(%zu)", t->count);
  return buf;
}

bool ct_tensor_same_shape(const ct_tensor *a, const ct_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

void ct_tensor_zero_diff(ct_tensor *t) {
  if (t->diff) ct_mem_zero(t->device, t->diff, ct_tensor_bytes(t, t->count));
}

const char *ct_layout_name(ct_layout l) { return l == CT_NHWC ? "NHWC" : "NCHW"; }

void ct_tensor_set_layout(ct_tensor *t, ct_layout layout) {
  CT_ASSERT(layout == CT_NCHW || layout == CT_NHWC);
  t->layout = layout;
}

void ct_tensor_ncs(const ct_tensor *t, size_t *n, size_t *c, size_t *s) {
  *n = t->ndim > 0 ? (size_t)t->shape[0] : 1;
  *c = t->ndim > 1 ? (size_t)t->shape[1] : 1;
  *s = t->ndim > 2 ? ct_tensor_count_range(t, 2, t->ndim) : 1;
}

void ct_tensor_copy_data(ct_tensor *dst, const ct_tensor *src) {
  CT_ASSERT(dst->count == src->count && dst->dtype == src->dtype && dst->layout == src->layout);
  ct_mem_copy(dst->device, dst->data, src->device, src->data, ct_tensor_bytes(src, src->count));
}

/* Whether t's memory order differs from the logical one. */
static bool reordered(const ct_tensor *t) {
  size_t n, c, s;
  ct_tensor_ncs(t, &n, &c, &s);
  return t->layout == CT_NHWC && c > 1 && s > 1;
}

/* n matrices of (rows, cols) float32 values from x, transposed into y. */
static void transpose(size_t n, size_t rows, size_t cols, const float *x, float *y) {
  for (size_t b = 0; b < n; b++, x += rows * cols, y += rows * cols)
    for (size_t r = 0; r < rows; r++)
      for (size_t k = 0; k < cols; k++) y[k * rows + r] = x[r * cols + k];
}

/* host (count float32 values) into mem (the tensor's type, on its device). */
static void upload(const ct_tensor *t, void *mem, const float *host) {
  float *moved = NULL;
  if (reordered(t)) {
    size_t n, c, s;
    ct_tensor_ncs(t, &n, &c, &s);
    moved = ct_xcalloc(t->count + 1, sizeof(float));
    transpose(n, c, s, host, moved);
    host = moved;
  }
  if (t->dtype == CT_F32) {
    ct_mem_copy(t->device, mem, CT_DEVICE_CPU, host, t->count * sizeof(float));
    free(moved);
    return;
  }
  void *tmp = ct_xcalloc(t->count + 1, ct_dtype_size(t->dtype));
  ct_dtype_convert(t->dtype, tmp, CT_F32, host, t->count);
  ct_mem_copy(t->device, mem, CT_DEVICE_CPU, tmp, ct_tensor_bytes(t, t->count));
  free(tmp);
  free(moved);
}

static void download(const ct_tensor *t, const void *mem, float *host) {
  if (reordered(t)) {
    size_t n, c, s;
    ct_tensor_ncs(t, &n, &c, &s);
    float *stored = ct_xcalloc(t->count + 1, sizeof(float));
    ct_tensor t32 = *t;
    t32.layout = CT_NCHW;
    download(&t32, mem, stored);
    transpose(n, s, c, stored, host);
    free(stored);
    return;
  }
  if (t->dtype == CT_F32) {
    ct_mem_copy(CT_DEVICE_CPU, host, t->device, mem, t->count * sizeof(float));
    return;
  }
  void *tmp = ct_xcalloc(t->count + 1, ct_dtype_size(t->dtype));
  ct_mem_copy(CT_DEVICE_CPU, tmp, t->device, mem, ct_tensor_bytes(t, t->count));
  ct_dtype_convert(CT_F32, host, t->dtype, tmp, t->count);
  free(tmp);
}

void ct_tensor_upload(ct_tensor *t, const float *host_data) { upload(t, t->data, host_data); }
void ct_tensor_download(const ct_tensor *t, float *host_data) { download(t, t->data, host_data); }
void ct_tensor_upload_diff(ct_tensor *t, const float *host_diff) {
  CT_ASSERT(t->diff);
  upload(t, t->diff, host_diff);
}
void ct_tensor_download_diff(const ct_tensor *t, float *host_diff) {
  CT_ASSERT(t->diff);
  download(t, t->diff, host_diff);
}
