/* GPU launchers of MultinomialLogisticLoss (multinomial_logistic_loss.cu),
 * on ctx's stream, for num items of dim probabilities. */
#ifndef CT_LAYERS_MULTINOMIAL_LOGISTIC_LOSS_H
#define CT_LAYERS_MULTINOMIAL_LOGISTIC_LOSS_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per item: loss = -log(max(prob[label], 1e-20)) and flag 1, or flag -1 for
 * a label outside [0, dim). */
void ct_multinomial_forward_gpu(ct_context *ctx, int num, size_t dim, const float *prob,
                                const float *label, float *loss, float *flag);
/* dx(num, dim) = -loss_weight[0] * inv_num / max(prob, 1e-20) at the label,
 * 0 elsewhere; loss_weight is device memory. */
void ct_multinomial_backward_gpu(ct_context *ctx, int num, size_t dim, const float *prob,
                                 const float *label, const float *loss_weight, float inv_num,
                                 float *dx);

#ifdef __cplusplus
}
#endif

#endif
