/* Crop's geometry and its GPU launchers (crop.cu), on ctx's stream. */
#ifndef CT_LAYERS_CROP_H
#define CT_LAYERS_CROP_H

#include <stddef.h>

#include "core/context.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_crop_geometry {
  int ndim;
  int offset[CT_MAX_AXES];             /* window start in bottom 0, per axis */
  int top_shape[CT_MAX_AXES];          /* (ndim) */
  long long bottom_stride[CT_MAX_AXES]; /* (ndim) values between neighbours on each axis */
} ct_crop_geometry;

/* top(count) = the window of bottom that g describes. */
void ct_crop_forward_gpu(ct_context *ctx, const ct_crop_geometry *g, size_t count,
                         const float *bottom, float *top);
/* Writes dtop(count) into the window of dbottom (the rest is left alone). */
void ct_crop_backward_gpu(ct_context *ctx, const ct_crop_geometry *g, size_t count,
                          const float *dtop, float *dbottom);

#ifdef __cplusplus
}
#endif

#endif
