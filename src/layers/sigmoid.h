/* GPU launchers of the Sigmoid layer (sigmoid.cu), on ctx's stream. */
#ifndef CT_LAYERS_SIGMOID_H
#define CT_LAYERS_SIGMOID_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = 1 / (1 + exp(-x)); y may alias x. */
void ct_sigmoid_forward_gpu(ct_context *ctx, size_t n, const float *x, float *y);
/* dx(n) = dy * y * (1 - y); dx may alias dy. */
void ct_sigmoid_backward_gpu(ct_context *ctx, size_t n, const float *y, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
