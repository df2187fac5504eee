/* Loss scaling's steps as kernels (loss_scale.h): each reads the scale from
 * device memory, so that nothing waits for the host and a CUDA graph
 * replays them as they are. */
#include "gpu/gpu.h"
#include "solvers/loss_scale.h"

#define STREAM(ctx) ((cudaStream_t)(ctx)->stream)

__global__ static void begin_k(ct_loss_scale_state *s) { s->overflow = 0; }

/* Every thread that meets a value that is not finite sets the flag: the
 * same store from all of them, so the race is harmless. */
__global__ static void unscale_k(size_t n, ct_loss_scale_state *s, float *g) {
  const float inv = 1.0f / s->scale;
  bool bad = false;
  CT_CUDA_KERNEL_LOOP(i, n) {
    const float v = g[i] * inv;
    g[i] = v;
    bad |= !isfinite(v);
  }
  if (bad) s->overflow = 1;
}

__global__ static void adjust_k(ct_loss_scale_state *s, ct_loss_scale_mode mode, unsigned window) {
  ct_loss_scale_state v = *s;
  ct_loss_scale_rule(&v, mode, window);
  *s = v;
}

__global__ static void seed_k(size_t n, const ct_loss_scale_state *s, float weight, float *diff) {
  const float v = weight * s->scale;
  CT_CUDA_KERNEL_LOOP(i, n) diff[i] = v;
}

extern "C" void ct_loss_scale_begin_gpu(ct_context *ctx, ct_loss_scale_state *state) {
  begin_k<<<1, 1, 0, STREAM(ctx)>>>(state);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_loss_scale_unscale_gpu(ct_context *ctx, ct_loss_scale_state *state, size_t n,
                                          float *g) {
  if (!n) return;
  unscale_k<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, state, g);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_loss_scale_adjust_gpu(ct_context *ctx, ct_loss_scale_state *state,
                                         const ct_loss_scale_opts *o) {
  adjust_k<<<1, 1, 0, STREAM(ctx)>>>(state, o->mode, o->window);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_loss_scale_seed_gpu(ct_context *ctx, const ct_loss_scale_state *state,
                                       size_t n, float weight, float *diff) {
  if (!n) return;
  seed_k<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, STREAM(ctx)>>>(n, state, weight, diff);
  CT_CUDA_LAUNCH_CHECK();
}
