/* Sigmoid: y = 1 / (1 + exp(-x)), computed as 0.5 * tanh(0.5 x) + 0.5 (no
 * overflow for large |x|).  Backward uses only y, so in place is free. */
#include <math.h>

#include "layers/layer.h"
#include "layers/neuron.h"
#include "layers/sigmoid.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/activation_cudnn.h"
#endif

static ct_status sigmoid_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  return CT_OK;
}

static ct_status sigmoid_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  for (size_t i = 0; i < bottom[0]->count; i++) y[i] = 0.5f * tanhf(0.5f * x[i]) + 0.5f;
  return CT_OK;
}

static void sigmoid_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                 ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  const float *y = top[0]->data, *dy = top[0]->diff;
  float *dx = bottom[0]->diff;
  for (size_t i = 0; i < bottom[0]->count; i++) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

#ifdef CORTADO_HAVE_CUDA
/* cuDNN runs the layer unless the engine field says otherwise (l->gpu_priv
 * set); in place, backward stays here (it needs only y). */
static ct_status sigmoid_reshape_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  const Caffe__SigmoidParameter *p =
      CT_PARAM_OR_DEFAULT(l, sigmoid_param, CAFFE__SIGMOID_PARAMETER__INIT);
  return ct_act_cudnn_reshape(l, CT_ACT_CUDNN_SIGMOID, (int)p->engine, NULL, bottom[0], top[0],
                              err);
}

static ct_status sigmoid_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  if (l->gpu_priv) {
    ct_act_cudnn_forward(l, bottom[0]->data, top[0]->data);
    return CT_OK;
  }
  ct_sigmoid_forward_gpu(l->ctx, bottom[0]->count, bottom[0]->data, top[0]->data);
  return CT_OK;
}

static void sigmoid_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                 ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  if (l->gpu_priv && top[0] != bottom[0]) {
    ct_act_cudnn_backward(l, bottom[0]->data, top[0]->data, top[0]->diff, bottom[0]->diff);
    return;
  }
  ct_sigmoid_backward_gpu(l->ctx, bottom[0]->count, top[0]->data, top[0]->diff, bottom[0]->diff);
}
#endif

const ct_layer_ops ct_sigmoid_ops = {
    .type = "Sigmoid",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = sigmoid_setup,
    .reshape = ct_neuron_reshape,
    .forward_cpu = sigmoid_forward_cpu,
    .backward_cpu = sigmoid_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = sigmoid_forward_gpu,
    .backward_gpu = sigmoid_backward_gpu,
    .reshape_gpu = sigmoid_reshape_gpu,
    .destroy_gpu = ct_act_cudnn_destroy,
#endif
};
