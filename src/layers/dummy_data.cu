#include "gpu/gpu.h"
#include "layers/dummy_data.h"

__device__ static inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* (0, 1]: never 0, so log() below is finite */
__device__ static inline float unit(uint64_t bits) { return ((bits >> 40) + 1) * (1.0f / 16777216.0f); }

__global__ static void dummy_fill(size_t n, float *x, bool gaussian, float a, float b,
                                  const uint64_t *seed_dev) {
  const uint64_t seed = *seed_dev;
  CT_CUDA_KERNEL_LOOP(i, n) {
    uint64_t h = mix64(seed + 0x9E3779B97F4A7C15ull * (i + 1));
    if (!gaussian) {
      x[i] = a + (b - a) * (unit(h) - (1.0f / 16777216.0f));
    } else {
      float u1 = unit(h), u2 = unit(mix64(h ^ 0xD1B54A32D192ED03ull));
      x[i] = a + b * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    }
  }
}

extern "C" void ct_dummy_fill_gpu(ct_context *ctx, size_t n, float *x, bool gaussian, float a, float b,
                                  const uint64_t *seed_dev) {
  if (!n) return;
  dummy_fill<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, x, gaussian, a, b,
                                                                                   seed_dev);
  CT_CUDA_LAUNCH_CHECK();
}
