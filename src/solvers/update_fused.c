/* One update step over the flat buffers on the CPU, and the choice of
 * device (see ct_update_fused_run in update.h). */
#include <math.h>

#include "core/mem.h"
#include "core/parallel.h"
#include "math/math.h"
#include "solvers/update_internal.h"

static ct_update_cpu_fn cpu_rule(ct_update_kind kind) {
  switch (kind) {
    case CT_UPDATE_SGD: return ct_update_sgd_cpu;
    case CT_UPDATE_NESTEROV: return ct_update_nesterov_cpu;
    case CT_UPDATE_ADAGRAD: return ct_update_adagrad_cpu;
    case CT_UPDATE_RMSPROP: return ct_update_rmsprop_cpu;
    case CT_UPDATE_ADADELTA: return ct_update_adadelta_cpu;
    case CT_UPDATE_ADAM: return ct_update_adam_cpu;
  }
  CT_ASSERTF(false, "unknown update rule %d", (int)kind);
}

/* Caffe's ClipGradients: the factor that brings the global L2 norm of the
 * (not yet normalised) gradient down to u->clip, or 1. */
static ct_update_clip clip_of(ct_context *ctx, const ct_update_fused *u, const float *g) {
  double sumsq = 0;
  for (int s = 0; s < u->nseg; s++) sumsq += ct_dev_sumsq(ctx, u->seg_count[s], g + u->seg_start[s]);
  const float l2 = (float)sqrt(sumsq);
  return (ct_update_clip){.scale = l2 <= u->clip ? 1.0f : u->clip / l2, .l2 = l2};
}

float ct_update_larc_rate(ct_update_larc mode, float eta, float rate, float lr_mult, float w_norm,
                          float g_norm) {
  return ct_update_larc_rate_of(mode, eta, rate, lr_mult, w_norm, g_norm);
}

/* Segment s's rate: rate x lr_mult x Adam's correction, or LARC's from the
 * norms of its weights and of its gradient as scaled by grad_scale. */
static float segment_lr_cpu(ct_context *ctx, const ct_update_fused *u, const ct_update_step *step,
                            int s, const float *w, const float *g, float grad_scale) {
  const float lr_mult = u->seg_lr_mult[s];
  if (u->larc == CT_UPDATE_LARC_NONE) return step->rate * lr_mult * step->correction;
  const size_t at = u->seg_start[s], n = u->seg_count[s];
  const float w_norm = (float)sqrt(ct_dev_sumsq(ctx, n, w + at));
  const float g_norm = grad_scale * (float)sqrt(ct_dev_sumsq(ctx, n, g + at));
  return ct_update_larc_rate_of(u->larc, u->larc_eta, step->rate, lr_mult, w_norm, g_norm) *
         step->correction;
}

/* One segment's rule over a range of its values (update rules are value by
 * value: ranges on the host's threads give the serial loop's bits). */
typedef struct rule_job {
  ct_update_cpu_fn rule;
  float *w, *g, *h0, *h1;
  const ct_update_hparams *hp;
} rule_job;

static void rule_range(void *arg, size_t begin, size_t end) {
  const rule_job *j = arg;
  j->rule(end - begin, j->w + begin, j->g + begin, j->h0 + begin, j->h1 ? j->h1 + begin : NULL,
          j->hp);
}

static void fused_cpu(ct_context *ctx, const ct_update_fused *u, float *w, float *g, float *h0,
                      float *h1, const ct_update_step *step, ct_update_clip *clip) {
  if (u->halt && *u->halt != 0) return;
  if (u->loss && !isfinite(*u->loss)) {
    if (u->halt) *u->halt = 1;
    return;
  }
  if (u->skip && *u->skip != 0) return;
  ct_update_hparams hp = {0};
  hp.grad_scale = 1.0f;
  if (u->clip >= 0) {
    *clip = u->clip_given ? *u->clip_given : clip_of(ctx, u, g);
    hp.grad_scale = clip->scale;
  }
  if (u->iter_size > 1) hp.grad_scale *= 1.0f / (float)u->iter_size;
  hp.l1 = u->l1;
  hp.momentum = step->momentum;
  hp.momentum2 = u->momentum2;
  hp.rms_decay = u->rms_decay;
  hp.delta = u->delta;
  const ct_update_cpu_fn rule = cpu_rule(u->kind);
  for (int s = 0; s < u->nseg; s++) {
    const size_t at = u->seg_start[s];
    hp.lr = segment_lr_cpu(ctx, u, step, s, w, g, hp.grad_scale);
    hp.decay = step->weight_decay * u->seg_decay_mult[s];
    rule_job j = {rule, w + at, g + at, h0 + at, h1 ? h1 + at : NULL, &hp};
    ct_parallel_for(u->seg_count[s], 32768, rule_range, &j);
  }
}

void ct_update_fused_run(ct_context *ctx, const ct_update_fused *u, float *w, float *g, float *h0,
                         float *h1, const ct_update_step *step, ct_update_clip *clip,
                         double *partials, unsigned *counter) {
  if (ctx->device == CT_DEVICE_CPU) fused_cpu(ctx, u, w, g, h0, h1, step, clip);
  else ct_update_fused_gpu(ctx, u, w, g, h0, h1, step, clip, partials, counter);
}
