#include "gpu/gpu.h"
#include "layers/bnll.h"

__global__ static void bnll_fwd(size_t n, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = x[i] > 0 ? x[i] + log1pf(expf(-x[i])) : log1pf(expf(x[i]));
}

__global__ static void bnll_bwd(size_t n, const float *x, const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    float e = expf(fminf(x[i], 50.0f));
    dx[i] = dy[i] * e / (e + 1.0f);
  }
}

extern "C" void ct_bnll_forward_gpu(ct_context *ctx, size_t n, const float *x, float *y) {
  if (!n) return;
  bnll_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_bnll_backward_gpu(ct_context *ctx, size_t n, const float *x, const float *dy,
                                     float *dx) {
  if (!n) return;
  bnll_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, x, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
