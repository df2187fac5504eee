/* Dense math on flat float arrays, on the host (ct_cpu_*) and on a GPU
 * (ct_gpu_*, on the context's stream).  Matrices are row-major, as in Caffe:
 * gemm computes C(M,N) = alpha * op(A)(M,K) * op(B)(K,N) + beta * C. */
#ifndef CT_MATH_MATH_H
#define CT_MATH_MATH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- host */
void ct_cpu_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                 const float *B, float beta, float *C);
/* y(M or N) = alpha * op(A)(M,N) x + beta * y */
void ct_cpu_gemv(bool trans_a, int M, int N, float alpha, const float *A, const float *x,
                 float beta, float *y);
void ct_cpu_axpy(size_t n, float alpha, const float *x, float *y);     /* y += a x */
void ct_cpu_scal(size_t n, float alpha, float *x);
void ct_cpu_set(size_t n, float value, float *x);
void ct_cpu_copy(size_t n, const float *x, float *y);
double ct_cpu_dot(size_t n, const float *x, const float *y);
double ct_cpu_asum(size_t n, const float *x);
double ct_cpu_sumsq(size_t n, const float *x);
void ct_cpu_add(size_t n, const float *a, const float *b, float *y);  /* y = a + b */
void ct_cpu_sub(size_t n, const float *a, const float *b, float *y);
void ct_cpu_mul(size_t n, const float *a, const float *b, float *y);
void ct_cpu_div(size_t n, const float *a, const float *b, float *y);
/* true when every value is finite */
bool ct_cpu_all_finite(size_t n, const float *x);

/* ---------------------------------------------------------------- GPU
 * All asynchronous on ctx->stream except the reductions, which return a
 * host value (and so synchronise). */
void ct_gpu_gemm(ct_context *ctx, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                 const float *A, const float *B, float beta, float *C);
void ct_gpu_gemv(ct_context *ctx, bool trans_a, int M, int N, float alpha, const float *A,
                 const float *x, float beta, float *y);
void ct_gpu_axpy(ct_context *ctx, size_t n, float alpha, const float *x, float *y);
void ct_gpu_scal(ct_context *ctx, size_t n, float alpha, float *x);
void ct_gpu_set(ct_context *ctx, size_t n, float value, float *x);
void ct_gpu_copy(ct_context *ctx, size_t n, const float *x, float *y);
void ct_gpu_copy_bytes(ct_context *ctx, size_t bytes, const void *x, void *y);
double ct_gpu_dot(ct_context *ctx, size_t n, const float *x, const float *y);
double ct_gpu_asum(ct_context *ctx, size_t n, const float *x);
double ct_gpu_sumsq(ct_context *ctx, size_t n, const float *x);
void ct_gpu_add(ct_context *ctx, size_t n, const float *a, const float *b, float *y);
void ct_gpu_sub(ct_context *ctx, size_t n, const float *a, const float *b, float *y);
void ct_gpu_mul(ct_context *ctx, size_t n, const float *a, const float *b, float *y);
void ct_gpu_div(ct_context *ctx, size_t n, const float *a, const float *b, float *y);
bool ct_gpu_all_finite(ct_context *ctx, size_t n, const float *x);

/* ---------------------------------------------------------------- either
 * Dispatch on ctx->device, for code (nets, solvers) that is device-neutral. */
void ct_dev_gemm(ct_context *ctx, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                 const float *A, const float *B, float beta, float *C);
void ct_dev_gemv(ct_context *ctx, bool trans_a, int M, int N, float alpha, const float *A,
                 const float *x, float beta, float *y);
void ct_dev_copy(ct_context *ctx, size_t n, const float *x, float *y);
/* bytes from x to y on ctx's device (on a GPU, queued on its stream). */
void ct_dev_copy_bytes(ct_context *ctx, size_t bytes, const void *x, void *y);
void ct_dev_set(ct_context *ctx, size_t n, float value, float *x);
void ct_dev_axpy(ct_context *ctx, size_t n, float alpha, const float *x, float *y);
double ct_dev_dot(ct_context *ctx, size_t n, const float *x, const float *y);
double ct_dev_asum(ct_context *ctx, size_t n, const float *x);
double ct_dev_sumsq(ct_context *ctx, size_t n, const float *x);
bool ct_dev_all_finite(ct_context *ctx, size_t n, const float *x);

#ifdef __cplusplus
}
#endif

#endif
