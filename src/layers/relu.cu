#include "gpu/gpu.h"
#include "layers/relu.h"

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
