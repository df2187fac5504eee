/* Loss scaling for 16-bit gradients (NVCaffe's global_grad_scale, PyTorch's
 * GradScaler): backward passes start from the loss weight times a scale S,
 * so that small gradients stay above float16's smallest values; before the
 * update the flat gradient is multiplied by 1 / S and checked.  A gradient
 * with an infinity or a NaN skips that update (weights and history stay as
 * they are) and, when the scale is dynamic, halves S; `window` clean updates
 * in a row double it.
 *
 * The state lives on the solver's device and every step of it is a kernel
 * (or, on the CPU, host code in the same order), so the decision to skip is
 * taken on the device without a host wait and an iteration replayed from a
 * CUDA graph does the same; the host reads each iteration's state from a
 * slot when the iteration is finished (for the log, the CSV log and the
 * snapshot).
 *
 * Per iteration, in the program's order:
 *   ct_loss_scale_seed       before each backward pass: the loss tops' diffs
 *                            = loss weight x S (net.c's ct_net_seed_loss)
 *   (backward, the all-reduce of the scaled gradients)
 *   ct_loss_scale_unscale    g *= 1 / S; overflow = any g not finite
 *   (the update, which changes nothing when overflow is set)
 *   ct_loss_scale_adjust     the counters and, when dynamic, S. */
#ifndef CT_SOLVERS_LOSS_SCALE_H
#define CT_SOLVERS_LOSS_SCALE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_loss_scale_mode {
  CT_LOSS_SCALE_AUTO = 0, /* the solver decides (ct_solver_opts.loss_scale) */
  CT_LOSS_SCALE_OFF,
  CT_LOSS_SCALE_STATIC,  /* a fixed S (global_grad_scale, --loss_scale=N) */
  CT_LOSS_SCALE_DYNAMIC  /* S halves on overflow and doubles after `window` clean updates */
} ct_loss_scale_mode;

/* The largest scale a dynamic S grows to (2^24: the loss weight times S
 * stays far from float32's range). */
#define CT_LOSS_SCALE_MAX 16777216.0f
/* The smallest it shrinks to (2^-24: below 1 for nets whose float16
 * gradients overflow even unscaled, as PyTorch's GradScaler allows). */
#define CT_LOSS_SCALE_MIN 5.9604644775390625e-8f

/* The settings.  init: the first S (> 0); window: clean updates before S
 * doubles (dynamic; > 0). */
typedef struct ct_loss_scale_opts {
  ct_loss_scale_mode mode;
  float init;
  unsigned window;
} ct_loss_scale_opts;

/* Defaults of a dynamic scale: S = 2^16, doubled after 2000 clean updates. */
#define CT_LOSS_SCALE_INIT 65536.0f
#define CT_LOSS_SCALE_WINDOW 2000u

/* The state, on the solver's device (host memory on the CPU). */
typedef struct ct_loss_scale_state {
  float scale;         /* S of the next backward pass */
  unsigned good;       /* clean updates since S last changed (or since the start) */
  unsigned overflow;   /* the latest update's gradient was not finite: it was skipped */
  unsigned skipped;    /* updates skipped since the start of training (resumes count on) */
} ct_loss_scale_state;

/* Zeroes state->overflow (the first thing of an iteration's backward). */
void ct_loss_scale_begin(ct_context *ctx, ct_loss_scale_state *state);
/* g[0..n) *= 1 / state->scale, and state->overflow = 1 when one of them is
 * an infinity or a NaN (before or after). */
void ct_loss_scale_unscale(ct_context *ctx, ct_loss_scale_state *state, size_t n, float *g);
/* After the update: on overflow skipped + 1, good = 0 and (dynamic) S / 2,
 * not below CT_LOSS_SCALE_MIN; else good + 1 and (dynamic) when good reaches
 * window, S x 2 (not above CT_LOSS_SCALE_MAX) and good = 0. */
void ct_loss_scale_adjust(ct_context *ctx, ct_loss_scale_state *state,
                          const ct_loss_scale_opts *o);
/* diff[0..n) = weight x state->scale (a loss top's backward seed). */
void ct_loss_scale_seed(ct_context *ctx, const ct_loss_scale_state *state, size_t n, float weight,
                        float *diff);

/* The GPU forms of the four (loss_scale_gpu.cu; ctx on a GPU). */
void ct_loss_scale_begin_gpu(ct_context *ctx, ct_loss_scale_state *state);
void ct_loss_scale_unscale_gpu(ct_context *ctx, ct_loss_scale_state *state, size_t n, float *g);
void ct_loss_scale_adjust_gpu(ct_context *ctx, ct_loss_scale_state *state,
                              const ct_loss_scale_opts *o);
void ct_loss_scale_seed_gpu(ct_context *ctx, const ct_loss_scale_state *state, size_t n,
                            float weight, float *diff);

/* The host's rule of ct_loss_scale_adjust, shared with the kernel's. */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline void ct_loss_scale_rule(ct_loss_scale_state *s, ct_loss_scale_mode mode,
                                      unsigned window) {
  if (s->overflow) {
    s->skipped++;
    s->good = 0;
    if (mode == CT_LOSS_SCALE_DYNAMIC && s->scale > CT_LOSS_SCALE_MIN)
      s->scale = s->scale * 0.5f < CT_LOSS_SCALE_MIN ? CT_LOSS_SCALE_MIN : s->scale * 0.5f;
    return;
  }
  s->good++;
  if (mode == CT_LOSS_SCALE_DYNAMIC && s->good >= window) {
    s->good = 0;
    if (s->scale < CT_LOSS_SCALE_MAX)
      s->scale = s->scale * 2.0f > CT_LOSS_SCALE_MAX ? CT_LOSS_SCALE_MAX : s->scale * 2.0f;
  }
}

#ifdef __cplusplus
}
#endif

#endif
