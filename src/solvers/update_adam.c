/* Adam (Kingma and Ba 2014) as Caffe computes it: the bias correction is
 * folded into the learning rate, and eps is added to sqrt(v) uncorrected. */
#include "solvers/update_internal.h"

float ct_update_adam_correction(float beta1, float beta2, int iter) {
  double t = (double)iter + 1.0;
  return (float)(sqrt(1.0 - pow(beta2, t)) / (1.0 - pow(beta1, t)));
}

void ct_update_adam_cpu(size_t n, float *w, float *g, float *m, float *v,
                        const ct_update_hparams *hp) {
  CT_UPDATE_HOST_LOOP(ct_update_adam_value, n, w, g, m, v, hp);
}
