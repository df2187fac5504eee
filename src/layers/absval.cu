#include "gpu/gpu.h"
#include "layers/absval.h"

__global__ static void absval_fwd(size_t n, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = fabsf(x[i]);
}

__global__ static void absval_bwd(size_t n, const float *x, const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) dx[i] = x[i] > 0 ? dy[i] : (x[i] < 0 ? -dy[i] : 0.0f);
}

extern "C" void ct_absval_forward_gpu(ct_context *ctx, size_t n, const float *x, float *y) {
  if (!n) return;
  absval_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_absval_backward_gpu(ct_context *ctx, size_t n, const float *x, const float *dy,
                                       float *dx) {
  if (!n) return;
  absval_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, x, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
