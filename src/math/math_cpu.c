#include <cblas.h>
#include <math.h>
#include <string.h>

#include "core/mem.h"
#include "core/status.h"
#include "math/math.h"

void ct_cpu_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float *A,
                 const float *B, float beta, float *C) {
  int lda = trans_a ? M : K;
  int ldb = trans_b ? K : N;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              M, N, K, alpha, A, lda, B, ldb, beta, C, N);
}

void ct_cpu_gemv(bool trans_a, int M, int N, float alpha, const float *A, const float *x,
                 float beta, float *y) {
  cblas_sgemv(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, M, N, alpha, A, N, x, 1, beta, y, 1);
}

void ct_cpu_axpy(size_t n, float alpha, const float *x, float *y) {
  for (size_t i = 0; i < n; i++) y[i] += alpha * x[i];
}

void ct_cpu_scal(size_t n, float alpha, float *x) {
  if (alpha == 0.0f) {
    memset(x, 0, n * sizeof *x); /* Caffe: scaling by 0 clears NaNs too */
    return;
  }
  for (size_t i = 0; i < n; i++) x[i] *= alpha;
}

void ct_cpu_set(size_t n, float value, float *x) {
  if (value == 0.0f) {
    memset(x, 0, n * sizeof *x);
    return;
  }
  for (size_t i = 0; i < n; i++) x[i] = value;
}

void ct_cpu_copy(size_t n, const float *x, float *y) {
  if (x != y) memmove(y, x, n * sizeof *x);
}

double ct_cpu_dot(size_t n, const float *x, const float *y) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)x[i] * y[i];
  return s;
}

double ct_cpu_asum(size_t n, const float *x) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += fabs(x[i]);
  return s;
}

double ct_cpu_sumsq(size_t n, const float *x) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

#define CT_ELEMENTWISE2(name, expr)                                         \
  void ct_cpu_##name(size_t n, const float *a, const float *b, float *y) { \
    for (size_t i = 0; i < n; i++) y[i] = (expr);                           \
  }
CT_ELEMENTWISE2(add, a[i] + b[i])
CT_ELEMENTWISE2(sub, a[i] - b[i])
CT_ELEMENTWISE2(mul, a[i] * b[i])
CT_ELEMENTWISE2(div, a[i] / b[i])

bool ct_cpu_all_finite(size_t n, const float *x) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i])) return false;
  return true;
}

#ifdef CORTADO_HAVE_CUDA
#define CT_ON_GPU(call) call
#else
#define CT_ON_GPU(call) ct_abort(__FILE__, __LINE__, "GPU math in a CPU-only build")
#endif

void ct_dev_gemm(ct_context *ctx, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                 const float *A, const float *B, float beta, float *C) {
  if (ctx->device == CT_DEVICE_CPU) ct_cpu_gemm(trans_a, trans_b, M, N, K, alpha, A, B, beta, C);
  else CT_ON_GPU(ct_gpu_gemm(ctx, trans_a, trans_b, M, N, K, alpha, A, B, beta, C));
}
void ct_dev_gemv(ct_context *ctx, bool trans_a, int M, int N, float alpha, const float *A,
                 const float *x, float beta, float *y) {
  if (ctx->device == CT_DEVICE_CPU) ct_cpu_gemv(trans_a, M, N, alpha, A, x, beta, y);
  else CT_ON_GPU(ct_gpu_gemv(ctx, trans_a, M, N, alpha, A, x, beta, y));
}
void ct_dev_copy(ct_context *ctx, size_t n, const float *x, float *y) {
  if (ctx->device == CT_DEVICE_CPU) ct_cpu_copy(n, x, y);
  else CT_ON_GPU(ct_gpu_copy(ctx, n, x, y));
}
void ct_dev_copy_bytes(ct_context *ctx, size_t bytes, const void *x, void *y) {
  if (ctx->device != CT_DEVICE_CPU) CT_ON_GPU(ct_gpu_copy_bytes(ctx, bytes, x, y));
  else if (x != y && bytes) memmove(y, x, bytes);
}
void ct_dev_set(ct_context *ctx, size_t n, float value, float *x) {
  if (ctx->device == CT_DEVICE_CPU) ct_cpu_set(n, value, x);
  else CT_ON_GPU(ct_gpu_set(ctx, n, value, x));
}
void ct_dev_axpy(ct_context *ctx, size_t n, float alpha, const float *x, float *y) {
  if (ctx->device == CT_DEVICE_CPU) ct_cpu_axpy(n, alpha, x, y);
  else CT_ON_GPU(ct_gpu_axpy(ctx, n, alpha, x, y));
}
double ct_dev_dot(ct_context *ctx, size_t n, const float *x, const float *y) {
  if (ctx->device == CT_DEVICE_CPU) return ct_cpu_dot(n, x, y);
  CT_ON_GPU(return ct_gpu_dot(ctx, n, x, y));
}
double ct_dev_asum(ct_context *ctx, size_t n, const float *x) {
  if (ctx->device == CT_DEVICE_CPU) return ct_cpu_asum(n, x);
  CT_ON_GPU(return ct_gpu_asum(ctx, n, x));
}
double ct_dev_sumsq(ct_context *ctx, size_t n, const float *x) {
  if (ctx->device == CT_DEVICE_CPU) return ct_cpu_sumsq(n, x);
  CT_ON_GPU(return ct_gpu_sumsq(ctx, n, x));
}
bool ct_dev_all_finite(ct_context *ctx, size_t n, const float *x) {
  if (ctx->device == CT_DEVICE_CPU) return ct_cpu_all_finite(n, x);
  CT_ON_GPU(return ct_gpu_all_finite(ctx, n, x));
}
