/* SGD with momentum and Nesterov's accelerated gradient (Caffe's SGDSolver
 * and NesterovSolver); the element math is in update_internal.h. */
#include "solvers/update_internal.h"

void ct_update_sgd_cpu(size_t n, float *w, float *g, float *h, float *unused,
                       const ct_update_hparams *hp) {
  (void)unused;
  float *none = NULL;
  CT_UPDATE_HOST_LOOP(ct_update_sgd_value, n, w, g, h, none, hp);
}

void ct_update_nesterov_cpu(size_t n, float *w, float *g, float *h, float *unused,
                            const ct_update_hparams *hp) {
  (void)unused;
  float *none = NULL;
  CT_UPDATE_HOST_LOOP(ct_update_nesterov_value, n, w, g, h, none, hp);
}
