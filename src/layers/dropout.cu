#include "gpu/gpu.h"
#include "layers/dropout.h"

__global__ static void dropout_apply(size_t n, const uint64_t *seed_slot, uint32_t threshold,
                                     float scale, const float *x, float *y) {
  const uint64_t seed = *seed_slot;
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = ct_dropout_bits(seed, i) >= threshold ? x[i] * scale : 0.0f;
}

extern "C" void ct_dropout_apply_gpu(ct_context *ctx, size_t n, const uint64_t *seed,
                                     uint32_t threshold, float scale, const float *x, float *y) {
  if (!n) return;
  dropout_apply<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, seed, threshold, scale, x, y);
  CT_CUDA_LAUNCH_CHECK();
}
