/* Power: y = (shift + scale * x)^power.
 * Backward follows Caffe's cases: a constant slope when power == 1 or
 * power * scale == 0; 2 scale (shift + scale x) for power 2; power y / x when
 * shift == 0; else power scale y / (shift + scale x).  It needs x, so in
 * place forward keeps a copy. */
#include <math.h>
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/neuron.h"
#include "layers/power.h"

typedef struct {
  float power, scale, shift;
  float diff_scale; /* power * scale: dy/dx is constant when it is 0 */
  ct_neuron_input input;
} power_state;

static ct_status power_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  const Caffe__PowerParameter *p =
      CT_PARAM_OR_DEFAULT(l, power_param, CAFFE__POWER_PARAMETER__INIT);
  power_state *s = ct_xcalloc(1, sizeof *s);
  s->power = p->power;
  s->scale = p->scale;
  s->shift = p->shift;
  s->diff_scale = p->power * p->scale;
  l->priv = s;
  return CT_OK;
}

static ct_status power_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  power_state *s = l->priv;
  ct_neuron_input_reshape(&s->input, l, bottom[0], top[0]);
  return ct_neuron_reshape(l, bottom, top, err);
}

static ct_status power_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  power_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  size_t n = bottom[0]->count;
  if (s->diff_scale == 0.0f) {
    float value = s->power == 0.0f ? 1.0f : powf(s->shift, s->power);
    for (size_t i = 0; i < n; i++) y[i] = value;
    return CT_OK;
  }
  for (size_t i = 0; i < n; i++) {
    float base = s->scale * x[i] + s->shift;
    y[i] = s->power == 1.0f ? base : powf(base, s->power);
  }
  return CT_OK;
}

static void power_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  power_state *s = l->priv;
  const float *x = ct_neuron_input_data(&s->input, bottom[0], top[0]);
  const float *y = top[0]->data, *dy = top[0]->diff;
  float *dx = bottom[0]->diff;
  size_t n = bottom[0]->count;
  if (s->diff_scale == 0.0f || s->power == 1.0f) {
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * s->diff_scale;
  } else if (s->power == 2.0f) {
    for (size_t i = 0; i < n; i++)
      dx[i] = dy[i] * (s->diff_scale * s->scale * x[i] + s->diff_scale * s->shift);
  } else if (s->shift == 0.0f) {
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * (s->power * (y[i] / x[i]));
  } else {
    for (size_t i = 0; i < n; i++)
      dx[i] = dy[i] * (s->diff_scale * (y[i] / (s->scale * x[i] + s->shift)));
  }
}

static void power_destroy(ct_layer *l) {
  power_state *s = l->priv;
  if (!s) return;
  ct_neuron_input_free(&s->input);
  free(s);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status power_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  power_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  ct_power_forward_gpu(l->ctx, bottom[0]->count, s->power, s->scale, s->shift, bottom[0]->data,
                       top[0]->data);
  return CT_OK;
}

static void power_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  power_state *s = l->priv;
  ct_power_backward_gpu(l->ctx, bottom[0]->count, s->power, s->scale, s->shift,
                        ct_neuron_input_data(&s->input, bottom[0], top[0]), top[0]->data,
                        top[0]->diff, bottom[0]->diff);
}
#endif

/* In place, the copy of x its backward reads (layers/neuron.h). */
static int power_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  (void)cap;
  return ct_neuron_input_state(&((power_state *)l->priv)->input, out);
}

const ct_layer_ops ct_power_ops = {
    .type = "Power",
    .backward_state = power_backward_state,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = power_setup,
    .reshape = power_reshape,
    .forward_cpu = power_forward_cpu,
    .backward_cpu = power_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = power_forward_gpu,
    .backward_gpu = power_backward_gpu,
#endif
    .destroy = power_destroy,
};
