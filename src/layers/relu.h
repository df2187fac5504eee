/* GPU launchers of the ReLU layer (relu.cu), on ctx's stream. */
#ifndef CT_LAYERS_RELU_H
#define CT_LAYERS_RELU_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = x > 0 ? x : slope * x; y may alias x. */
void ct_relu_forward_gpu(ct_context *ctx, size_t n, float slope, const float *x, float *y);
/* dx(n) = dy * (x > 0 ? 1 : slope); dx may alias dy. */
void ct_relu_backward_gpu(ct_context *ctx, size_t n, float slope, const float *x, const float *dy,
                          float *dx);
/* The same over 16-bit values of type t (CT_BF16 or CT_F16). */
void ct_relu_forward_gpu_typed(ct_context *ctx, ct_dtype t, size_t n, float slope, const void *x,
                               void *y);
void ct_relu_backward_gpu_typed(ct_context *ctx, ct_dtype t, size_t n, float slope, const void *x,
                                const void *dy, void *dx);

#ifdef __cplusplus
}
#endif

#endif
