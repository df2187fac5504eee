/* GPU launchers of the Power layer (power.cu), on ctx's stream. */
#ifndef CT_LAYERS_POWER_H
#define CT_LAYERS_POWER_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = (shift + scale x)^power (constant when power * scale == 0); y may
 * alias x. */
void ct_power_forward_gpu(ct_context *ctx, size_t n, float power, float scale, float shift,
                          const float *x, float *y);
/* dx(n) = dy * dy/dx in Caffe's case split (see power.c); x is the forward input
 * and y its output; dx may alias dy. */
void ct_power_backward_gpu(ct_context *ctx, size_t n, float power, float scale, float shift,
                           const float *x, const float *y, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
