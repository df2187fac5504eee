/* GPU launchers of the Swish layer (swish.cu), on ctx's stream. */
#ifndef CT_LAYERS_SWISH_H
#define CT_LAYERS_SWISH_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* sig(n) = sigmoid(beta x), y(n) = x * sig; y may alias x. */
void ct_swish_forward_gpu(ct_context *ctx, size_t n, float beta, const float *x, float *sig,
                          float *y);
/* dx(n) = dy * (beta y + sig (1 - beta y)); dx may alias dy. */
void ct_swish_backward_gpu(ct_context *ctx, size_t n, float beta, const float *y, const float *sig,
                           const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
