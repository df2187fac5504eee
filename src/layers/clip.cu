#include "gpu/gpu.h"
#include "layers/clip.h"

__global__ static void clip_fwd(size_t n, float lo, float hi, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = fmaxf(lo, fminf(x[i], hi));
}

__global__ static void clip_bwd(size_t n, float lo, float hi, const float *x, const float *dy,
                                float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) dx[i] = (x[i] >= lo && x[i] <= hi) ? dy[i] : 0.0f;
}

extern "C" void ct_clip_forward_gpu(ct_context *ctx, size_t n, float lo, float hi, const float *x,
                                    float *y) {
  if (!n) return;
  clip_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, lo, hi, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_clip_backward_gpu(ct_context *ctx, size_t n, float lo, float hi, const float *x,
                                     const float *dy, float *dx) {
  if (!n) return;
  clip_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, lo, hi, x, dy,
                                                                                 dx);
  CT_CUDA_LAUNCH_CHECK();
}
