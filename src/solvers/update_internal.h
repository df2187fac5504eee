/* Private to the update rules: the steps every rule shares. */
#ifndef CT_SOLVERS_UPDATE_INTERNAL_H
#define CT_SOLVERS_UPDATE_INTERNAL_H

#include "solvers/update.h"

/* Caffe's Normalize and Regularize for one element: the gradient scaled by
 * grad_scale, plus decay * w (L2) or decay * sign(w) (L1) when decay != 0. */
static inline float ct_update_regularized_grad(float w, float g, const ct_update_hparams *hp) {
  g *= hp->grad_scale;
  if (hp->decay != 0.0f) {
    float r = hp->l1 ? (float)((0.0f < w) - (w < 0.0f)) : w;
    g += hp->decay * r;
  }
  return g;
}

#endif
