#include "gpu/gpu.h"
#include "layers/exp.h"

__global__ static void exp_fwd(size_t n, float inner, float outer, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    float v = expf(inner == 1.0f ? x[i] : inner * x[i]);
    y[i] = outer == 1.0f ? v : outer * v;
  }
}

__global__ static void exp_bwd(size_t n, float inner, const float *y, const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    float g = y[i] * dy[i];
    dx[i] = inner == 1.0f ? g : inner * g;
  }
}

extern "C" void ct_exp_forward_gpu(ct_context *ctx, size_t n, float inner, float outer,
                                   const float *x, float *y) {
  if (!n) return;
  exp_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, inner, outer, x,
                                                                                y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_exp_backward_gpu(ct_context *ctx, size_t n, float inner, const float *y,
                                    const float *dy, float *dx) {
  if (!n) return;
  exp_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, inner, y, dy,
                                                                                dx);
  CT_CUDA_LAUNCH_CHECK();
}
