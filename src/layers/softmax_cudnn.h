/* Softmax on cuDNN (softmax_cudnn.cu), the GPU engine behind
 * softmax_param.engine DEFAULT and CUDNN: the blob as (outer, channels,
 * inner, 1) and CUDNN_SOFTMAX_ACCURATE (max subtracted) over the channels.
 * In-place layers keep the CAFFE engine (cuDNN does not promise to allow
 * it). */
#ifndef CT_LAYERS_SOFTMAX_CUDNN_H
#define CT_LAYERS_SOFTMAX_CUDNN_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For Softmax's reshape_gpu: sets l->gpu_priv when cuDNN runs the layer for
 * the blob seen as (outer, channels, inner), else clears it.  engine is
 * softmax_param.engine.  Never fails on valid input. */
ct_status ct_softmax_cudnn_reshape(ct_layer *l, int engine, size_t outer, int channels,
                                   size_t inner, bool in_place, ct_error *err);
/* y from x; dx (overwritten) from y and dy.  l->gpu_priv must be set. */
void ct_softmax_cudnn_forward(ct_layer *l, const float *x, float *y);
void ct_softmax_cudnn_backward(ct_layer *l, const float *y, const float *dy, float *dx);
void ct_softmax_cudnn_destroy(ct_layer *l);

#ifdef __cplusplus
}
#endif

#endif
