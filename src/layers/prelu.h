/* GPU launchers of the PReLU layer (prelu.cu), on ctx's stream.
 * x, y, dy, dx are (N, channels, dim); slope is (channels), or (1) when
 * shared. */
#ifndef CT_LAYERS_PRELU_H
#define CT_LAYERS_PRELU_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = x > 0 ? x : slope[c] * x; y may alias x. */
void ct_prelu_forward_gpu(ct_context *ctx, size_t n, int channels, int dim, bool shared,
                          const float *slope, const float *x, float *y);
/* dslope[c] += sum over x <= 0 in channel c (all channels when shared) of dy * x. */
void ct_prelu_backward_slope_gpu(ct_context *ctx, size_t n, int channels, int dim, bool shared,
                                 const float *x, const float *dy, float *dslope);
/* dx = x > 0 ? dy : slope[c] * dy; dx may alias dy. */
void ct_prelu_backward_gpu(ct_context *ctx, size_t n, int channels, int dim, bool shared,
                           const float *slope, const float *x, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
