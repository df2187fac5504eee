/* Update rules: the per-element math of Caffe's six solvers (SGD, Nesterov,
 * AdaGrad, RMSProp, AdaDelta, Adam) on one segment of the net's flat
 * parameter buffers.
 *
 * One call does, for each element i of a segment, Caffe's
 * Normalize + Regularize + ComputeUpdateValue + Net::Update in that order:
 *
 *   g = g * grad_scale                  (gradient clipping factor / iter_size)
 *   g = g + decay * w     (L2)  or  g = g + decay * sign(w)  (L1), when decay != 0
 *   u = rule(g, history...)             (the value Caffe leaves in the diff)
 *   g = u;  w = w - u
 *
 * so after the call the gradient buffer holds the update value, as Caffe's
 * diff does after ApplyUpdate (a snapshot with snapshot_diff writes it).
 *
 * History arrays (h0, h1) have the segment's layout; rules with one history
 * slot ignore h1 (pass NULL).  Every function here is pure elementwise math
 * (update_internal.h), and on a GPU one fused kernel does a whole step over
 * the net's flat buffers (ct_update_fused_gpu): every parameter's lr_mult and
 * decay_mult come from a segment table in device memory, the global rate and
 * Adam's correction from a small device struct, and clip_gradients' scale
 * from a device reduction, so that a step needs no host wait and can be
 * captured into a CUDA graph; on the CPU ct_update_fused_run does the same
 * step through the host functions. */
#ifndef CT_SOLVERS_UPDATE_H
#define CT_SOLVERS_UPDATE_H

#include <stdbool.h>
#include <stddef.h>

#include "caffe.pb-c.h"
#include "core/context.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The scalars of one segment's update. */
typedef struct ct_update_hparams {
  float grad_scale; /* multiplies the raw gradient first: clip factor / iter_size */
  float decay;      /* weight_decay * decay_mult; 0 skips regularization */
  bool l1;          /* regularization_type "L1" (else "L2") */
  float lr;         /* rate * lr_mult; Adam: also times its bias correction */
  float momentum;   /* SGD/Nesterov momentum, AdaDelta decay, Adam beta1 */
  float momentum2;  /* Adam beta2 */
  float rms_decay;  /* RMSProp */
  float delta;      /* AdaGrad, RMSProp, AdaDelta, Adam epsilon */
} ct_update_hparams;

/* A host update over n elements: w (n) weights, g (n) gradient in / update
 * out, h0 and h1 (n) history slots. */
typedef void (*ct_update_cpu_fn)(size_t n, float *w, float *g, float *h0, float *h1,
                                 const ct_update_hparams *hp);

/* The rules, as the fused GPU kernel names them. */
typedef enum ct_update_kind {
  CT_UPDATE_SGD = 0,
  CT_UPDATE_NESTEROV,
  CT_UPDATE_ADAGRAD,
  CT_UPDATE_RMSPROP,
  CT_UPDATE_ADADELTA,
  CT_UPDATE_ADAM
} ct_update_kind;

/* Caffe's SGD: h = lr*g + momentum*h; u = h. */
void ct_update_sgd_cpu(size_t n, float *w, float *g, float *h, float *unused,
                       const ct_update_hparams *hp);
/* Nesterov: h' = lr*g + momentum*h; u = (1+momentum)*h' - momentum*h. */
void ct_update_nesterov_cpu(size_t n, float *w, float *g, float *h, float *unused,
                            const ct_update_hparams *hp);
/* AdaGrad: h += g^2; u = lr * g / (sqrt(h) + delta). */
void ct_update_adagrad_cpu(size_t n, float *w, float *g, float *h, float *unused,
                           const ct_update_hparams *hp);
/* RMSProp: h = (1-rms_decay)*g^2 + rms_decay*h; u = lr * g / (sqrt(h) + delta). */
void ct_update_rmsprop_cpu(size_t n, float *w, float *g, float *h, float *unused,
                           const ct_update_hparams *hp);
/* AdaDelta (momentum is the decay rho): h = (1-rho)*g^2 + rho*h;
 * d = g * sqrt((hu + delta) / (h + delta)); hu = (1-rho)*d^2 + rho*hu; u = lr*d. */
void ct_update_adadelta_cpu(size_t n, float *w, float *g, float *h, float *hu,
                            const ct_update_hparams *hp);
/* Adam (momentum = beta1, momentum2 = beta2, delta = eps; hp->lr already
 * carries Caffe's correction sqrt(1-beta2^t)/(1-beta1^t)):
 * m = (1-beta1)*g + beta1*m; v = (1-beta2)*g^2 + beta2*v; u = lr * m / (sqrt(v) + eps). */
void ct_update_adam_cpu(size_t n, float *w, float *g, float *m, float *v,
                        const ct_update_hparams *hp);

/* Adam's bias correction at iteration iter (0-based; Caffe's t = iter + 1). */
float ct_update_adam_correction(float beta1, float beta2, int iter);

/* One solver type. */
typedef struct ct_update_rule {
  const char *type;     /* SolverParameter.type, e.g. "Adam" */
  int nslots;           /* history arrays per parameter (1 or 2) */
  ct_update_cpu_fn cpu;
  ct_update_kind kind;  /* the fused GPU kernel's rule */
  /* Validates the SolverParameter fields this rule reads (Caffe's checks);
   * NULL when there is nothing to check. */
  ct_status (*check)(const Caffe__SolverParameter *p, ct_error *err);
} ct_update_rule;

/* The rule of a type name ("SGD", "Nesterov", "AdaGrad", "RMSProp",
 * "AdaDelta", "Adam").  CT_ERR_NOTFOUND for others:
 * "unknown solver type 'Adma' (known types: SGD, Nesterov, AdaGrad, RMSProp,
 *  AdaDelta, Adam; did you mean 'Adam'?)". */
ct_status ct_update_rule_lookup(const char *type, const ct_update_rule **out, ct_error *err);

/* The type name of the legacy SolverParameter.solver_type enum value. */
const char *ct_update_legacy_type_name(int solver_type);

/* ---------------------------------------------------------------- fused GPU */

/* What changes from step to step, read by the fused kernel from device
 * memory (the solver copies it there from pinned host memory at the start
 * of each update, a copy a CUDA graph replays). */
typedef struct ct_update_step {
  float rate;        /* the global learning rate of this step */
  float correction;  /* Adam's bias correction (1 for the other rules) */
  float momentum;    /* SGD/Nesterov momentum, AdaDelta rho, Adam beta1 (NVCaffe's
                        momentum_policy schedules SGD's) */
  float weight_decay; /* the global weight decay (NVCaffe's weight_decay_policy schedules it) */
} ct_update_step;

/* NVCaffe's LARC (layer-wise adaptive rate control, SGD only): each
 * parameter blob's rate from eta ||w|| / ||g||, with ||g|| the norm of its
 * gradient after clipping and 1/iter_size, before weight decay.  With
 * ratio = eta ||w|| / ||g|| (1 when either norm is 0, and a NaN ||g|| counts
 * as 0), local = ratio where lr_mult > 0 (else lr_mult itself), and the
 * blob's rate is rate * local (scale) or min(rate, local) (clip). */
typedef enum ct_update_larc {
  CT_UPDATE_LARC_NONE = 0,
  CT_UPDATE_LARC_SCALE,
  CT_UPDATE_LARC_CLIP
} ct_update_larc;

/* Elements per tile of the GPU's LARC norms: every segment is cut into
 * tiles, each reduced by one block. */
#define CT_UPDATE_LARC_TILE 16384

/* What the clip reduction leaves in device memory for the kernel (and for
 * the solver's log line). */
typedef struct ct_update_clip {
  float scale;       /* clip_gradients / L2 norm when the norm is larger, else 1 */
  float l2;          /* the L2 norm of the raw gradient */
} ct_update_clip;

/* Device scratch of the clip reduction. */
#define CT_UPDATE_CLIP_BLOCKS 256

/* The fixed part of a fused step: the rule, the flat layout and the solver
 * fields.  Device arrays are owned by whoever fills them (the solver). */
typedef struct ct_update_fused {
  ct_update_kind kind;
  size_t count;              /* values in the flat buffers (padding included) */
  int nseg;                  /* parameters */
  const size_t *seg_start;   /* (nseg + 1) device: start of each segment, then count */
  const float *seg_lr_mult;  /* (nseg) device */
  const float *seg_decay_mult; /* (nseg) device */
  const size_t *seg_count;   /* (nseg) the CPU: values of each segment (its padding is skipped) */
  bool l1;                   /* regularization_type "L1" */
  int iter_size;             /* gradients are sums over iter_size passes */
  float clip;                /* clip_gradients; < 0: no clipping */
  /* The CPU only: the clip computed elsewhere, over a gradient of which g
   * is a part (pipeline stages: every stage's), used instead of g's own
   * norm; NULL: g's. */
  const struct ct_update_clip *clip_given;
  float momentum2, rms_decay, delta;
  /* LARC (CT_UPDATE_LARC_NONE: off).  On a GPU: ntiles tiles of at most
   * CT_UPDATE_LARC_TILE values, tile t starting at tile_start[t] (device)
   * inside segment tile_seg[t] (device) and ending there or at the
   * segment's end; seg_tiles (nseg + 1, device) the first tile of each
   * segment, then ntiles; tile_sumsq (2 ntiles doubles) and seg_norm
   * (2 nseg floats: ||w||, raw ||g||) device scratch. */
  ct_update_larc larc;
  float larc_eta;
  int ntiles;
  const size_t *tile_start;
  const int *tile_seg, *seg_tiles;
  double *tile_sumsq;
  float *seg_norm;
  /* Guard: when not NULL, the kernel changes nothing if *check_word != 0
   * (a deferred check failed) or, when loss is not NULL, *loss is not finite.
   * halt (device, may be NULL): set to 1 when the loss was not finite, and
   * while it is not 0 the kernel changes nothing either, so that an
   * iteration launched behind a failed one leaves the weights alone too. */
  const unsigned *check_word;
  const double *loss;
  unsigned *halt;
  /* skip (device, may be NULL): while it is not 0 this step changes
   * nothing (loss scaling's overflow flag: this iteration only). */
  const unsigned *skip;
} ct_update_fused;

/* The rate of one segment under LARC (see ct_update_larc): rate the global
 * rate, lr_mult the segment's, w_norm and g_norm the norms of its weights
 * and of its gradient as the update scales it. */
float ct_update_larc_rate(ct_update_larc mode, float eta, float rate, float lr_mult, float w_norm,
                          float g_norm);

/* Enqueues one step on ctx's stream, for every segment s and element i of
 * it: hparams = {lr = step->rate * lr_mult[s] * step->correction (under
 * LARC ct_update_larc_rate's, from the segment's norms, reduced first),
 * decay = step->weight_decay * decay_mult[s], momentum = step->momentum,
 * grad_scale = clip scale (times 1/iter_size when iter_size > 1)}, then the
 * rule's element math of
 * update_internal.h, exactly as the host loop does.  Values between
 * segments (alignment padding) are zero and stay zero.  When u->clip >= 0,
 * first reduces the squared gradient into *clip (device) using partials
 * (CT_UPDATE_CLIP_BLOCKS doubles of device scratch) and counter (one
 * device unsigned, zero, left zero).  step, clip, partials, counter are
 * device pointers; nothing waits for the host. */
void ct_update_fused_gpu(ct_context *ctx, const ct_update_fused *u, float *w, float *g, float *h0,
                         float *h1, const ct_update_step *step, ct_update_clip *clip,
                         double *partials, unsigned *counter);
/* One step on ctx's device: ct_update_fused_gpu on a GPU; on the CPU the
 * same guards and the same math as Caffe's ApplyUpdate, segment by
 * segment in order (the clip norm from each segment's sum of squares in
 * double, the rule's host function on seg_count[s] values), with every
 * pointer in host memory (partials and counter unused).  On the CPU the
 * clip result is written to *clip whenever u->clip >= 0. */
void ct_update_fused_run(ct_context *ctx, const ct_update_fused *u, float *w, float *g, float *h0,
                         float *h1, const ct_update_step *step, ct_update_clip *clip,
                         double *partials, unsigned *counter);

#ifdef __cplusplus
}
#endif

#endif
