/* Scale: y = x * s (+ b) with s broadcast over bottom[0] (see bias.h).
 * s is a learned blob (one bottom; shape from scale_param.axis and num_axes,
 * filled by scale_param.filler, default constant 1) or bottom[1].  With
 * bias_term, a learned bias b follows (Caffe's Scale holds a Bias layer): its
 * shape covers num_axes axes from axis (bottom[1]'s axis count in the
 * two-bottom form), filled by bias_filler (default constant 0).
 * Learnable blobs in Caffe's order: [scale, bias] with one bottom, [bias]
 * with two.  In place, forward keeps a copy of x for the scale gradient.
 * A Scale right after a BatchNorm may be computed by it (net_fuse.c,
 * batch_norm.h): the layer is then marked absorbed and does nothing. */
#include <stdlib.h>

#include "layers/bias.h"
#include "layers/channel_typed.h"
#include "layers/filler.h"
#include "layers/layer.h"
#include "layers/neuron.h"
#include "layers/scale.h"

typedef struct {
  int axis;
  bool bias_term;
  int bias_index;       /* learnable blob index of the bias */
  ct_broadcast_dims g;  /* of the scale */
  ct_broadcast_dims gb; /* of the bias */
  ct_neuron_input input;
  ct_tensor *scratch;   /* 16-bit on a GPU: ct_channel_sums_gpu's */
} scale_state;

static ct_status scale_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  const Caffe__ScaleParameter *p =
      CT_PARAM_OR_DEFAULT(l, scale_param, CAFFE__SCALE_PARAMETER__INIT);
  scale_state *s = ct_xcalloc(1, sizeof *s);
  l->priv = s;
  s->axis = p->axis;
  s->bias_term = p->bias_term;
  int ndim, shape[CT_MAX_AXES];
  if (l->nbottom == 1) {
    CT_TRY(ct_broadcast_param_shape(bottom[0], p->axis, p->num_axes, "scale_param", &ndim, shape,
                                    err));
    ct_tensor *scale = ct_layer_add_param(l, ndim, shape);
    Caffe__FillerParameter one = CAFFE__FILLER_PARAMETER__INIT;
    one.type = "constant";
    one.has_value = 1;
    one.value = 1.0f;
    CT_TRY(ct_filler_fill(p->filler ? p->filler : &one, scale, &l->ctx->rng, err));
  }
  if (s->bias_term) {
    int bias_axes = l->nbottom > 1 ? bottom[1]->ndim : p->num_axes;
    CT_TRY(ct_broadcast_param_shape(bottom[0], p->axis, bias_axes, "scale_param", &ndim, shape,
                                    err));
    s->bias_index = l->nparams;
    ct_tensor *bias = ct_layer_add_param(l, ndim, shape);
    CT_TRY(ct_filler_fill(p->bias_filler, bias, &l->ctx->rng, err));
  }
  return CT_OK;
}

static const ct_tensor *scale_operand(const ct_layer *l, ct_tensor *const *bottom) {
  return l->nbottom > 1 ? bottom[1] : l->params[0];
}

static ct_status scale_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  scale_state *s = l->priv;
  CT_TRY(ct_broadcast_dims_get(bottom[0], scale_operand(l, bottom), s->axis, "scale", &s->g, err));
  if (s->bias_term)
    CT_TRY(
        ct_broadcast_dims_get(bottom[0], l->params[s->bias_index], s->axis, "bias", &s->gb, err));
  /* Absorbed into a BatchNorm (layer.h), the layer never runs: no copy of x. */
  if (l->absorbed) ct_neuron_input_free(&s->input);
  else ct_neuron_input_reshape(&s->input, l, bottom[0], top[0]);
  if (top[0] != bottom[0]) ct_tensor_reshape_like(top[0], bottom[0]);
#ifdef CORTADO_HAVE_CUDA
  if (l->dtype != CT_F32 && l->ctx->device != CT_DEVICE_CPU) {
    /* the 16-bit GPU path: one scale (and bias) per channel */
    size_t n, c, sp;
    ct_tensor_ncs(bottom[0], &n, &c, &sp);
    if (l->nbottom > 1 || s->g.outer != n || s->g.dim != c || s->g.inner != sp ||
        (s->bias_term && s->gb.dim != c))
      return ct_error_set(err, CT_ERR_UNSUPPORTED,
                          "a %s Scale scales per channel (one bottom, axis 1, num_axes 1); give "
                          "the layer forward_type: FLOAT",
                          ct_dtype_name(l->dtype));
    if (!s->scratch) s->scratch = ct_tensor_new(l->ctx->device, NULL);
    const int k = (int)ct_channel_sums_scratch(c);
    ct_tensor_reshape_or_die(s->scratch, 1, &k);
  }
#endif
  return CT_OK;
}

static ct_status scale_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  scale_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  const ct_broadcast_dims *g = &s->g;
  const float *x = bottom[0]->data, *sc = scale_operand(l, bottom)->data;
  float *y = top[0]->data;
  for (size_t o = 0; o < g->outer; o++)
    for (size_t d = 0; d < g->dim; d++) {
      size_t base = (o * g->dim + d) * g->inner;
      for (size_t i = 0; i < g->inner; i++) y[base + i] = x[base + i] * sc[d];
    }
  if (s->bias_term) ct_bias_forward_cpu(&s->gb, y, l->params[s->bias_index]->data, y);
  return CT_OK;
}

/* ds(dim) = (accumulate ? ds : 0) + sum over outer and inner of dy * x. */
static void scale_backward_operand_cpu(const ct_broadcast_dims *g, const float *dy, const float *x,
                                       bool accumulate, float *ds) {
  for (size_t d = 0; d < g->dim; d++) {
    double sum = 0;
    for (size_t o = 0; o < g->outer; o++) {
      size_t base = (o * g->dim + d) * g->inner;
      for (size_t i = 0; i < g->inner; i++) sum += (double)dy[base + i] * x[base + i];
    }
    ds[d] = (float)(accumulate ? ds[d] + sum : sum);
  }
}

/* Parameter gradients first: in place, dx overwrites dy. */
static void scale_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  scale_state *s = l->priv;
  const ct_broadcast_dims *g = &s->g;
  const float *dy = top[0]->diff;
  if (s->bias_term && l->param_propagate_down[s->bias_index])
    ct_bias_backward_operand_cpu(&s->gb, dy, true, l->params[s->bias_index]->diff);
  const float *x = ct_neuron_input_data(&s->input, bottom[0], top[0]);
  if (l->nbottom > 1 && propagate_down[1])
    scale_backward_operand_cpu(g, dy, x, false, bottom[1]->diff);
  if (l->nbottom == 1 && l->param_propagate_down[0])
    scale_backward_operand_cpu(g, dy, x, true, l->params[0]->diff);
  if (propagate_down[0]) {
    const float *sc = scale_operand(l, bottom)->data;
    float *dx = bottom[0]->diff;
    for (size_t o = 0; o < g->outer; o++)
      for (size_t d = 0; d < g->dim; d++) {
        size_t base = (o * g->dim + d) * g->inner;
        for (size_t i = 0; i < g->inner; i++) dx[base + i] = dy[base + i] * sc[d];
      }
  }
}

static void scale_destroy(ct_layer *l) {
  scale_state *s = l->priv;
  if (!s) return;
  ct_neuron_input_free(&s->input);
  ct_tensor_free(s->scratch);
  free(s);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status scale_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  scale_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  if (l->dtype != CT_F32) {
    const ct_channel_geom g = ct_channel_geom_of(l, bottom[0]);
    ct_channel_affine_gpu(l->ctx, &g, bottom[0]->data, l->params[0]->data,
                          s->bias_term ? l->params[s->bias_index]->data : NULL, false, NULL,
                          top[0]->data);
    return CT_OK;
  }
  ct_scale_forward_gpu(l->ctx, &s->g, bottom[0]->data, scale_operand(l, bottom)->data,
                       top[0]->data);
  if (s->bias_term)
    ct_bias_forward_gpu(l->ctx, &s->gb, top[0]->data, l->params[s->bias_index]->data, top[0]->data);
  return CT_OK;
}

static void scale_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  scale_state *s = l->priv;
  if (l->dtype != CT_F32) {
    const ct_channel_geom g = ct_channel_geom_of(l, bottom[0]);
    const bool bias_grad = s->bias_term && l->param_propagate_down[s->bias_index];
    ct_channel_sums_gpu(l->ctx, &g, top[0]->diff,
                        ct_neuron_input_data(&s->input, bottom[0], top[0]), NULL, s->scratch->data,
                        true,
                        l->param_propagate_down[0] ? l->params[0]->diff : NULL,
                        bias_grad ? l->params[s->bias_index]->diff : NULL, l->params[0]->data,
                        propagate_down[0] ? bottom[0]->diff : NULL);
    return;
  }
  const float *dy = top[0]->diff;
  if (s->bias_term && l->param_propagate_down[s->bias_index])
    ct_bias_backward_operand_gpu(l->ctx, &s->gb, dy, true, l->params[s->bias_index]->diff);
  const float *x = ct_neuron_input_data(&s->input, bottom[0], top[0]);
  if (l->nbottom > 1 && propagate_down[1])
    ct_scale_backward_operand_gpu(l->ctx, &s->g, dy, x, false, bottom[1]->diff);
  if (l->nbottom == 1 && l->param_propagate_down[0])
    ct_scale_backward_operand_gpu(l->ctx, &s->g, dy, x, true, l->params[0]->diff);
  if (propagate_down[0])
    ct_scale_forward_gpu(l->ctx, &s->g, dy, scale_operand(l, bottom)->data, bottom[0]->diff);
}
#endif

/* In place, the copy of x its backward reads (layers/neuron.h). */
static int scale_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  (void)cap;
  return ct_neuron_input_state(&((scale_state *)l->priv)->input, out);
}

const ct_layer_ops ct_scale_ops = {
    .type = "Scale",
    .backward_state = scale_backward_state,
    .min_bottoms = 1, .max_bottoms = 2, .min_tops = 1, .max_tops = 1,
    .setup = scale_setup,
    .reshape = scale_reshape,
    .forward_cpu = scale_forward_cpu,
    .backward_cpu = scale_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = scale_forward_gpu,
    .backward_gpu = scale_backward_gpu,
#endif
    .destroy = scale_destroy,
    .dtypes_gpu = CT_DTYPE_BIT(CT_BF16) | CT_DTYPE_BIT(CT_F16),
    .layouts_gpu = CT_LAYOUT_BIT(CT_NHWC),
};
