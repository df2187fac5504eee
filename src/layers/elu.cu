#include "gpu/gpu.h"
#include "layers/elu.h"

__global__ static void elu_fwd(size_t n, float alpha, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = x[i] > 0 ? x[i] : alpha * expm1f(x[i]);
}

__global__ static void elu_bwd(size_t n, float alpha, const float *x, const float *y,
                               const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) dx[i] = x[i] > 0 ? dy[i] : dy[i] * (y[i] + alpha);
}

extern "C" void ct_elu_forward_gpu(ct_context *ctx, size_t n, float alpha, const float *x,
                                   float *y) {
  if (!n) return;
  elu_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, alpha, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_elu_backward_gpu(ct_context *ctx, size_t n, float alpha, const float *x,
                                    const float *y, const float *dy, float *dx) {
  if (!n) return;
  elu_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, alpha, x, y, dy,
                                                                                dx);
  CT_CUDA_LAUNCH_CHECK();
}
