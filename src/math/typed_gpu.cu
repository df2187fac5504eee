/* Element-wise work on typed arrays, GPU side: one grid-stride kernel per
 * operation, templated on the element types. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gpu/gpu.h"
#include "math/typed.h"
#include "math/typed.cuh"

template <typename From, typename To>
__global__ static void convert_k(size_t n, const From *x, To *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = ct_st<To>(ct_ld(x[i]));
}

template <typename From>
__global__ static void axpy_from_k(size_t n, float alpha, const From *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] += alpha * ct_ld(x[i]);
}

template <typename T>
__global__ static void add_k(size_t n, const T *a, const T *b, T *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = ct_st<T>(ct_ld(a[i]) + ct_ld(b[i]));
}

#define STREAM(ctx) ((cudaStream_t)(ctx)->stream)
#define LAUNCH(k, ...)                                                           \
  do {                                                                           \
    k<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, __VA_ARGS__);   \
    CT_CUDA_LAUNCH_CHECK();                                                      \
  } while (0)

template <typename From>
static void convert_from(ct_context *ctx, size_t n, const From *x, ct_dtype to, void *y) {
  switch (to) {
    case CT_F32: LAUNCH(convert_k, x, (float *)y); break;
    case CT_BF16: LAUNCH(convert_k, x, (__nv_bfloat16 *)y); break;
    case CT_F16: LAUNCH(convert_k, x, (__half *)y); break;
    default: CT_ASSERTF(false, "no element type %d", (int)to);
  }
}

extern "C" void ct_gpu_convert(ct_context *ctx, size_t n, ct_dtype from, const void *x, ct_dtype to,
                               void *y) {
  if (!n) return;
  if (from == to) {
    if (x != y)
      CT_CUDA_CHECK(cudaMemcpyAsync(y, x, n * ct_dtype_size(to), cudaMemcpyDeviceToDevice,
                                    STREAM(ctx)));
    return;
  }
  switch (from) {
    case CT_F32: convert_from(ctx, n, (const float *)x, to, y); break;
    case CT_BF16: convert_from(ctx, n, (const __nv_bfloat16 *)x, to, y); break;
    case CT_F16: convert_from(ctx, n, (const __half *)x, to, y); break;
    default: CT_ASSERTF(false, "no element type %d", (int)from);
  }
}

extern "C" void ct_gpu_axpy_from(ct_context *ctx, size_t n, float alpha, ct_dtype from,
                                 const void *x, float *y) {
  if (!n) return;
  switch (from) {
    case CT_F32: LAUNCH(axpy_from_k, alpha, (const float *)x, y); break;
    case CT_BF16: LAUNCH(axpy_from_k, alpha, (const __nv_bfloat16 *)x, y); break;
    case CT_F16: LAUNCH(axpy_from_k, alpha, (const __half *)x, y); break;
    default: CT_ASSERTF(false, "no element type %d", (int)from);
  }
}

extern "C" void ct_gpu_add_typed(ct_context *ctx, ct_dtype t, size_t n, const void *a,
                                 const void *b, void *y) {
  if (!n) return;
  switch (t) {
    case CT_F32: LAUNCH(add_k, (const float *)a, (const float *)b, (float *)y); break;
    case CT_BF16:
      LAUNCH(add_k, (const __nv_bfloat16 *)a, (const __nv_bfloat16 *)b, (__nv_bfloat16 *)y);
      break;
    case CT_F16: LAUNCH(add_k, (const __half *)a, (const __half *)b, (__half *)y); break;
    default: CT_ASSERTF(false, "no element type %d", (int)t);
  }
}

static cudaDataType_t cuda_type(ct_dtype t) {
  switch (t) {
    case CT_BF16: return CUDA_R_16BF;
    case CT_F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

extern "C" void ct_gpu_gemm_typed(ct_context *ctx, bool trans_a, bool trans_b, int M, int N, int K,
                                  float alpha, ct_dtype ab_type, const void *A, const void *B,
                                  float beta, ct_dtype c_type, void *C) {
  if (M == 0 || N == 0) return;
  /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
  const int lda = trans_a ? M : K, ldb = trans_b ? K : N;
  const cudaDataType_t t = cuda_type(ab_type);
  cublasStatus_t st = cublasGemmEx(
      (cublasHandle_t)ctx->cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, t, ldb, A, t, lda, &beta, C,
      cuda_type(c_type), N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  CT_ASSERTF(st == CUBLAS_STATUS_SUCCESS, "cuBLAS GemmEx (%s x %s -> %s, %d x %d x %d): %s",
             ct_dtype_name(ab_type), ct_dtype_name(ab_type), ct_dtype_name(c_type), M, N, K,
             cublasGetStatusString(st));
}
