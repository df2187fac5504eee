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
/* The most values (outer * C * inner) that the one-kernel forward takes by
 * default: a single block does everything, which beats three launches up to
 * about this size. */
#define CT_SOFTMAX_LOSS_FUSED_MAX ((size_t)65536)

/* True when ct_softmax_loss_fused_forward_gpu takes this shape: at least one
 * position and at most the limit's values (ct_softmax_loss_set_fused_max). */
bool ct_softmax_loss_fused_fits(size_t outer, int C, size_t inner);
/* Hidden knob for tests: the limit above (0: the one-kernel forward is never
 * taken; CT_SOFTMAX_LOSS_FUSED_MAX restores the default).  Process-wide. */
void ct_softmax_loss_set_fused_max(size_t values);

/* The whole forward in one kernel (one block), for a shape that
 * ct_softmax_loss_fused_fits: prob = softmax of x over C at every position
 * (also into prob_top when not NULL: the layer's second top), the loss
 * -log(max(prob[label], FLT_MIN)) of each position whose label is a class,
 * summed in double in a fixed order (the same bits on every run), and
 *   loss_top[0] = (float)(sum / normalizer),  inv_norm[0] = (float)(1 / normalizer)
 * with normalizer = ct_loss_normalizer_value(norm, outer, inner, valid
 * positions).  Labels equal to ignore_label (when has_ignore) count for
 * nothing; a label that is neither that nor a class counts for nothing and
 * raises deferred check check_id (0: none) in ctx->check_word. */
void ct_softmax_loss_fused_forward_gpu(ct_context *ctx, size_t outer, int C, size_t inner,
                                       const float *x, const float *label, bool has_ignore,
                                       int ignore_label, int norm, float *prob, float *prob_top,
                                       float *loss_top, float *inv_norm, unsigned check_id);
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
