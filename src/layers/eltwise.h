/* GPU launchers of the Eltwise layer (eltwise.cu), on ctx's stream.  The
 * argmax array holds bottom indices as floats. */
#ifndef CT_LAYERS_ELTWISE_H
#define CT_LAYERS_ELTWISE_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = a * x, without reading y. */
void ct_eltwise_scale_gpu(ct_context *ctx, size_t n, float a, const float *x, float *y);
/* MAX of the first two bottoms: y = max(a, b), argmax 0 where a > b, else 1. */
void ct_eltwise_max_first_gpu(ct_context *ctx, size_t n, const float *a, const float *b, float *y,
                              float *argmax);
/* Folds bottom i in: where x > y, y = x and argmax = i. */
void ct_eltwise_max_next_gpu(ct_context *ctx, size_t n, const float *x, int i, float *y,
                             float *argmax);
/* dx(n) = argmax == i ? dy : 0. */
void ct_eltwise_max_backward_gpu(ct_context *ctx, size_t n, int i, const float *argmax,
                                 const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
