/* Pooling's geometry and its GPU launchers (pooling.cu), on ctx's stream. */
#ifndef CT_LAYERS_POOLING_H
#define CT_LAYERS_POOLING_H

#include <stdbool.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_pool_geom {
  int method;          /* Caffe__PoolingParameter__PoolMethod */
  bool global;
  int kh, kw, sh, sw, ph, pw;
  int N, C, H, W;      /* bottom */
  int PH, PW;          /* top */
} ct_pool_geom;

/* y (N, C, PH, PW) from x (N, C, H, W).  idx (same shape as y): MAX writes
 * the argmax within the plane (-1 for an empty window); STOCHASTIC in train
 * reads a uniform draw per output and writes the chosen index. */
void ct_pool_forward_gpu(ct_context *ctx, const ct_pool_geom *g, bool train, const float *x,
                         float *y, float *idx);
/* dx (overwritten) from dy, with the idx of forward (MAX, STOCHASTIC train)
 * or x (STOCHASTIC test). */
void ct_pool_backward_gpu(ct_context *ctx, const ct_pool_geom *g, bool train, const float *x,
                          const float *dy, const float *idx, float *dx);

#ifdef __cplusplus
}
#endif

#endif
