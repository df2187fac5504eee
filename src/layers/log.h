/* GPU launchers of the Log layer (log.cu), on ctx's stream. */
#ifndef CT_LAYERS_LOG_H
#define CT_LAYERS_LOG_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = base_scale * ln(shift + scale x); y may alias x. */
void ct_log_forward_gpu(ct_context *ctx, size_t n, float scale, float shift, float base_scale,
                        const float *x, float *y);
/* dx(n) = dy * num_scale / (shift + scale x); dx may alias dy. */
void ct_log_backward_gpu(ct_context *ctx, size_t n, float scale, float shift, float num_scale,
                         const float *x, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
