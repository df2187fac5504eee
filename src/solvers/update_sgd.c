/* SGD with momentum and Nesterov's accelerated gradient (Caffe's SGDSolver
 * and NesterovSolver). */
#include "solvers/update_internal.h"

void ct_update_sgd_cpu(size_t n, float *w, float *g, float *h, float *unused,
                       const ct_update_hparams *hp) {
  (void)unused;
  const float lr = hp->lr, mom = hp->momentum;
  for (size_t i = 0; i < n; i++) {
    float gi = ct_update_regularized_grad(w[i], g[i], hp);
    float hi = lr * gi + mom * h[i];
    h[i] = hi;
    g[i] = hi;
    w[i] -= hi;
  }
}

void ct_update_nesterov_cpu(size_t n, float *w, float *g, float *h, float *unused,
                            const ct_update_hparams *hp) {
  (void)unused;
  const float lr = hp->lr, mom = hp->momentum;
  for (size_t i = 0; i < n; i++) {
    float gi = ct_update_regularized_grad(w[i], g[i], hp);
    float h_prev = h[i];
    float hi = lr * gi + mom * h_prev;
    h[i] = hi;
    /* step back to where the momentum alone would have gone, then over-step */
    float u = (1.0f + mom) * hi + (-mom) * h_prev;
    g[i] = u;
    w[i] -= u;
  }
}
