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

#ifdef __cplusplus
}
#endif

#endif
