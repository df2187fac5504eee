/* GPU launchers of the AbsVal layer (absval.cu), on ctx's stream. */
#ifndef CT_LAYERS_ABSVAL_H
#define CT_LAYERS_ABSVAL_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = |x|. */
void ct_absval_forward_gpu(ct_context *ctx, size_t n, const float *x, float *y);
/* dx(n) = sign(x) * dy (0 at x == 0). */
void ct_absval_backward_gpu(ct_context *ctx, size_t n, const float *x, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
