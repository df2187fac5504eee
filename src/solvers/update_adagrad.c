/* AdaGrad and RMSProp: per-element steps scaled by the root of a running
 * sum (AdaGrad) or running mean (RMSProp) of squared gradients. */
#include <math.h>

#include "solvers/update_internal.h"

void ct_update_adagrad_cpu(size_t n, float *w, float *g, float *h, float *unused,
                           const ct_update_hparams *hp) {
  (void)unused;
  const float lr = hp->lr, delta = hp->delta;
  for (size_t i = 0; i < n; i++) {
    float gi = ct_update_regularized_grad(w[i], g[i], hp);
    float hi = gi * gi + h[i];
    h[i] = hi;
    float u = lr * (gi / (sqrtf(hi) + delta));
    g[i] = u;
    w[i] -= u;
  }
}

void ct_update_rmsprop_cpu(size_t n, float *w, float *g, float *h, float *unused,
                           const ct_update_hparams *hp) {
  (void)unused;
  const float lr = hp->lr, delta = hp->delta, rho = hp->rms_decay;
  const float one_minus_rho = 1.0f - rho;
  for (size_t i = 0; i < n; i++) {
    float gi = ct_update_regularized_grad(w[i], g[i], hp);
    float hi = one_minus_rho * (gi * gi) + rho * h[i];
    h[i] = hi;
    float u = lr * (gi / (sqrtf(hi) + delta));
    g[i] = u;
    w[i] -= u;
  }
}
