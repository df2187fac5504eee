/* BNLL (binomial normal log likelihood): y = log(1 + exp(x)), computed as
 * x + log(1 + exp(-x)) for x > 0 so that it never overflows.
 * dy/dx = sigmoid(x), with exp's argument capped at 50 as in Caffe.  Backward
 * needs x, so in place forward keeps a copy. */
#include <math.h>
#include <stdlib.h>

#include "layers/bnll.h"
#include "layers/layer.h"
#include "layers/neuron.h"

#define BNLL_EXP_CAP 50.0f

typedef struct {
  ct_neuron_input input;
} bnll_state;

static ct_status bnll_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  l->priv = ct_xcalloc(1, sizeof(bnll_state));
  return CT_OK;
}

static ct_status bnll_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  bnll_state *s = l->priv;
  ct_neuron_input_reshape(&s->input, l, bottom[0], top[0]);
  return ct_neuron_reshape(l, bottom, top, err);
}

static ct_status bnll_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  bnll_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  for (size_t i = 0; i < bottom[0]->count; i++)
    y[i] = x[i] > 0 ? x[i] + log1pf(expf(-x[i])) : log1pf(expf(x[i]));
  return CT_OK;
}

static void bnll_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  bnll_state *s = l->priv;
  const float *x = ct_neuron_input_data(&s->input, bottom[0], top[0]);
  const float *dy = top[0]->diff;
  float *dx = bottom[0]->diff;
  for (size_t i = 0; i < bottom[0]->count; i++) {
    float e = expf(fminf(x[i], BNLL_EXP_CAP));
    dx[i] = dy[i] * e / (e + 1.0f);
  }
}

static void bnll_destroy(ct_layer *l) {
  bnll_state *s = l->priv;
  if (!s) return;
  ct_neuron_input_free(&s->input);
  free(s);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status bnll_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  bnll_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  ct_bnll_forward_gpu(l->ctx, bottom[0]->count, bottom[0]->data, top[0]->data);
  return CT_OK;
}

static void bnll_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  bnll_state *s = l->priv;
  ct_bnll_backward_gpu(l->ctx, bottom[0]->count, ct_neuron_input_data(&s->input, bottom[0], top[0]),
                       top[0]->diff, bottom[0]->diff);
}
#endif

/* In place, the copy of x its backward reads (layers/neuron.h). */
static int bnll_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  (void)cap;
  return ct_neuron_input_state(&((bnll_state *)l->priv)->input, out);
}

const ct_layer_ops ct_bnll_ops = {
    .type = "BNLL",
    .backward_state = bnll_backward_state,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = bnll_setup,
    .reshape = bnll_reshape,
    .forward_cpu = bnll_forward_cpu,
    .backward_cpu = bnll_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = bnll_forward_gpu,
    .backward_gpu = bnll_backward_gpu,
#endif
    .destroy = bnll_destroy,
};
