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
 * slot ignore h1 (pass NULL).  Every function here is pure elementwise math,
 * so a GPU version is one fused kernel with the same signature plus a
 * context (see ct_update_rule.gpu). */
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
/* The same on ctx's GPU stream (asynchronous). */
typedef void (*ct_update_gpu_fn)(ct_context *ctx, size_t n, float *w, float *g, float *h0,
                                 float *h1, const ct_update_hparams *hp);

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
  ct_update_gpu_fn gpu; /* NULL until the fused kernel exists */
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

#ifdef __cplusplus
}
#endif

#endif
