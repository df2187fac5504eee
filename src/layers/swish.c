/* Swish: y = x * sigmoid(beta x).  Forward keeps s = sigmoid(beta x) (N...)
 * for backward, dy/dx = beta y + s (1 - beta y), which then needs no x: in
 * place is free. */
#include <math.h>
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/neuron.h"
#include "layers/swish.h"

typedef struct {
  float beta;
  ct_tensor *sig; /* sigmoid(beta x), shape of the bottom, on the layer's device */
} swish_state;

static ct_status swish_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  swish_state *s = ct_xcalloc(1, sizeof *s);
  s->beta = CT_PARAM_OR_DEFAULT(l, swish_param, CAFFE__SWISH_PARAMETER__INIT)->beta;
  s->sig = ct_tensor_new(l->ctx->device, NULL);
  l->priv = s;
  return CT_OK;
}

static ct_status swish_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  swish_state *s = l->priv;
  ct_tensor_reshape_like(s->sig, bottom[0]);
  return ct_neuron_reshape(l, bottom, top, err);
}

static ct_status swish_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  swish_state *s = l->priv;
  const float *x = bottom[0]->data;
  float *y = top[0]->data, *sig = s->sig->data;
  for (size_t i = 0; i < bottom[0]->count; i++) {
    sig[i] = 0.5f * tanhf(0.5f * (s->beta * x[i])) + 0.5f;
    y[i] = x[i] * sig[i];
  }
  return CT_OK;
}

static void swish_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  swish_state *s = l->priv;
  const float *y = top[0]->data, *dy = top[0]->diff, *sig = s->sig->data;
  float *dx = bottom[0]->diff;
  for (size_t i = 0; i < bottom[0]->count; i++) {
    float by = s->beta * y[i];
    dx[i] = dy[i] * (by + sig[i] * (1.0f - by));
  }
}

static void swish_destroy(ct_layer *l) {
  swish_state *s = l->priv;
  if (!s) return;
  ct_tensor_free(s->sig);
  free(s);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status swish_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  swish_state *s = l->priv;
  ct_swish_forward_gpu(l->ctx, bottom[0]->count, s->beta, bottom[0]->data, s->sig->data,
                       top[0]->data);
  return CT_OK;
}

static void swish_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  swish_state *s = l->priv;
  ct_swish_backward_gpu(l->ctx, bottom[0]->count, s->beta, top[0]->data, s->sig->data,
                        top[0]->diff, bottom[0]->diff);
}
#endif

const ct_layer_ops ct_swish_ops = {
    .type = "Swish",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = swish_setup,
    .reshape = swish_reshape,
    .forward_cpu = swish_forward_cpu,
    .backward_cpu = swish_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = swish_forward_gpu,
    .backward_gpu = swish_backward_gpu,
#endif
    .destroy = swish_destroy,
};
