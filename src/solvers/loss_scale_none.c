/* CPU-only builds: no GPU solver can be made, so reaching a loss-scaling
 * kernel is a bug. */
#ifndef CORTADO_HAVE_CUDA
#include "solvers/loss_scale.h"

void ct_loss_scale_begin_gpu(ct_context *ctx, ct_loss_scale_state *state) {
  ct_abort(__FILE__, __LINE__, "loss scaling kernel in a CPU-only build");
}

void ct_loss_scale_unscale_gpu(ct_context *ctx, ct_loss_scale_state *state, size_t n, float *g) {
  ct_abort(__FILE__, __LINE__, "loss scaling kernel in a CPU-only build");
}

void ct_loss_scale_adjust_gpu(ct_context *ctx, ct_loss_scale_state *state,
                              const ct_loss_scale_opts *o) {
  ct_abort(__FILE__, __LINE__, "loss scaling kernel in a CPU-only build");
}

void ct_loss_scale_seed_gpu(ct_context *ctx, const ct_loss_scale_state *state, size_t n,
                            float weight, float *diff) {
  ct_abort(__FILE__, __LINE__, "loss scaling kernel in a CPU-only build");
}
#endif
