/* GPU launchers of the TanH layer (tanh.cu), on ctx's stream. */
#ifndef CT_LAYERS_TANH_H
#define CT_LAYERS_TANH_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = tanh(x); y may alias x. */
void ct_tanh_forward_gpu(ct_context *ctx, size_t n, const float *x, float *y);
/* dx(n) = dy * (1 - y^2); dx may alias dy. */
void ct_tanh_backward_gpu(ct_context *ctx, size_t n, const float *y, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
