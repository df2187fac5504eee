/* ReLU, Sigmoid and TanH on cuDNN (activation_cudnn.cu), the GPU engine
 * behind relu_param / sigmoid_param / tanh_param.engine DEFAULT and CUDNN.
 * The blob is one packed row; cudnnActivationForward/Backward run in place
 * (Caffe's usual in-place ReLU, where x and y are the same values' signs).
 * ReLU with a negative slope keeps the CAFFE engine (cuDNN has no leaky
 * ReLU).  In-place Sigmoid and TanH run the CAFFE engine's backward, which
 * reads only y: cuDNN's backward may read the input x that the in-place
 * forward overwrote. */
#ifndef CT_LAYERS_ACTIVATION_CUDNN_H
#define CT_LAYERS_ACTIVATION_CUDNN_H

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_act_cudnn_mode {
  CT_ACT_CUDNN_RELU = 0,
  CT_ACT_CUDNN_SIGMOID = 1,
  CT_ACT_CUDNN_TANH = 2,
} ct_act_cudnn_mode;

/* For the layers' reshape_gpu: sets l->gpu_priv when cuDNN runs the layer,
 * else clears it.  engine is the layer's Engine field; unsupported, when not
 * NULL, is the layer's own reason to keep the CAFFE engine (a negative
 * slope).  Never fails on valid input. */
ct_status ct_act_cudnn_reshape(ct_layer *l, ct_act_cudnn_mode mode, int engine,
                               const char *unsupported, const ct_tensor *bottom,
                               const ct_tensor *top, ct_error *err);
/* y from x (y may be x); dx (overwritten, may be dy) from x, y and dy (x
 * may be y for ReLU only). */
void ct_act_cudnn_forward(ct_layer *l, const float *x, float *y);
void ct_act_cudnn_backward(ct_layer *l, const float *x, const float *y, const float *dy,
                           float *dx);
void ct_act_cudnn_destroy(ct_layer *l);

#ifdef __cplusplus
}
#endif

#endif
