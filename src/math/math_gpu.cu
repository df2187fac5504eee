/* GPU math: cuBLAS for BLAS, small grid-stride kernels for the rest. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gpu/gpu.h"
#include "math/math.h"

#define STREAM(ctx) ((cudaStream_t)(ctx)->stream)
#define BLAS(ctx) ((cublasHandle_t)(ctx)->cublas)

#define CT_CUBLAS_CHECK(call)                                                              \
  do {                                                                                     \
    cublasStatus_t ct_s_ = (call);                                                         \
    if (ct_s_ != CUBLAS_STATUS_SUCCESS)                                                    \
      ct_abort(__FILE__, __LINE__, "cuBLAS error %d (%s) in %s", (int)ct_s_,               \
               cublasGetStatusString(ct_s_), #call);                                       \
  } while (0)

extern "C" void ct_gpu_gemm(ct_context *ctx, bool trans_a, bool trans_b, int M, int N, int K,
                            float alpha, const float *A, const float *B, float beta, float *C) {
  /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T. */
  int lda = trans_a ? M : K;
  int ldb = trans_b ? K : N;
  CT_CUBLAS_CHECK(cublasSgemm(BLAS(ctx), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                              trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb, A, lda,
                              &beta, C, N));
}

extern "C" void ct_gpu_gemv(ct_context *ctx, bool trans_a, int M, int N, float alpha,
                            const float *A, const float *x, float beta, float *y) {
  CT_CUBLAS_CHECK(cublasSgemv(BLAS(ctx), trans_a ? CUBLAS_OP_N : CUBLAS_OP_T, N, M, &alpha, A, N, x,
                              1, &beta, y, 1));
}

__global__ void k_axpy(size_t n, float a, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] += a * x[i];
}
__global__ void k_axpby(size_t n, float a, const float *x, float b, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = a * x[i] + b * y[i];
}
__global__ void k_scal(size_t n, float a, float *x) {
  CT_CUDA_KERNEL_LOOP(i, n) x[i] = a == 0.0f ? 0.0f : a * x[i];
}
__global__ void k_set(size_t n, float v, float *x) { CT_CUDA_KERNEL_LOOP(i, n) x[i] = v; }
__global__ void k_add_scalar(size_t n, float a, float *y) { CT_CUDA_KERNEL_LOOP(i, n) y[i] += a; }
__global__ void k_powx(size_t n, const float *a, float p, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = powf(a[i], p);
}

#define LAUNCH(kernel, n, ...)                                                                \
  do {                                                                                        \
    if ((n) == 0) break;                                                                      \
    kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(__VA_ARGS__);              \
    CT_CUDA_LAUNCH_CHECK();                                                                   \
  } while (0)

extern "C" void ct_gpu_axpy(ct_context *ctx, size_t n, float alpha, const float *x, float *y) {
  LAUNCH(k_axpy, n, n, alpha, x, y);
}
extern "C" void ct_gpu_scal(ct_context *ctx, size_t n, float alpha, float *x) {
  LAUNCH(k_scal, n, n, alpha, x);
}
extern "C" void ct_gpu_set(ct_context *ctx, size_t n, float value, float *x) {
  if (value == 0.0f) {
    if (n) CT_CUDA_CHECK(cudaMemsetAsync(x, 0, n * sizeof(float), STREAM(ctx)));
    return;
  }
  LAUNCH(k_set, n, n, value, x);
}
extern "C" void ct_gpu_copy(ct_context *ctx, size_t n, const float *x, float *y) {
  if (x != y && n)
    CT_CUDA_CHECK(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, STREAM(ctx)));
}
extern "C" void ct_gpu_copy_bytes(ct_context *ctx, size_t bytes, const void *x, void *y) {
  if (x != y && bytes)
    CT_CUDA_CHECK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, STREAM(ctx)));
}
#define BINARY(name, expr)                                                                  \
  __global__ void k_##name(size_t n, const float *a, const float *b, float *y) {            \
    CT_CUDA_KERNEL_LOOP(i, n) y[i] = (expr);                                                \
  }                                                                                         \
  extern "C" void ct_gpu_##name(ct_context *ctx, size_t n, const float *a, const float *b,  \
                                float *y) {                                                 \
    LAUNCH(k_##name, n, n, a, b, y);                                                        \
  }
BINARY(add, a[i] + b[i])
BINARY(sub, a[i] - b[i])
BINARY(mul, a[i] * b[i])
BINARY(div, a[i] / b[i])

/* Reductions in double, one block per chunk, then a host sum of the partials. */
enum { RED_DOT, RED_ASUM, RED_SUMSQ, RED_NONFINITE };
__global__ void k_reduce(size_t n, int op, const float *x, const float *y, double *partial) {
  __shared__ double buf[CT_CUDA_THREADS];
  double s = 0;
  CT_CUDA_KERNEL_LOOP(i, n) {
    float v = x[i];
    switch (op) {
      case RED_DOT: s += (double)v * y[i]; break;
      case RED_ASUM: s += fabs((double)v); break;
      case RED_SUMSQ: s += (double)v * v; break;
      default: s += isfinite(v) ? 0.0 : 1.0; break;
    }
  }
  buf[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) buf[threadIdx.x] += buf[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = buf[0];
}

static double reduce(ct_context *ctx, size_t n, int op, const float *x, const float *y) {
  if (n == 0) return 0;
  unsigned blocks = ct_cuda_blocks(n);
  if (blocks > 1024) blocks = 1024;
  double *partial;
  CT_CUDA_CHECK(cudaMallocAsync(&partial, blocks * sizeof(double), STREAM(ctx)));
  k_reduce<<<blocks, CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, op, x, y, partial);
  CT_CUDA_LAUNCH_CHECK();
  double host[1024];
  CT_CUDA_CHECK(cudaMemcpyAsync(host, partial, blocks * sizeof(double), cudaMemcpyDeviceToHost,
                                STREAM(ctx)));
  CT_CUDA_CHECK(cudaFreeAsync(partial, STREAM(ctx)));
  ct_gpu_note_host_wait();
  CT_CUDA_CHECK(cudaStreamSynchronize(STREAM(ctx)));
  double s = 0;
  for (unsigned i = 0; i < blocks; i++) s += host[i];
  return s;
}

extern "C" double ct_gpu_dot(ct_context *ctx, size_t n, const float *x, const float *y) {
  return reduce(ctx, n, RED_DOT, x, y);
}
extern "C" double ct_gpu_asum(ct_context *ctx, size_t n, const float *x) {
  return reduce(ctx, n, RED_ASUM, x, NULL);
}
extern "C" double ct_gpu_sumsq(ct_context *ctx, size_t n, const float *x) {
  return reduce(ctx, n, RED_SUMSQ, x, NULL);
}
extern "C" bool ct_gpu_all_finite(ct_context *ctx, size_t n, const float *x) {
  return reduce(ctx, n, RED_NONFINITE, x, NULL) == 0.0;
}
