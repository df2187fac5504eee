/* Pooling's geometry and its GPU launchers (pooling.cu), on ctx's stream. */
#ifndef CT_LAYERS_POOLING_H
#define CT_LAYERS_POOLING_H

#include <stdbool.h>

#include "core/context.h"
#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_pool_geom {
  int method;          /* Caffe__PoolingParameter__PoolMethod */
  bool global;
  int kh, kw, sh, sw, ph, pw;
  int N, C, H, W;      /* bottom */
  int PH, PW;          /* top */
  /* ReLUs fused by the net (ct_pool_absorb_relu_*; GPU kernels only):
   * relu_top clamps the output at 0 and passes a gradient only through
   * outputs above 0 (a ReLU in place on the top); relu_bottom passes one
   * only to inputs above 0 (the backward of a ReLU in place on the bottom). */
  bool relu_top, relu_bottom;
  /* (C) on the device, added to every output of channel c before relu_top:
   * the bias of the Convolution before a MAX pooling (ct_pool_take_bias;
   * GPU kernels only), or NULL. */
  const float *bias;
} ct_pool_geom;

/* y (N, C, PH, PW) from x (N, C, H, W).  idx (same shape as y): MAX writes
 * the argmax within the plane (-1 for an empty window); STOCHASTIC in train
 * reads a uniform draw per output and writes the chosen index. */
void ct_pool_forward_gpu(ct_context *ctx, const ct_pool_geom *g, bool train, const float *x,
                         float *y, float *idx);
/* dx (overwritten) from dy, with the idx of forward (MAX, STOCHASTIC train)
 * or x (STOCHASTIC test, relu_bottom); y (the forward's output) is read for
 * relu_top and may be NULL otherwise. */
void ct_pool_backward_gpu(ct_context *ctx, const ct_pool_geom *g, bool train, const float *x,
                          const float *y, const float *dy, const float *idx, float *dx);

/* The same for a 16-bit layer (pooling_typed.cu): MAX and AVE only, values
 * of type t in either memory order (nhwc: channels last), no bias.  MAX's
 * argmax is ct_pool_typed_arg_bytes(g) bytes per output: for windows of at
 * most 255 positions one byte, the maximum's place in its window
 * ((h - hs) kw + (w - ws) from the window's unclipped corner (hs, ws); 255:
 * an empty window), a quarter of the float index's memory (VGG-16's five
 * poolings held 373 MB of indices at batch 64); else the float index. */
void ct_pool_forward_gpu_typed(ct_context *ctx, const ct_pool_geom *g, ct_dtype t, bool nhwc,
                               const void *x, void *y, void *idx);
void ct_pool_backward_gpu_typed(ct_context *ctx, const ct_pool_geom *g, ct_dtype t, bool nhwc,
                                const void *x, const void *y, const void *dy, const void *idx,
                                void *dx);
static inline size_t ct_pool_typed_arg_bytes(const ct_pool_geom *g) {
  return (long)g->kh * g->kw <= 255 ? 1 : sizeof(float);
}

/* Net fusion (net_fuse.c) on a GPU: the Pooling layer `pool` computes a
 * ReLU with slope 0 in place on its top (forward and backward: the ReLU is
 * then absorbed), or the backward of one in place on its bottom.  False,
 * with nothing changed, where the layer cannot: not on a GPU, STOCHASTIC,
 * or a second (mask) top.  A fused layer always runs Cortado's kernels
 * (never cuDNN's); the caller reshapes it afterwards. */
bool ct_pool_absorb_relu_top(ct_layer *pool);
bool ct_pool_absorb_relu_bottom(ct_layer *pool);
/* Net fusion on a GPU: the MAX Pooling `pool` adds bias (C values, one per
 * channel of its bottom; borrowed, read at each forward) to its outputs,
 * for the Convolution before it (ct_conv_defer_bias); NULL undoes it.
 * False, with nothing changed, where the layer cannot (as above, or not
 * MAX, or bias not of C values). */
bool ct_pool_take_bias(ct_layer *pool, const ct_tensor *bias);

#ifdef __cplusplus
}
#endif

#endif
