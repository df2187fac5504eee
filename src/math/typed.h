/* Element-wise work on arrays of any element type (core/dtype.h), on the
 * host (ct_cpu_*), on a GPU (ct_gpu_*, on the context's stream) or on the
 * context's device (ct_dev_*).  16-bit values are read as float32, computed
 * in float32 and rounded once (to nearest, ties to even) when written. */
#ifndef CT_MATH_TYPED_H
#define CT_MATH_TYPED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/context.h"
#include "core/dtype.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Value i of an array of type t, as float32; and storing one. */
static inline float ct_typed_load(ct_dtype t, const void *p, size_t i) {
  switch (t) {
    case CT_BF16: return ct_bf16_to_f32(((const uint16_t *)p)[i]);
    case CT_F16: return ct_f16_to_f32(((const uint16_t *)p)[i]);
    default: return ((const float *)p)[i];
  }
}
static inline void ct_typed_store(ct_dtype t, void *p, size_t i, float v) {
  switch (t) {
    case CT_BF16: ((uint16_t *)p)[i] = ct_f32_to_bf16(v); break;
    case CT_F16: ((uint16_t *)p)[i] = ct_f32_to_f16(v); break;
    default: ((float *)p)[i] = v; break;
  }
}

/* y (n values of type `to`) = x (n values of type `from`). */
void ct_cpu_convert(size_t n, ct_dtype from, const void *x, ct_dtype to, void *y);
void ct_gpu_convert(ct_context *ctx, size_t n, ct_dtype from, const void *x, ct_dtype to, void *y);
void ct_dev_convert(ct_context *ctx, size_t n, ct_dtype from, const void *x, ct_dtype to, void *y);

/* y (n float32 values) += alpha * x (n values of type from): a 16-bit
 * layer's parameter gradient added into its float32 master's diff. */
void ct_cpu_axpy_from(size_t n, float alpha, ct_dtype from, const void *x, float *y);
void ct_gpu_axpy_from(ct_context *ctx, size_t n, float alpha, ct_dtype from, const void *x,
                      float *y);
void ct_dev_axpy_from(ct_context *ctx, size_t n, float alpha, ct_dtype from, const void *x,
                      float *y);

/* y = a + b, all n values of type t (y may be a or b). */
void ct_cpu_add_typed(ct_dtype t, size_t n, const void *a, const void *b, void *y);
void ct_gpu_add_typed(ct_context *ctx, ct_dtype t, size_t n, const void *a, const void *b, void *y);
void ct_dev_add_typed(ct_context *ctx, ct_dtype t, size_t n, const void *a, const void *b, void *y);

/* C (M,N) = alpha op(A) op(B) + beta C, row-major as ct_gpu_gemm, with A, B
 * and C each of its own type (A and B of one 16-bit type, or all float32),
 * products accumulated in float32 on tensor cores (cuBLAS's GemmEx). */
void ct_gpu_gemm_typed(ct_context *ctx, bool trans_a, bool trans_b, int M, int N, int K,
                       float alpha, ct_dtype ab_type, const void *A, const void *B, float beta,
                       ct_dtype c_type, void *C);

/* n matrices of (rows, cols) values of type `from` at x, each transposed
 * into a matrix of (cols, rows) values of type `to` at y: y = x^T, or with
 * accumulate y += x^T.  x and y do not overlap.  With n = N, rows = C,
 * cols = spatial this turns NCHW values into NHWC ones (and back with rows
 * and cols swapped); with n = K, rows = C, cols = kh kw it turns a filter
 * (K, C, kh, kw) into (K, kh, kw, C). */
void ct_cpu_transpose_convert(size_t n, size_t rows, size_t cols, ct_dtype from, const void *x,
                              ct_dtype to, void *y, bool accumulate);
void ct_gpu_transpose_convert(ct_context *ctx, size_t n, size_t rows, size_t cols, ct_dtype from,
                              const void *x, ct_dtype to, void *y, bool accumulate);
void ct_dev_transpose_convert(ct_context *ctx, size_t n, size_t rows, size_t cols, ct_dtype from,
                              const void *x, ct_dtype to, void *y, bool accumulate);

/* The values of a tensor of (n, c, s) (ct_tensor_ncs) from one type and
 * memory order to another: a conversion, a reordering or both (x and y do
 * not overlap unless nothing is to be done). */
void ct_dev_relayout(ct_context *ctx, size_t n, size_t c, size_t s, ct_dtype from,
                     ct_layout from_layout, const void *x, ct_dtype to, ct_layout to_layout,
                     void *y);

/* y += x, n values of type t. */
void ct_dev_acc_typed(ct_context *ctx, ct_dtype t, size_t n, const void *x, void *y);

#ifdef __cplusplus
}
#endif

#endif
