/* GPU launchers of the BNLL layer (bnll.cu), on ctx's stream. */
#ifndef CT_LAYERS_BNLL_H
#define CT_LAYERS_BNLL_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = log(1 + exp(x)) in the overflow-free form; y may alias x. */
void ct_bnll_forward_gpu(ct_context *ctx, size_t n, const float *x, float *y);
/* dx(n) = dy * sigmoid(x), exp argument capped at 50; dx may alias dy. */
void ct_bnll_backward_gpu(ct_context *ctx, size_t n, const float *x, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
