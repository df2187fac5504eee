#include "gpu/gpu.h"
#include "layers/log.h"

__global__ static void log_fwd(size_t n, float scale, float shift, float base_scale, const float *x,
                               float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    float v = logf(scale * x[i] + shift);
    y[i] = base_scale == 1.0f ? v : base_scale * v;
  }
}

__global__ static void log_bwd(size_t n, float scale, float shift, float num_scale, const float *x,
                               const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) dx[i] = dy[i] * (num_scale / (scale * x[i] + shift));
}

extern "C" void ct_log_forward_gpu(ct_context *ctx, size_t n, float scale, float shift,
                                   float base_scale, const float *x, float *y) {
  if (!n) return;
  log_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, scale, shift,
                                                                                base_scale, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_log_backward_gpu(ct_context *ctx, size_t n, float scale, float shift,
                                    float num_scale, const float *x, const float *dy, float *dx) {
  if (!n) return;
  log_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, scale, shift, num_scale, x, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
