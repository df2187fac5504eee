/* GPU launchers of the Filter layer (filter.cu), on ctx's stream. */
#ifndef CT_LAYERS_FILTER_H
#define CT_LAYERS_FILTER_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(nkeep, dim) = x[keep[j]] row by row; keep is a device array. */
void ct_filter_forward_gpu(ct_context *ctx, int nkeep, size_t dim, const int *keep, const float *x,
                           float *y);
/* dx[keep[j]] = dy[j] row by row (other rows of dx are left alone). */
void ct_filter_backward_gpu(ct_context *ctx, int nkeep, size_t dim, const int *keep,
                            const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
