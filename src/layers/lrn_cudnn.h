/* LRN on cuDNN (lrn_cudnn.cu), the GPU engine behind lrn_param.engine
 * DEFAULT and CUDNN: cudnnLRNCrossChannelForward/Backward compute Caffe's
 * ACROSS_CHANNELS formula (cuDNN divides alpha by the window as Caffe does)
 * for windows of at most 16 channels, k >= 1e-5 and beta >= 0.01.
 * WITHIN_CHANNEL, wider windows and in-place layers keep the CAFFE engine. */
#ifndef CT_LAYERS_LRN_CUDNN_H
#define CT_LAYERS_LRN_CUDNN_H

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For LRN's reshape_gpu: sets l->gpu_priv when cuDNN runs the layer for
 * lrn_param p on this bottom (N, C, H, W), else clears it.  Never fails on
 * valid input (the status is for symmetry with the other reshape hooks). */
ct_status ct_lrn_cudnn_reshape(ct_layer *l, const Caffe__LRNParameter *p, const ct_tensor *bottom,
                               const ct_tensor *top, ct_error *err);
/* y from x; dx (overwritten) from dy, x and y.  l->gpu_priv must be set. */
void ct_lrn_cudnn_forward(ct_layer *l, const float *x, float *y);
void ct_lrn_cudnn_backward(ct_layer *l, const float *x, const float *y, const float *dy,
                           float *dx);
void ct_lrn_cudnn_destroy(ct_layer *l);

#ifdef __cplusplus
}
#endif

#endif
