/* GPU launchers of the ELU layer (elu.cu), on ctx's stream. */
#ifndef CT_LAYERS_ELU_H
#define CT_LAYERS_ELU_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = x > 0 ? x : alpha * (exp(x) - 1); y may alias x. */
void ct_elu_forward_gpu(ct_context *ctx, size_t n, float alpha, const float *x, float *y);
/* dx(n) = x > 0 ? dy : dy * (y + alpha); dx may alias dy. */
void ct_elu_backward_gpu(ct_context *ctx, size_t n, float alpha, const float *x, const float *y,
                         const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
