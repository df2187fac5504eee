/* Threshold: y = 1 if x > threshold, else 0.  A step function has no useful
 * gradient; like Caffe, the layer has no backward. */
#include "layers/layer.h"
#include "layers/neuron.h"
#include "layers/threshold.h"

static float threshold_value(const ct_layer *l) {
  return CT_PARAM_OR_DEFAULT(l, threshold_param, CAFFE__THRESHOLD_PARAMETER__INIT)->threshold;
}

static ct_status threshold_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  return CT_OK;
}

static ct_status threshold_forward_cpu(ct_layer *l, ct_tensor *const *bottom,
                                       ct_tensor *const *top, ct_error *err) {
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  float t = threshold_value(l);
  for (size_t i = 0; i < bottom[0]->count; i++) y[i] = x[i] > t ? 1.0f : 0.0f;
  return CT_OK;
}

#ifdef CORTADO_HAVE_CUDA
static ct_status threshold_forward_gpu(ct_layer *l, ct_tensor *const *bottom,
                                       ct_tensor *const *top, ct_error *err) {
  ct_threshold_forward_gpu(l->ctx, bottom[0]->count, threshold_value(l), bottom[0]->data,
                           top[0]->data);
  return CT_OK;
}
#endif

const ct_layer_ops ct_threshold_ops = {
    .type = "Threshold",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .flags = CT_LAYER_NO_BACKWARD,
    .setup = threshold_setup,
    .reshape = ct_neuron_reshape,
    .forward_cpu = threshold_forward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = threshold_forward_gpu,
#endif
};
