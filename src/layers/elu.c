/* ELU: y = x for x > 0, alpha * (exp(x) - 1) otherwise.
 * Backward tests the sign of the bottom data as Caffe does; in place that is
 * y, whose sign is x's for alpha > 0, and dy/dx = y + alpha on the left. */
#include <math.h>

#include "layers/elu.h"
#include "layers/layer.h"
#include "layers/neuron.h"

static float elu_alpha(const ct_layer *l) {
  return CT_PARAM_OR_DEFAULT(l, elu_param, CAFFE__ELUPARAMETER__INIT)->alpha;
}

static ct_status elu_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                           ct_error *err) {
  return CT_OK;
}

static ct_status elu_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  float alpha = elu_alpha(l);
  for (size_t i = 0; i < bottom[0]->count; i++)
    y[i] = x[i] > 0 ? x[i] : alpha * expm1f(x[i]);
  return CT_OK;
}

static void elu_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  const float *x = bottom[0]->data, *y = top[0]->data, *dy = top[0]->diff;
  float *dx = bottom[0]->diff;
  float alpha = elu_alpha(l);
  for (size_t i = 0; i < bottom[0]->count; i++)
    dx[i] = x[i] > 0 ? dy[i] : dy[i] * (y[i] + alpha);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status elu_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  ct_elu_forward_gpu(l->ctx, bottom[0]->count, elu_alpha(l), bottom[0]->data, top[0]->data);
  return CT_OK;
}

static void elu_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  ct_elu_backward_gpu(l->ctx, bottom[0]->count, elu_alpha(l), bottom[0]->data, top[0]->data,
                      top[0]->diff, bottom[0]->diff);
}
#endif

const ct_layer_ops ct_elu_ops = {
    .type = "ELU",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = elu_setup,
    .reshape = ct_neuron_reshape,
    .forward_cpu = elu_forward_cpu,
    .backward_cpu = elu_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = elu_forward_gpu,
    .backward_gpu = elu_backward_gpu,
#endif
};
