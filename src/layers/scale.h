/* GPU launchers of the Scale layer (scale.cu), on ctx's stream; geometry as
 * in bias.h. */
#ifndef CT_LAYERS_SCALE_H
#define CT_LAYERS_SCALE_H

#include <stdbool.h>

#include "core/context.h"
#include "layers/bias.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[o, d, i] = x[o, d, i] * s[d]; y may alias x.  Also the bottom gradient
 * (x = dy, y = dx). */
void ct_scale_forward_gpu(ct_context *ctx, const ct_broadcast_dims *g, const float *x,
                          const float *s, float *y);
/* ds(dim) = (accumulate ? ds : 0) + sum over outer and inner of dy * x. */
void ct_scale_backward_operand_gpu(ct_context *ctx, const ct_broadcast_dims *g, const float *dy,
                                   const float *x, bool accumulate, float *ds);

#ifdef __cplusplus
}
#endif

#endif
