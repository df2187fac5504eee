/* Depthwise convolutions on a GPU: Cortado's own kernels for a 2-D
 * Convolution whose group equals its input channels (MobileNet's 3x3
 * depthwise layers: one filter per channel, or M per channel when
 * num_output = M x channels).  cuDNN and im2col + GEMM run such a layer as
 * `group` convolutions of one channel each (the CAFFE engine took 600 ms an
 * iteration for MobileNet v1 at batch 64 on an H200); here one thread
 * computes one output from its taps, reading along memory in either order;
 * channels-last layers with one filter per channel and a channel count that
 * fills 16 bytes take 16 bytes (8 bfloat16 or float16 values) a thread.
 *
 * Every element type (float32, bfloat16, float16) in NCHW or NHWC; products
 * and sums in float32, rounded once; the float32 master weights read as they
 * are.  Deterministic: backward data gathers (no atomics), and the filter's
 * gradient is summed in fixed-size slices whose partial sums are then added
 * in a fixed order, so a run gives the same bits every time.
 *
 * Chosen at reshape for every engine but CUDNN (convolution_param.engine:
 * CAFFE in Caffe meant "not cuDNN", which this is too). */
#ifndef CT_LAYERS_CONV_DEPTHWISE_H
#define CT_LAYERS_CONV_DEPTHWISE_H

#include <stdbool.h>

#include "core/tensor.h"
#include "layers/conv/conv_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_CONV_DW_MAX_TAPS 25 /* kernel_h * kernel_w: up to 5 x 5 */

typedef struct ct_conv_dw ct_conv_dw;

/* Whether the kernels run c (set up and reshaped): Convolution, 2 spatial
 * axes, group == x_channels > 1, y_channels a multiple of group, at most
 * CT_CONV_DW_MAX_TAPS taps, fewer than 2^31 values in bottom and top. */
bool ct_conv_dw_fits(const ct_conv *c);

/* The state of c for its current shape on `device`: old (or NULL) reused,
 * its scratch grown when the shape needs more.  Free with ct_conv_dw_free. */
ct_conv_dw *ct_conv_dw_plan(ct_conv_dw *old, const ct_conv *c, int device);
void ct_conv_dw_free(ct_conv_dw *d, int device);

/* y = depthwise(x, w) + bias (bias NULL: none), overwriting y; x and y of
 * `type` in order `nhwc`, w float32 in Caffe's (y_channels, 1, kh, kw); d
 * from ct_conv_dw_plan for c's shape. */
void ct_conv_dw_forward(ct_context *ctx, ct_conv_dw *d, const ct_conv *c, ct_dtype type, bool nhwc,
                        const void *x, const float *w, const float *bias, void *y);
/* dx = the gradient of x for dy, overwriting dx. */
void ct_conv_dw_backward_data(ct_context *ctx, ct_conv_dw *d, const ct_conv *c, ct_dtype type,
                              bool nhwc, const void *dy, const float *w, void *dx);
/* dw += the weight gradient, dbias += the bias gradient (either NULL: not
 * wanted), from x and dy, through d's scratch. */
void ct_conv_dw_backward_params(ct_context *ctx, ct_conv_dw *d, const ct_conv *c, ct_dtype type,
                                bool nhwc, const void *x, const void *dy, float *dw, float *dbias);

#ifdef __cplusplus
}
#endif

#endif
