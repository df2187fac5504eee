/* GPU launchers of SoftmaxWithLoss (softmax_loss.cu), on ctx's stream.
 * Blobs are (outer, C, inner) around the class axis; labels (outer, inner). */
#ifndef CT_LAYERS_SOFTMAX_LOSS_H
#define CT_LAYERS_SOFTMAX_LOSS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per position: loss = -log(max(prob[label], FLT_MIN)) with flag 1; 0 and
 * flag 0 for ignore_label; 0 and flag -1 for a label outside [0, C). */
void ct_softmax_loss_forward_gpu(ct_context *ctx, size_t outer, int C, size_t inner,
                                 const float *prob, const float *label, bool has_ignore,
                                 int ignore_label, float *loss, float *flag);
/* dx = (prob - onehot(label)) * loss_weight[0] * inv_norm[0], 0 at ignored
 * positions; loss_weight (top 0's diff) and inv_norm (the forward's
 * 1 / normalizer) are device memory. */
void ct_softmax_loss_backward_gpu(ct_context *ctx, size_t outer, int C, size_t inner,
                                  const float *prob, const float *label, bool has_ignore,
                                  int ignore_label, const float *loss_weight,
                                  const float *inv_norm, float *dx);

#ifdef __cplusplus
}
#endif

#endif
