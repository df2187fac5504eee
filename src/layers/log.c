/* Log: y = log_base(shift + scale * x), natural when base is -1 (the
 * default).  dy/dx = scale / (ln(base) (shift + scale x)) needs x, so in place
 * forward keeps a copy. */
#include <math.h>
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/log.h"
#include "layers/neuron.h"

typedef struct {
  float scale, shift;
  float base_scale;         /* 1 / ln(base) */
  float backward_num_scale; /* scale / ln(base) */
  ct_neuron_input input;
} log_state;

static ct_status log_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                           ct_error *err) {
  const Caffe__LogParameter *p = CT_PARAM_OR_DEFAULT(l, log_param, CAFFE__LOG_PARAMETER__INIT);
  bool natural = p->base_ == -1.0f;
  if (!natural && !(p->base_ > 0.0f))
    return ct_error_set(err, CT_ERR_INVALID,
                        "log_param.base must be strictly positive (or -1 for e), got %g",
                        (double)p->base_);
  float log_base = natural ? 1.0f : logf(p->base_);
  if (!isfinite(log_base) || log_base == 0.0f)
    return ct_error_set(err, CT_ERR_INVALID,
                        "log_param.base %g gives ln(base) = %g, which cannot divide",
                        (double)p->base_, (double)log_base);
  log_state *s = ct_xcalloc(1, sizeof *s);
  s->scale = p->scale;
  s->shift = p->shift;
  s->base_scale = 1.0f / log_base;
  s->backward_num_scale = p->scale / log_base;
  l->priv = s;
  return CT_OK;
}

static ct_status log_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  log_state *s = l->priv;
  ct_neuron_input_reshape(&s->input, l, bottom[0], top[0]);
  return ct_neuron_reshape(l, bottom, top, err);
}

static ct_status log_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  log_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  for (size_t i = 0; i < bottom[0]->count; i++) {
    float v = logf(s->scale * x[i] + s->shift);
    y[i] = s->base_scale == 1.0f ? v : s->base_scale * v;
  }
  return CT_OK;
}

static void log_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  log_state *s = l->priv;
  const float *x = ct_neuron_input_data(&s->input, bottom[0], top[0]);
  const float *dy = top[0]->diff;
  float *dx = bottom[0]->diff;
  for (size_t i = 0; i < bottom[0]->count; i++)
    dx[i] = dy[i] * (s->backward_num_scale / (s->scale * x[i] + s->shift));
}

static void log_destroy(ct_layer *l) {
  log_state *s = l->priv;
  if (!s) return;
  ct_neuron_input_free(&s->input);
  free(s);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status log_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  log_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  ct_log_forward_gpu(l->ctx, bottom[0]->count, s->scale, s->shift, s->base_scale, bottom[0]->data,
                     top[0]->data);
  return CT_OK;
}

static void log_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  log_state *s = l->priv;
  ct_log_backward_gpu(l->ctx, bottom[0]->count, s->scale, s->shift, s->backward_num_scale,
                      ct_neuron_input_data(&s->input, bottom[0], top[0]), top[0]->diff,
                      bottom[0]->diff);
}
#endif

/* In place, the copy of x its backward reads (layers/neuron.h). */
static int log_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  (void)cap;
  return ct_neuron_input_state(&((log_state *)l->priv)->input, out);
}

const ct_layer_ops ct_log_ops = {
    .type = "Log",
    .backward_state = log_backward_state,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = log_setup,
    .reshape = log_reshape,
    .forward_cpu = log_forward_cpu,
    .backward_cpu = log_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = log_forward_gpu,
    .backward_gpu = log_backward_gpu,
#endif
    .destroy = log_destroy,
};
