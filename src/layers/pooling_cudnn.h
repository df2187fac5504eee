/* Pooling on cuDNN (pooling_cudnn.cu), the GPU engine behind
 * pooling_param.engine DEFAULT and CUDNN.
 *
 * cuDNN pools exactly as Caffe does when its output size (always rounded
 * down) equals Caffe's: MAX then ignores padding as Caffe does, and every
 * AVE window lies inside the padded input, so Caffe's divisor is the full
 * kernel area (CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING).  Caffe's
 * default CEIL rounding often gives one more row or column; those layers,
 * STOCHASTIC pooling and MAX with the argmax as a second top keep the CAFFE
 * engine (pooling.cu).
 *
 * MAX backward finds the maxima again from the bottom and the top, so both
 * must keep their forward values until backward (as for every Caffe
 * layer); cuDNN has no argmax to keep. */
#ifndef CT_LAYERS_POOLING_CUDNN_H
#define CT_LAYERS_POOLING_CUDNN_H

#include "layers/layer.h"
#include "layers/pooling.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For Pooling's reshape_gpu: sets l->gpu_priv (descriptors for geometry g)
 * when cuDNN runs the layer, else clears it.  engine is pooling_param.engine.
 * Fails only when cuDNN fails on valid input (CT_ERR_DEVICE). */
ct_status ct_pool_cudnn_reshape(ct_layer *l, const ct_pool_geom *g, int engine, ct_error *err);
/* y from x; dx (overwritten) from dy, x and y.  l->gpu_priv must be set. */
void ct_pool_cudnn_forward(ct_layer *l, const float *x, float *y);
void ct_pool_cudnn_backward(ct_layer *l, const float *x, const float *y, const float *dy,
                            float *dx);
void ct_pool_cudnn_destroy(ct_layer *l);

#ifdef __cplusplus
}
#endif

#endif
