#include "layers/shape_util.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

ct_status ct_blob_shape_dims(const Caffe__BlobShape *shape, const char *field, int *ndim, int *dims,
                             ct_error *err) {
  *ndim = 0;
  if (!shape) return CT_OK;
  if (shape->n_dim > CT_MAX_AXES)
    return ct_error_set(err, CT_ERR_INVALID, "%s has %zu axes (at most %d)", field, shape->n_dim,
                        CT_MAX_AXES);
  for (size_t i = 0; i < shape->n_dim; i++) {
    if (shape->dim[i] < 0 || shape->dim[i] > INT32_MAX)
      return ct_error_set(err, CT_ERR_INVALID, "%s dim %zu is %lld (must be in [0, %d])", field, i,
                          (long long)shape->dim[i], INT32_MAX);
    dims[i] = (int)shape->dim[i];
  }
  *ndim = (int)shape->n_dim;
  return CT_OK;
}

ct_status ct_layer_axis(const ct_tensor *t, int axis, const char *field, int *out, ct_error *err) {
  if (axis < -t->ndim || axis >= t->ndim)
    return ct_error_set(err, CT_ERR_INVALID, "%s %d out of range for a %d-axis bottom", field, axis,
                        t->ndim);
  *out = axis < 0 ? axis + t->ndim : axis;
  return CT_OK;
}

char *ct_dims_string(const int *dims, int n, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  if (n == 0) snprintf(buf, len, "()");
  for (int i = 0; i < n && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%d", i ? " x " : "", dims[i]);
  return buf;
}

char *ct_dims64_string(const int64_t *dims, size_t n, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  if (n == 0) snprintf(buf, len, "()");
  for (size_t i = 0; i < n && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? " x " : "", (long long)dims[i]);
  return buf;
}

void ct_layer_share_top(ct_tensor *top, ct_tensor *bottom, int ndim, const int *shape) {
  CT_ASSERT(top != bottom && top->device == bottom->device);
  bool want_diff = top->has_diff || bottom->diff != NULL;
  /* A view from an earlier reshape may point at storage the bottom has since
   * replaced, and be too small for the new shape: drop it (nothing is freed,
   * it is not ours) so that the reshape below does not trip over it. */
  if (top->data && !top->owns_data && bottom->count > top->capacity)
    ct_tensor_set_view(top, NULL, NULL);
  ct_tensor_reshape_or_die(top, ndim, shape);
  CT_ASSERT(top->count == bottom->count);
  ct_tensor_share_data(top, bottom);
  if (want_diff) {
    ct_tensor_need_diff(bottom);
    ct_tensor_share_diff(top, bottom);
  }
}

void ct_copy_rows(ct_context *ctx, size_t rows, size_t row_len, const float *src,
                  size_t src_stride, float *dst, size_t dst_stride) {
  ct_copy_rows_sized(ctx, sizeof(float), rows, row_len, src, src_stride, dst, dst_stride);
}

void ct_copy_rows_sized(ct_context *ctx, size_t size, size_t rows, size_t row_len, const void *src,
                        size_t src_stride, void *dst, size_t dst_stride) {
  if (!rows || !row_len) return;
#ifdef CORTADO_HAVE_CUDA
  if (ctx->device != CT_DEVICE_CPU) {
    ct_copy_rows_gpu(ctx, size, rows, row_len, src, src_stride, dst, dst_stride);
    return;
  }
#endif
  CT_ASSERT(ctx->device == CT_DEVICE_CPU);
  if (src_stride == row_len && dst_stride == row_len) {
    memcpy(dst, src, rows * row_len * size);
    return;
  }
  for (size_t r = 0; r < rows; r++)
    memcpy((char *)dst + r * dst_stride * size, (const char *)src + r * src_stride * size,
           row_len * size);
}

void ct_stream_upload(ct_context *ctx, void *dst, const void *src_host, size_t bytes) {
  if (!bytes) return;
#ifdef CORTADO_HAVE_CUDA
  if (ctx->device != CT_DEVICE_CPU) {
    ct_stream_copy_gpu(ctx, dst, src_host, bytes, false);
    return;
  }
#endif
  CT_ASSERT(ctx->device == CT_DEVICE_CPU);
  memcpy(dst, src_host, bytes);
}

void ct_stream_download(ct_context *ctx, void *dst_host, const void *src, size_t bytes) {
  if (!bytes) return;
#ifdef CORTADO_HAVE_CUDA
  if (ctx->device != CT_DEVICE_CPU) {
    ct_stream_copy_gpu(ctx, dst_host, src, bytes, true);
    return;
  }
#endif
  CT_ASSERT(ctx->device == CT_DEVICE_CPU);
  memcpy(dst_host, src, bytes);
}
