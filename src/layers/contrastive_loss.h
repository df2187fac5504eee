/* GPU launchers of ContrastiveLoss (contrastive_loss.cu), on ctx's stream,
 * for num pairs of channels features; diff (num, channels) holds a - b. */
#ifndef CT_LAYERS_CONTRASTIVE_LOSS_H
#define CT_LAYERS_CONTRASTIVE_LOSS_H

#include <stdbool.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dist_sq(num) = ||diff_n||^2 and loss(num) = each pair's term (before the
 * division by 2N). */
void ct_contrastive_forward_gpu(ct_context *ctx, int num, int channels, const float *diff,
                                const float *similar, float margin, bool legacy, float *dist_sq,
                                float *loss);
/* dx(num, channels) = the gradient of the loss for bottom a (sign 1) or b
 * (sign -1), scaled by loss_weight[0] (device memory) * sign / num. */
void ct_contrastive_backward_gpu(ct_context *ctx, int num, int channels, const float *diff,
                                 const float *dist_sq, const float *similar, float margin,
                                 bool legacy, const float *loss_weight, float sign_over_num,
                                 float *dx);

#ifdef __cplusplus
}
#endif

#endif
