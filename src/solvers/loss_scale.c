/* Loss scaling's steps on the CPU, and the choice of device (loss_scale.h). */
#include "solvers/loss_scale.h"

#include <math.h>

#include "core/mem.h"

void ct_loss_scale_begin(ct_context *ctx, ct_loss_scale_state *state) {
  if (ctx->device != CT_DEVICE_CPU) {
    ct_loss_scale_begin_gpu(ctx, state);
    return;
  }
  state->overflow = 0;
}

void ct_loss_scale_unscale(ct_context *ctx, ct_loss_scale_state *state, size_t n, float *g) {
  if (ctx->device != CT_DEVICE_CPU) {
    ct_loss_scale_unscale_gpu(ctx, state, n, g);
    return;
  }
  const float inv = 1.0f / state->scale;
  unsigned bad = 0;
  for (size_t i = 0; i < n; i++) {
    g[i] *= inv;
    bad |= !isfinite(g[i]);
  }
  if (bad) state->overflow = 1;
}

void ct_loss_scale_adjust(ct_context *ctx, ct_loss_scale_state *state,
                          const ct_loss_scale_opts *o) {
  if (ctx->device != CT_DEVICE_CPU) {
    ct_loss_scale_adjust_gpu(ctx, state, o);
    return;
  }
  ct_loss_scale_rule(state, o->mode, o->window);
}

void ct_loss_scale_seed(ct_context *ctx, const ct_loss_scale_state *state, size_t n, float weight,
                        float *diff) {
  if (ctx->device != CT_DEVICE_CPU) {
    ct_loss_scale_seed_gpu(ctx, state, n, weight, diff);
    return;
  }
  const float v = weight * state->scale;
  for (size_t i = 0; i < n; i++) diff[i] = v;
}
