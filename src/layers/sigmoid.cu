#include "gpu/gpu.h"
#include "layers/sigmoid.h"

__global__ static void sigmoid_fwd(size_t n, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = 0.5f * tanhf(0.5f * x[i]) + 0.5f;
}

__global__ static void sigmoid_bwd(size_t n, const float *y, const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

extern "C" void ct_sigmoid_forward_gpu(ct_context *ctx, size_t n, const float *x, float *y) {
  if (!n) return;
  sigmoid_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_sigmoid_backward_gpu(ct_context *ctx, size_t n, const float *y, const float *dy,
                                        float *dx) {
  if (!n) return;
  sigmoid_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, y, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
