/* Shape helpers shared by the structure layers (Input, DummyData, Parameter,
 * Reshape, Flatten, Concat, Slice, Crop, ...): BlobShape fields to int
 * shapes, axis arguments checked against a bottom with a message naming the
 * field, shapes as text for messages, and tops that are views of a bottom. */
#ifndef CT_LAYERS_SHAPE_UTIL_H
#define CT_LAYERS_SHAPE_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "caffe.pb-c.h"
#include "core/context.h"
#include "core/status.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Copies a BlobShape into dims (CT_MAX_AXES entries) and *ndim; a NULL shape
 * is a 0-axis blob.  Fails with CT_ERR_INVALID, naming `field`, for more
 * than CT_MAX_AXES axes or a dim outside [0, INT32_MAX]. */
ct_status ct_blob_shape_dims(const Caffe__BlobShape *shape, const char *field, int *ndim, int *dims,
                             ct_error *err);

/* Maps `axis` (counted from the end when negative) of bottom t into
 * [0, ndim).  CT_ERR_INVALID: "<field> <axis> out of range for a <n>-axis bottom". */
ct_status ct_layer_axis(const ct_tensor *t, int axis, const char *field, int *out, ct_error *err);

/* "2 x 3 x 4" of n dims into buf (len bytes); returns buf.  "()" for n 0. */
char *ct_dims_string(const int *dims, int n, char *buf, size_t len);
/* The same for 64-bit dims (BlobShape fields as the user wrote them). */
char *ct_dims64_string(const int64_t *dims, size_t n, char *buf, size_t len);

/* Gives top the shape (ndim, shape) as a view of bottom's data and diff
 * (Caffe's ShareData/ShareDiff), so no values are copied.  The counts must
 * match (a bug otherwise).  Storage the top owned is freed.  The diff is
 * shared when either side wants one (the bottom's is allocated if needed). */
void ct_layer_share_top(ct_tensor *top, ct_tensor *bottom, int ndim, const int *shape);

/* Copies rows of row_len floats, `rows` times, from src (rows src_stride
 * apart) to dst (rows dst_stride apart) on device (host or GPU, on ctx's
 * stream): the block copy under Concat, Slice, Tile, Crop and friends. */
void ct_copy_rows(ct_context *ctx, size_t rows, size_t row_len, const float *src,
                  size_t src_stride, float *dst, size_t dst_stride);
/* The same for values of `size` bytes each (lengths and strides in values). */
void ct_copy_rows_sized(ct_context *ctx, size_t size, size_t rows, size_t row_len, const void *src,
                        size_t src_stride, void *dst, size_t dst_stride);

/* Host <-> ctx's device copies ordered on ctx's stream (a plain memcpy on
 * the host).  Upload: src may be reused as soon as it returns.  Download:
 * waits for the stream, so dst holds the values on return. */
void ct_stream_upload(ct_context *ctx, void *dst, const void *src_host, size_t bytes);
void ct_stream_download(ct_context *ctx, void *dst_host, const void *src, size_t bytes);

/* The GPU halves of ct_copy_rows and the stream copies (shape_util.cu). */
void ct_copy_rows_gpu(ct_context *ctx, size_t size, size_t rows, size_t row_len, const void *src,
                      size_t src_stride, void *dst, size_t dst_stride);
void ct_stream_copy_gpu(ct_context *ctx, void *dst, const void *src, size_t bytes, bool wait);

#ifdef __cplusplus
}
#endif

#endif
