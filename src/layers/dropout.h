/* Dropout's mask and GPU launchers (dropout.cu).
 *
 * The mask is not stored: element i of a forward pass is kept when
 * ct_dropout_bits(seed, i) >= threshold, where threshold = ratio * 2^32 and
 * seed is the seed of one counter-based draw of the context per training
 * forward (ct_draw_seed(ctx->seed, n) for the context's n-th draw, see
 * core/context.h).  The same functions run on the host and on a GPU, so both
 * devices drop the same elements for the same context seed and draw count.
 * On a GPU the draw is taken on the device by a tiny kernel that writes the
 * seed into the layer's device slot, which the mask kernels read: a replayed
 * CUDA graph draws a fresh mask each time.  Backward recomputes the mask
 * from the same slot. */
#ifndef CT_LAYERS_DROPOUT_H
#define CT_LAYERS_DROPOUT_H

#include <stddef.h>
#include <stdint.h>

#include "core/context.h"

#ifdef __CUDACC__
#define CT_HOST_DEVICE __host__ __device__
#else
#define CT_HOST_DEVICE
#endif

/* 32 uniform bits for element i (the splitmix64 finaliser of seed + (i+1) * golden). */
static inline CT_HOST_DEVICE uint32_t ct_dropout_bits(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (uint32_t)(z >> 32);
}

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = kept(i) ? x * scale : 0 with the seed read from *seed (device
 * memory); y may alias x.  Also the backward (x = dy, y = dx), since the
 * mask is a function of the seed and i. */
void ct_dropout_apply_gpu(ct_context *ctx, size_t n, const uint64_t *seed, uint32_t threshold,
                          float scale, const float *x, float *y);

#ifdef __cplusplus
}
#endif

#endif
