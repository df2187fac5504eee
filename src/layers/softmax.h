/* Softmax over one axis, shared by Softmax, SoftmaxWithLoss and InfogainLoss.
 * A blob is seen as (outer, channels, inner) around the softmax axis; the
 * softmax runs over channels at each of the outer*inner positions. */
#ifndef CT_LAYERS_SOFTMAX_H
#define CT_LAYERS_SOFTMAX_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(outer, channels, inner) = exp(x - max) / sum exp(x - max) over channels.
 * y may alias x.  scratch holds inner floats. */
void ct_softmax_cpu(size_t outer, int channels, size_t inner, const float *x, float *y,
                    float *scratch);

/* The same on ctx's stream; y may alias x. */
void ct_softmax_forward_gpu(ct_context *ctx, size_t outer, int channels, size_t inner,
                            const float *x, float *y);
/* dx = y * (dy - sum over channels of dy * y); dx may alias dy. */
void ct_softmax_backward_gpu(ct_context *ctx, size_t outer, int channels, size_t inner,
                             const float *y, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
