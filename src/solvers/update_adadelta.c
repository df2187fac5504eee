/* AdaDelta (Zeiler 2012) as Caffe computes it: the step is the gradient
 * times the ratio of the RMS of past steps to the RMS of past gradients,
 * then times the learning rate (Caffe keeps base_lr as a global scale). */
#include "solvers/update_internal.h"

void ct_update_adadelta_cpu(size_t n, float *w, float *g, float *h, float *hu,
                            const ct_update_hparams *hp) {
  CT_UPDATE_HOST_LOOP(ct_update_adadelta_value, n, w, g, h, hu, hp);
}
