/* PReLU: y = max(x, 0) + a_c * min(x, 0) with a learned slope a per channel
 * (axis 1), or one slope for all channels (channel_shared).
 * Learnable blob: slopes (C), or a 0-axis scalar when channel_shared, as in
 * Caffe; filled by prelu_param.filler (default constant 0.25).
 * In place, forward keeps a copy of x for backward. */
#include <stdlib.h>

#include "layers/filler.h"
#include "layers/layer.h"
#include "layers/neuron.h"
#include "layers/prelu.h"

typedef struct {
  bool channel_shared;
  ct_neuron_input input;
} prelu_state;

static ct_status check_bottom(const ct_layer *l, const ct_tensor *bottom, ct_error *err) {
  if (bottom->ndim < 2)
    return ct_error_set(err, CT_ERR_INVALID,
                        "PReLU needs a bottom with at least 2 axes (N, C, ...), got %d",
                        bottom->ndim);
  const prelu_state *s = l->priv;
  if (!s->channel_shared && (size_t)bottom->shape[1] != l->params[0]->count)
    return ct_error_set(err, CT_ERR_INVALID, "bottom has %d channels but the layer has %zu slopes",
                        bottom->shape[1], l->params[0]->count);
  return CT_OK;
}

static ct_status prelu_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  if (bottom[0]->ndim < 2)
    return ct_error_set(err, CT_ERR_INVALID,
                        "PReLU needs a bottom with at least 2 axes (N, C, ...), got %d",
                        bottom[0]->ndim);
  const Caffe__PReLUParameter *p =
      CT_PARAM_OR_DEFAULT(l, prelu_param, CAFFE__PRE_LUPARAMETER__INIT);
  prelu_state *s = ct_xcalloc(1, sizeof *s);
  s->channel_shared = p->channel_shared;
  l->priv = s;
  int channels = bottom[0]->shape[1];
  ct_tensor *slopes = ct_layer_add_param(l, s->channel_shared ? 0 : 1, &channels);
  Caffe__FillerParameter quarter = CAFFE__FILLER_PARAMETER__INIT;
  quarter.type = "constant";
  quarter.has_value = 1;
  quarter.value = 0.25f;
  return ct_filler_fill(p->filler ? p->filler : &quarter, slopes, &l->ctx->rng, err);
}

static ct_status prelu_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  CT_TRY(check_bottom(l, bottom[0], err));
  prelu_state *s = l->priv;
  ct_neuron_input_reshape(&s->input, l, bottom[0], top[0]);
  return ct_neuron_reshape(l, bottom, top, err);
}

/* Geometry: values per channel plane, channels, and the channel divisor that
 * maps every channel to slope 0 when the slope is shared. */
static void geometry(const ct_layer *l, const ct_tensor *bottom, int *dim, int *channels,
                     int *div) {
  const prelu_state *s = l->priv;
  *dim = (int)ct_tensor_count_range(bottom, 2, bottom->ndim);
  *channels = bottom->shape[1];
  *div = s->channel_shared ? *channels : 1;
}

static ct_status prelu_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  prelu_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  int dim, channels, div;
  geometry(l, bottom[0], &dim, &channels, &div);
  const float *x = bottom[0]->data, *slope = l->params[0]->data;
  float *y = top[0]->data;
  for (size_t i = 0; i < bottom[0]->count; i++) {
    int c = (int)(i / (size_t)dim % (size_t)channels) / div;
    y[i] = x[i] > 0 ? x[i] : slope[c] * x[i];
  }
  return CT_OK;
}

/* The slope gradient is taken first: in place, dx overwrites dy. */
static void prelu_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  prelu_state *s = l->priv;
  int dim, channels, div;
  geometry(l, bottom[0], &dim, &channels, &div);
  const float *x = ct_neuron_input_data(&s->input, bottom[0], top[0]);
  const float *dy = top[0]->diff, *slope = l->params[0]->data;
  size_t n = bottom[0]->count;
  if (l->param_propagate_down[0]) {
    float *dslope = l->params[0]->diff;
    for (size_t i = 0; i < n; i++) {
      int c = (int)(i / (size_t)dim % (size_t)channels) / div;
      if (x[i] <= 0) dslope[c] += dy[i] * x[i];
    }
  }
  if (propagate_down[0]) {
    float *dx = bottom[0]->diff;
    for (size_t i = 0; i < n; i++) {
      int c = (int)(i / (size_t)dim % (size_t)channels) / div;
      dx[i] = x[i] > 0 ? dy[i] : slope[c] * dy[i];
    }
  }
}

static void prelu_destroy(ct_layer *l) {
  prelu_state *s = l->priv;
  if (!s) return;
  ct_neuron_input_free(&s->input);
  free(s);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status prelu_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  prelu_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  int dim, channels, div;
  geometry(l, bottom[0], &dim, &channels, &div);
  ct_prelu_forward_gpu(l->ctx, bottom[0]->count, channels, dim, s->channel_shared,
                       l->params[0]->data, bottom[0]->data, top[0]->data);
  return CT_OK;
}

static void prelu_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  prelu_state *s = l->priv;
  int dim, channels, div;
  geometry(l, bottom[0], &dim, &channels, &div);
  const float *x = ct_neuron_input_data(&s->input, bottom[0], top[0]);
  size_t n = bottom[0]->count;
  if (l->param_propagate_down[0])
    ct_prelu_backward_slope_gpu(l->ctx, n, channels, dim, s->channel_shared, x, top[0]->diff,
                                l->params[0]->diff);
  if (propagate_down[0])
    ct_prelu_backward_gpu(l->ctx, n, channels, dim, s->channel_shared, l->params[0]->data, x,
                          top[0]->diff, bottom[0]->diff);
}
#endif

/* In place, the copy of x its backward reads (layers/neuron.h). */
static int prelu_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  (void)cap;
  return ct_neuron_input_state(&((prelu_state *)l->priv)->input, out);
}

const ct_layer_ops ct_prelu_ops = {
    .type = "PReLU",
    .backward_state = prelu_backward_state,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = prelu_setup,
    .reshape = prelu_reshape,
    .forward_cpu = prelu_forward_cpu,
    .backward_cpu = prelu_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = prelu_forward_gpu,
    .backward_gpu = prelu_backward_gpu,
#endif
    .destroy = prelu_destroy,
};
