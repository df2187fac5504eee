/* GPU launchers of HingeLoss (hinge_loss.cu), on ctx's stream, for num
 * items of dim scores and one label per item. */
#ifndef CT_LAYERS_HINGE_LOSS_H
#define CT_LAYERS_HINGE_LOSS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* margin(num, dim) = max(0, 1 -+ x); per item, loss = the sum of margin (l1)
 * or of its squares, and flag 1, or flag -1 for a label outside [0, dim). */
void ct_hinge_forward_gpu(ct_context *ctx, int num, size_t dim, const float *x, const float *label,
                          bool l1, float *margin, float *loss, float *flag);
/* dx = the gradient scaled by loss_weight[0] (device memory) / num. */
void ct_hinge_backward_gpu(ct_context *ctx, int num, size_t dim, const float *margin,
                           const float *label, bool l1, const float *loss_weight, float inv_num,
                           float *dx);

#ifdef __cplusplus
}
#endif

#endif
