/* Adam (Kingma and Ba 2014) as Caffe computes it: the bias correction is
 * folded into the learning rate, and eps is added to sqrt(v) uncorrected. */
#include <math.h>

#include "solvers/update_internal.h"

float ct_update_adam_correction(float beta1, float beta2, int iter) {
  double t = (double)iter + 1.0;
  return (float)(sqrt(1.0 - pow(beta2, t)) / (1.0 - pow(beta1, t)));
}

void ct_update_adam_cpu(size_t n, float *w, float *g, float *m, float *v,
                        const ct_update_hparams *hp) {
  const float lr = hp->lr, eps = hp->delta, b1 = hp->momentum, b2 = hp->momentum2;
  const float one_minus_b1 = 1.0f - b1, one_minus_b2 = 1.0f - b2;
  for (size_t i = 0; i < n; i++) {
    float gi = ct_update_regularized_grad(w[i], g[i], hp);
    float mi = one_minus_b1 * gi + b1 * m[i];
    float vi = one_minus_b2 * (gi * gi) + b2 * v[i];
    m[i] = mi;
    v[i] = vi;
    float u = lr * (mi / (sqrtf(vi) + eps));
    g[i] = u;
    w[i] -= u;
  }
}
