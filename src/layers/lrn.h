/* LRN's geometry and its GPU launchers (lrn.cu), on ctx's stream.  See lrn.c
 * for the formula. */
#ifndef CT_LAYERS_LRN_H
#define CT_LAYERS_LRN_H

#include <stdbool.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_lrn_geom {
  bool within;       /* WITHIN_CHANNEL (spatial box) instead of ACROSS_CHANNELS */
  int size;          /* local_size, odd */
  float k;           /* k' */
  float alpha;       /* a': alpha / size (across) or alpha / size^2 (within) */
  float beta;
  int N, C, H, W;
} ct_lrn_geom;

/* scale = k' + a' S(x^2), y = x scale^-beta; all (N, C, H, W). */
void ct_lrn_forward_gpu(ct_context *ctx, const ct_lrn_geom *g, const float *x, float *scale,
                        float *y);
/* dx = dy scale^-beta - 2 a' beta x S(dy y / scale); tmp is scratch of the
 * same size. */
void ct_lrn_backward_gpu(ct_context *ctx, const ct_lrn_geom *g, const float *x, const float *y,
                         const float *dy, const float *scale, float *tmp, float *dx);

#ifdef __cplusplus
}
#endif

#endif
