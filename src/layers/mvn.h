/* GPU launchers of the MVN layer (mvn.cu), on ctx's stream.  x, y, dy, dx
 * are (groups, dim); std is (groups). */
#ifndef CT_LAYERS_MVN_H
#define CT_LAYERS_MVN_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = x - mean, divided by std = sqrt(var) + eps (stored) when
 * normalize_variance; y may alias x. */
void ct_mvn_forward_gpu(ct_context *ctx, size_t groups, size_t dim, bool normalize_variance,
                        float eps, const float *x, float *y, float *std);
/* dx = (dy - mean(dy) - y mean(dy y)) / std, or dy - mean(dy); dx may alias dy. */
void ct_mvn_backward_gpu(ct_context *ctx, size_t groups, size_t dim, bool normalize_variance,
                         const float *y, const float *std, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
