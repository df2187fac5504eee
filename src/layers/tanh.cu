#include "gpu/gpu.h"
#include "layers/tanh.h"

__global__ static void tanh_fwd(size_t n, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = tanhf(x[i]);
}

__global__ static void tanh_bwd(size_t n, const float *y, const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

extern "C" void ct_tanh_forward_gpu(ct_context *ctx, size_t n, const float *x, float *y) {
  if (!n) return;
  tanh_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_tanh_backward_gpu(ct_context *ctx, size_t n, const float *y, const float *dy,
                                     float *dx) {
  if (!n) return;
  tanh_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, y, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
