/* GPU launchers of the Exp layer (exp.cu), on ctx's stream. */
#ifndef CT_LAYERS_EXP_H
#define CT_LAYERS_EXP_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = outer * exp(inner * x); y may alias x. */
void ct_exp_forward_gpu(ct_context *ctx, size_t n, float inner, float outer, const float *x,
                        float *y);
/* dx(n) = inner * y * dy; dx may alias dy. */
void ct_exp_backward_gpu(ct_context *ctx, size_t n, float inner, const float *y, const float *dy,
                         float *dx);

#ifdef __cplusplus
}
#endif

#endif
