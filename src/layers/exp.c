/* Exp: y = base^(shift + scale * x), base e when base is -1 (the default).
 * Computed as outer * exp(inner * x) with inner = ln(base) * scale and
 * outer = base^shift.  Backward uses only y (dy/dx = inner * y). */
#include <math.h>
#include <stdlib.h>

#include "layers/exp.h"
#include "layers/layer.h"
#include "layers/neuron.h"

typedef struct {
  float inner_scale, outer_scale;
} exp_state;

static ct_status exp_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                           ct_error *err) {
  const Caffe__ExpParameter *p = CT_PARAM_OR_DEFAULT(l, exp_param, CAFFE__EXP_PARAMETER__INIT);
  bool natural = p->base_ == -1.0f;
  if (!natural && !(p->base_ > 0.0f))
    return ct_error_set(err, CT_ERR_INVALID,
                        "exp_param.base must be strictly positive (or -1 for e), got %g",
                        (double)p->base_);
  float log_base = natural ? 1.0f : logf(p->base_);
  if (!isfinite(log_base))
    return ct_error_set(err, CT_ERR_INVALID, "exp_param.base %g has no finite logarithm",
                        (double)p->base_);
  exp_state *s = ct_xcalloc(1, sizeof *s);
  s->inner_scale = log_base * p->scale;
  s->outer_scale = p->shift == 0.0f ? 1.0f : (natural ? expf(p->shift) : powf(p->base_, p->shift));
  l->priv = s;
  return CT_OK;
}

static ct_status exp_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  const exp_state *s = l->priv;
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  for (size_t i = 0; i < bottom[0]->count; i++) {
    float v = expf(s->inner_scale == 1.0f ? x[i] : s->inner_scale * x[i]);
    y[i] = s->outer_scale == 1.0f ? v : s->outer_scale * v;
  }
  return CT_OK;
}

static void exp_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  const exp_state *s = l->priv;
  const float *y = top[0]->data, *dy = top[0]->diff;
  float *dx = bottom[0]->diff;
  for (size_t i = 0; i < bottom[0]->count; i++) {
    float g = y[i] * dy[i];
    dx[i] = s->inner_scale == 1.0f ? g : s->inner_scale * g;
  }
}

static void exp_destroy(ct_layer *l) { free(l->priv); }

#ifdef CORTADO_HAVE_CUDA
static ct_status exp_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  const exp_state *s = l->priv;
  ct_exp_forward_gpu(l->ctx, bottom[0]->count, s->inner_scale, s->outer_scale, bottom[0]->data,
                     top[0]->data);
  return CT_OK;
}

static void exp_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  const exp_state *s = l->priv;
  ct_exp_backward_gpu(l->ctx, bottom[0]->count, s->inner_scale, top[0]->data, top[0]->diff,
                      bottom[0]->diff);
}
#endif

const ct_layer_ops ct_exp_ops = {
    .type = "Exp",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = exp_setup,
    .reshape = ct_neuron_reshape,
    .forward_cpu = exp_forward_cpu,
    .backward_cpu = exp_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = exp_forward_gpu,
    .backward_gpu = exp_backward_gpu,
#endif
    .destroy = exp_destroy,
};
