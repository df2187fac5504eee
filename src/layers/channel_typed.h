/* Per-channel work on tensors of any element type in either memory order
 * (core/tensor.h), on a GPU (channel_typed.cu, on ctx's stream): what the
 * 16-bit Scale and frozen-statistics BatchNorm compute.  A tensor is
 * (N, C, S) in NCHW or (N, S, C) in NHWC; per-channel operands are float32
 * (C).  Values are computed in float32 and rounded once when stored. */
#ifndef CT_LAYERS_CHANNEL_TYPED_H
#define CT_LAYERS_CHANNEL_TYPED_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "core/dtype.h"
#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The geometry and type of the tensors a call reads and writes. */
typedef struct ct_channel_geom {
  ct_dtype type;
  bool nhwc;
  size_t N, C, S;
} ct_channel_geom;

/* The geometry of layer l's tensor x (l's type and order). */
static inline ct_channel_geom ct_channel_geom_of(const ct_layer *l, const ct_tensor *x) {
  ct_channel_geom g = {l->dtype, l->layout == CT_NHWC, 0, 0, 0};
  ct_tensor_ncs(x, &g.N, &g.C, &g.S);
  return g;
}

/* y = x * a[c] (x when a is NULL; + b[c] when b is not NULL), then
 * max(y, 0) with relu, and 0 where gate (a tensor of the same type and
 * shape; may be NULL) is not above 0: the gradient through a fused ReLU,
 * gate being its output.  y may be x. */
void ct_channel_affine_gpu(ct_context *ctx, const ct_channel_geom *g, const void *x,
                           const float *a, const float *b, bool relu, const void *gate, void *y);
/* Floats of scratch ct_channel_sums_gpu needs for C channels. */
size_t ct_channel_sums_scratch(size_t C);
/* Per channel c, over its N x S values: dot[c] (+)= sum of dy * x (when dot
 * is not NULL; x read only then) and sum[c] (+)= sum of dy (when sum is
 * not NULL), added to what they hold with accumulate, else overwriting
 * them; dy counts as 0 where gate (may be NULL) is not above 0.  When dx is
 * not NULL, also dx = a[c] * dy (that same gated dy; a NULL: 1) in the same
 * pass over memory; dx may be dy.  Deterministic: partial sums in scratch, added in a
 * fixed order. */
void ct_channel_sums_gpu(ct_context *ctx, const ct_channel_geom *g, const void *dy, const void *x,
                         const void *gate, float *scratch, bool accumulate, float *dot,
                         float *sum, const float *a, void *dx);

#ifdef __cplusplus
}
#endif

#endif
