/* GPU launchers of InfogainLoss (infogain_loss.cu), on ctx's stream.  Blobs
 * are (outer, L, inner) around the class axis; H is L x L, row = label. */
#ifndef CT_LAYERS_INFOGAIN_LOSS_H
#define CT_LAYERS_INFOGAIN_LOSS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Per position: loss = -sum_l H[label, l] log(max(prob_l, 1e-20)) with flag
 * 1; 0 and flag 0 for ignore_label; flag -1 for a label outside [0, L). */
void ct_infogain_forward_gpu(ct_context *ctx, size_t outer, int L, size_t inner, const float *prob,
                             const float *label, const float *h, bool has_ignore,
                             int ignore_label, float *loss, float *flag);
/* sums(L) = the row sums of H. */
void ct_infogain_sum_rows_gpu(ct_context *ctx, int L, const float *h, float *sums);
/* dx = (prob * sums[label] - H[label, l]) * loss_weight[0] * inv_norm[0], 0
 * at ignored positions; loss_weight and inv_norm are device memory. */
void ct_infogain_backward_gpu(ct_context *ctx, size_t outer, int L, size_t inner,
                              const float *prob, const float *label, const float *h,
                              const float *sums, bool has_ignore, int ignore_label,
                              const float *loss_weight, const float *inv_norm, float *dx);

#ifdef __cplusplus
}
#endif

#endif
