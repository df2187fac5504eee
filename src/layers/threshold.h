/* GPU launchers of the Threshold layer (threshold.cu), on ctx's stream. */
#ifndef CT_LAYERS_THRESHOLD_H
#define CT_LAYERS_THRESHOLD_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = x > threshold ? 1 : 0; y may alias x. */
void ct_threshold_forward_gpu(ct_context *ctx, size_t n, float threshold, const float *x, float *y);

#ifdef __cplusplus
}
#endif

#endif
