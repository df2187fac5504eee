#include "gpu/gpu.h"
#include "layers/threshold.h"

__global__ static void threshold_fwd(size_t n, float t, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = x[i] > t ? 1.0f : 0.0f;
}

extern "C" void ct_threshold_forward_gpu(ct_context *ctx, size_t n, float threshold, const float *x,
                                         float *y) {
  if (!n) return;
  threshold_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, threshold,
                                                                                      x, y);
  CT_CUDA_LAUNCH_CHECK();
}
