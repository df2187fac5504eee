/* GPU launchers of SigmoidCrossEntropyLoss (sigmoid_cross_entropy_loss.cu),
 * on ctx's stream, over n predictions x and targets t. */
#ifndef CT_LAYERS_SIGMOID_CROSS_ENTROPY_LOSS_H
#define CT_LAYERS_SIGMOID_CROSS_ENTROPY_LOSS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* sigmoid = sigmoid(x); loss = the stable cross-entropy with flag 1, or 0
 * with flag 0 where (int)t == ignore_label. */
void ct_sigmoid_ce_forward_gpu(ct_context *ctx, size_t n, const float *x, const float *t,
                               bool has_ignore, int ignore_label, float *sigmoid, float *loss,
                               float *flag);
/* dx = (sigmoid - t) * loss_weight[0] * inv_norm[0], 0 where ignored;
 * loss_weight (top 0's diff) and inv_norm (1 / the forward's normalizer)
 * are device memory. */
void ct_sigmoid_ce_backward_gpu(ct_context *ctx, size_t n, const float *sigmoid, const float *t,
                                bool has_ignore, int ignore_label, const float *loss_weight,
                                const float *inv_norm, float *dx);

#ifdef __cplusplus
}
#endif

#endif
