/* Direct AVX2 kernels for convolutions whose input has few channels (the
 * first layer of most nets: 1 to 4 channels, 2-D, stride 1, no dilation, one
 * group), in the conv_common.h X / Y view on the blobs' own layout.
 *
 * oneDNN's blocked kernels spend most of their time there on reorders and
 * channel padding; these keep each output row in registers instead: forward
 * holds up to 4 output channels x 32 columns of Y and walks the taps,
 * backward weights holds 1 or 2 output channels x the kernel's width of
 * weight-gradient sums and walks the images.  Both split the images over the
 * threads.  Used by the oneDNN engine (conv_dnnl.c) for the passes they
 * cover; backward data stays with oneDNN. */
#ifndef CT_LAYERS_CONV_DIRECT_H
#define CT_LAYERS_CONV_DIRECT_H

#include <stdbool.h>

#include "layers/conv/conv_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True when the build has the kernels (AVX2 and FMA) and c's geometry is
 * theirs. */
bool ct_conv_direct_fits(const ct_conv *c);
/* y (num, y_channels, out) = conv(x, w) + bias (bias may be NULL). */
void ct_conv_direct_forward(const ct_conv *c, const float *w, const float *bias, const float *x,
                            float *y);
/* dw += the weight gradient of x and dy; dbias += the sums of dy per
 * channel (either may be NULL).  The sums are split over a fixed number of
 * image ranges and added in range order, so the result does not depend on
 * thread timing. */
void ct_conv_direct_weight_grad(const ct_conv *c, const float *x, const float *dy, float *dw,
                                float *dbias);

#ifdef __cplusplus
}
#endif

#endif
