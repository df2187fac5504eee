/* Private to the update rules: the per-element math of every rule, shared by
 * the host loops (update_*.c) and the fused GPU kernel (update_gpu.cu), so
 * that both devices do the same float operations in the same order. */
#ifndef CT_SOLVERS_UPDATE_INTERNAL_H
#define CT_SOLVERS_UPDATE_INTERNAL_H

#include <math.h>

#include "solvers/update.h"

#ifdef __CUDACC__
#define CT_UPD_HD __host__ __device__
#else
#define CT_UPD_HD
#endif

/* Caffe's Normalize and Regularize for one element: the gradient scaled by
 * grad_scale, plus decay * w (L2) or decay * sign(w) (L1) when decay != 0. */
static inline CT_UPD_HD float ct_update_regularized_grad(float w, float g,
                                                         const ct_update_hparams *hp) {
  g *= hp->grad_scale;
  if (hp->decay != 0.0f) {
    float r = hp->l1 ? (float)((0.0f < w) - (w < 0.0f)) : w;
    g += hp->decay * r;
  }
  return g;
}

/* NVCaffe's LARC rate of one segment (ct_update_larc in update.h), the same
 * float operations on both devices. */
static inline CT_UPD_HD float ct_update_larc_rate_of(ct_update_larc mode, float eta, float rate,
                                                     float lr_mult, float w_norm, float g_norm) {
  if (isnan(g_norm)) g_norm = 0.0f;
  float ratio = 1.0f;
  if (w_norm > 0.0f && g_norm > 0.0f) ratio = eta * w_norm / g_norm;
  const float local = lr_mult > 0.0f ? ratio : lr_mult;
  if (mode == CT_UPDATE_LARC_SCALE) return rate * local;
  return rate < local ? rate : local;
}

/* Each rule: the update value u of one element from its regularized
 * gradient g and history h0, h1 (updated in place).  See update.h. */
static inline CT_UPD_HD float ct_update_sgd_value(float g, float *h, float *unused,
                                                  const ct_update_hparams *hp) {
  (void)unused;
  float hi = hp->lr * g + hp->momentum * *h;
  *h = hi;
  return hi;
}

static inline CT_UPD_HD float ct_update_nesterov_value(float g, float *h, float *unused,
                                                       const ct_update_hparams *hp) {
  (void)unused;
  const float mom = hp->momentum;
  float h_prev = *h;
  float hi = hp->lr * g + mom * h_prev;
  *h = hi;
  /* step back to where the momentum alone would have gone, then over-step */
  return (1.0f + mom) * hi + (-mom) * h_prev;
}

static inline CT_UPD_HD float ct_update_adagrad_value(float g, float *h, float *unused,
                                                      const ct_update_hparams *hp) {
  (void)unused;
  float hi = g * g + *h;
  *h = hi;
  return hp->lr * (g / (sqrtf(hi) + hp->delta));
}

static inline CT_UPD_HD float ct_update_rmsprop_value(float g, float *h, float *unused,
                                                      const ct_update_hparams *hp) {
  (void)unused;
  const float rho = hp->rms_decay, one_minus_rho = 1.0f - rho;
  float hi = one_minus_rho * (g * g) + rho * *h;
  *h = hi;
  return hp->lr * (g / (sqrtf(hi) + hp->delta));
}

static inline CT_UPD_HD float ct_update_adadelta_value(float g, float *h, float *hu,
                                                       const ct_update_hparams *hp) {
  const float rho = hp->momentum, one_minus_rho = 1.0f - rho, delta = hp->delta;
  float hi = one_minus_rho * (g * g) + rho * *h;
  *h = hi;
  float d = g * sqrtf((*hu + delta) / (hi + delta));
  *hu = one_minus_rho * (d * d) + rho * *hu;
  return hp->lr * d;
}

static inline CT_UPD_HD float ct_update_adam_value(float g, float *m, float *v,
                                                   const ct_update_hparams *hp) {
  const float b1 = hp->momentum, b2 = hp->momentum2;
  float mi = (1.0f - b1) * g + b1 * *m;
  float vi = (1.0f - b2) * (g * g) + b2 * *v;
  *m = mi;
  *v = vi;
  return hp->lr * (mi / (sqrtf(vi) + hp->delta));
}

/* The host loop every rule shares: regularize, take the value, store it in
 * the gradient and step the weight. */
#define CT_UPDATE_HOST_LOOP(value_fn, n, w, g, h0, h1, hp)                          \
  do {                                                                            \
    for (size_t i_ = 0; i_ < (n); i_++) {                                         \
      float gi_ = ct_update_regularized_grad((w)[i_], (g)[i_], (hp));             \
      float u_ = value_fn(gi_, &(h0)[i_], (h1) ? &(h1)[i_] : NULL, (hp));         \
      (g)[i_] = u_;                                                               \
      (w)[i_] -= u_;                                                              \
    }                                                                             \
  } while (0)

#endif
