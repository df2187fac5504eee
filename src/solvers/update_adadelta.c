/* AdaDelta (Zeiler 2012) as Caffe computes it: the step is the gradient
 * times the ratio of the RMS of past steps to the RMS of past gradients,
 * then times the learning rate (Caffe keeps base_lr as a global scale). */
#include <math.h>

#include "solvers/update_internal.h"

void ct_update_adadelta_cpu(size_t n, float *w, float *g, float *h, float *hu,
                            const ct_update_hparams *hp) {
  const float lr = hp->lr, delta = hp->delta, rho = hp->momentum;
  const float one_minus_rho = 1.0f - rho;
  for (size_t i = 0; i < n; i++) {
    float gi = ct_update_regularized_grad(w[i], g[i], hp);
    float hi = one_minus_rho * (gi * gi) + rho * h[i];
    h[i] = hi;
    float d = gi * sqrtf((hu[i] + delta) / (hi + delta));
    hu[i] = one_minus_rho * (d * d) + rho * hu[i];
    float u = lr * d;
    g[i] = u;
    w[i] -= u;
  }
}
