/* GPU launchers of the Clip layer (clip.cu), on ctx's stream. */
#ifndef CT_LAYERS_CLIP_H
#define CT_LAYERS_CLIP_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y(n) = max(lo, min(x, hi)); y may alias x. */
void ct_clip_forward_gpu(ct_context *ctx, size_t n, float lo, float hi, const float *x, float *y);
/* dx(n) = lo <= x <= hi ? dy : 0; dx may alias dy. */
void ct_clip_backward_gpu(ct_context *ctx, size_t n, float lo, float hi, const float *x,
                          const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
