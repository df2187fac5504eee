#include "gpu/gpu.h"
#include "layers/relu.h"
#include "math/typed.cuh"

__global__ static void relu_fwd(size_t n, float slope, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = x[i] > 0 ? x[i] : slope * x[i];
}

__global__ static void relu_bwd(size_t n, float slope, const float *x, const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) dx[i] = dy[i] * (x[i] > 0 ? 1.0f : slope);
}

extern "C" void ct_relu_forward_gpu(ct_context *ctx, size_t n, float slope, const float *x,
                                    float *y) {
  if (!n) return;
  relu_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, slope, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_relu_backward_gpu(ct_context *ctx, size_t n, float slope, const float *x,
                                     const float *dy, float *dx) {
  if (!n) return;
  relu_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, slope, x, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}

/* 16-bit values, computed in float32 and rounded once. */
template <typename T>
__global__ static void relu_fwd_t(size_t n, float slope, const T *x, T *y) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    float v = ct_ld(x[i]);
    y[i] = ct_st<T>(v > 0 ? v : slope * v);
  }
}

template <typename T>
__global__ static void relu_bwd_t(size_t n, float slope, const T *x, const T *dy, T *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) dx[i] = ct_st<T>(ct_ld(dy[i]) * (ct_ld(x[i]) > 0 ? 1.0f : slope));
}

extern "C" void ct_relu_forward_gpu_typed(ct_context *ctx, ct_dtype t, size_t n, float slope,
                                          const void *x, void *y) {
  if (!n) return;
  cudaStream_t s = (cudaStream_t)ctx->stream;
  if (t == CT_BF16)
    relu_fwd_t<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, slope, (const __nv_bfloat16 *)x,
                                                             (__nv_bfloat16 *)y);
  else
    relu_fwd_t<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, slope, (const __half *)x, (__half *)y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_relu_backward_gpu_typed(ct_context *ctx, ct_dtype t, size_t n, float slope,
                                           const void *x, const void *dy, void *dx) {
  if (!n) return;
  cudaStream_t s = (cudaStream_t)ctx->stream;
  if (t == CT_BF16)
    relu_bwd_t<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(
        n, slope, (const __nv_bfloat16 *)x, (const __nv_bfloat16 *)dy, (__nv_bfloat16 *)dx);
  else
    relu_bwd_t<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, s>>>(n, slope, (const __half *)x,
                                                             (const __half *)dy, (__half *)dx);
  CT_CUDA_LAUNCH_CHECK();
}
