/* AdaGrad and RMSProp: per-element steps scaled by the root of a running
 * sum (AdaGrad) or running mean (RMSProp) of squared gradients. */
#include "solvers/update_internal.h"

void ct_update_adagrad_cpu(size_t n, float *w, float *g, float *h, float *unused,
                           const ct_update_hparams *hp) {
  (void)unused;
  float *none = NULL;
  CT_UPDATE_HOST_LOOP(ct_update_adagrad_value, n, w, g, h, none, hp);
}

void ct_update_rmsprop_cpu(size_t n, float *w, float *g, float *h, float *unused,
                           const ct_update_hparams *hp) {
  (void)unused;
  float *none = NULL;
  CT_UPDATE_HOST_LOOP(ct_update_rmsprop_value, n, w, g, h, none, hp);
}
