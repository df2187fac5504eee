/* Bias: y = x + b broadcast over bottom[0] (see bias.h).  The operand b is a
 * learned blob (one bottom; shape from bias_param.axis and num_axes, filled by
 * bias_param.filler, default constant 0) or bottom[1].  In place is free:
 * dx = dy. */
#include "layers/bias.h"

#include <stdlib.h>
#include <string.h>

#include "layers/filler.h"
#include "layers/layer.h"
#include "math/math.h"

ct_status ct_broadcast_param_shape(const ct_tensor *bottom, int axis, int num_axes,
                                   const char *what, int *ndim, int shape[CT_MAX_AXES],
                                   ct_error *err) {
  int a;
  if (ct_tensor_canonical_axis(bottom, axis, &a, err) != CT_OK)
    return ct_error_prefix(err, "%s.axis", what);
  if (num_axes < -1)
    return ct_error_set(
        err, CT_ERR_INVALID,
        "%s.num_axes must be non-negative, or -1 to extend to the end of bottom[0]; "
        "got %d",
        what, num_axes);
  if (num_axes >= 0 && a + num_axes > bottom->ndim)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s.num_axes %d from axis %d extends past bottom[0]'s %d axes", what,
                        num_axes, a, bottom->ndim);
  int end = num_axes < 0 ? bottom->ndim : a + num_axes;
  *ndim = end - a;
  for (int i = a; i < end; i++) shape[i - a] = bottom->shape[i];
  return CT_OK;
}

ct_status ct_broadcast_dims_get(const ct_tensor *bottom, const ct_tensor *operand, int axis,
                                const char *name, ct_broadcast_dims *out, ct_error *err) {
  int a = 0;
  if (operand->ndim > 0) CT_TRY(ct_tensor_canonical_axis(bottom, axis, &a, err));
  if (a + operand->ndim > bottom->ndim)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s's %d axes extend past bottom[0]'s %d axes when applied from axis %d",
                        name, operand->ndim, bottom->ndim, a);
  for (int i = 0; i < operand->ndim; i++)
    if (bottom->shape[a + i] != operand->shape[i])
      return ct_error_set(err, CT_ERR_INVALID,
                          "dimension mismatch between bottom[0]->shape(%d) = %d and %s->shape(%d) "
                          "= %d", a + i, bottom->shape[a + i], name, i, operand->shape[i]);
  out->axis = a;
  out->outer = ct_tensor_count_range(bottom, 0, a);
  out->dim = operand->count;
  out->inner = ct_tensor_count_range(bottom, a + operand->ndim, bottom->ndim);
  return CT_OK;
}

void ct_bias_forward_cpu(const ct_broadcast_dims *g, const float *x, const float *b, float *y) {
  for (size_t o = 0; o < g->outer; o++)
    for (size_t d = 0; d < g->dim; d++) {
      size_t base = (o * g->dim + d) * g->inner;
      for (size_t i = 0; i < g->inner; i++) y[base + i] = x[base + i] + b[d];
    }
}

void ct_bias_backward_operand_cpu(const ct_broadcast_dims *g, const float *dy, bool accumulate,
                                  float *db) {
  for (size_t d = 0; d < g->dim; d++) {
    double sum = 0;
    for (size_t o = 0; o < g->outer; o++) {
      const float *p = dy + (o * g->dim + d) * g->inner;
      for (size_t i = 0; i < g->inner; i++) sum += p[i];
    }
    db[d] = (float)(accumulate ? db[d] + sum : sum);
  }
}

/* ---------------------------------------------------------------- the layer */

typedef struct {
  ct_broadcast_dims g;
} bias_state;

static int bias_axis(const ct_layer *l) {
  return CT_PARAM_OR_DEFAULT(l, bias_param, CAFFE__BIAS_PARAMETER__INIT)->axis;
}

static ct_status bias_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  l->priv = ct_xcalloc(1, sizeof(bias_state));
  if (l->nbottom > 1) return CT_OK;
  const Caffe__BiasParameter *p = CT_PARAM_OR_DEFAULT(l, bias_param, CAFFE__BIAS_PARAMETER__INIT);
  int ndim, shape[CT_MAX_AXES];
  CT_TRY(
      ct_broadcast_param_shape(bottom[0], p->axis, p->num_axes, "bias_param", &ndim, shape, err));
  ct_tensor *b = ct_layer_add_param(l, ndim, shape);
  return ct_filler_fill(p->filler, b, &l->ctx->rng, err);
}

static ct_status bias_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  bias_state *s = l->priv;
  const ct_tensor *b = l->nbottom > 1 ? bottom[1] : l->params[0];
  CT_TRY(ct_broadcast_dims_get(bottom[0], b, bias_axis(l), "bias", &s->g, err));
  if (top[0] != bottom[0]) ct_tensor_reshape_like(top[0], bottom[0]);
  return CT_OK;
}

static ct_status bias_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  bias_state *s = l->priv;
  const ct_tensor *b = l->nbottom > 1 ? bottom[1] : l->params[0];
  ct_bias_forward_cpu(&s->g, bottom[0]->data, b->data, top[0]->data);
  return CT_OK;
}

static void bias_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  bias_state *s = l->priv;
  if (l->nbottom > 1 && propagate_down[1])
    ct_bias_backward_operand_cpu(&s->g, top[0]->diff, false, bottom[1]->diff);
  if (l->nbottom == 1 && l->param_propagate_down[0])
    ct_bias_backward_operand_cpu(&s->g, top[0]->diff, true, l->params[0]->diff);
  if (propagate_down[0] && top[0] != bottom[0])
    memcpy(bottom[0]->diff, top[0]->diff, top[0]->count * sizeof(float));
}

static void bias_destroy(ct_layer *l) { free(l->priv); }

#ifdef CORTADO_HAVE_CUDA
static ct_status bias_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  bias_state *s = l->priv;
  const ct_tensor *b = l->nbottom > 1 ? bottom[1] : l->params[0];
  ct_bias_forward_gpu(l->ctx, &s->g, bottom[0]->data, b->data, top[0]->data);
  return CT_OK;
}

static void bias_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  bias_state *s = l->priv;
  if (l->nbottom > 1 && propagate_down[1])
    ct_bias_backward_operand_gpu(l->ctx, &s->g, top[0]->diff, false, bottom[1]->diff);
  if (l->nbottom == 1 && l->param_propagate_down[0])
    ct_bias_backward_operand_gpu(l->ctx, &s->g, top[0]->diff, true, l->params[0]->diff);
  if (propagate_down[0] && top[0] != bottom[0])
    ct_gpu_copy(l->ctx, top[0]->count, top[0]->diff, bottom[0]->diff);
}
#endif

const ct_layer_ops ct_bias_ops = {
    .type = "Bias",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 2, .min_tops = 1, .max_tops = 1,
    .setup = bias_setup,
    .reshape = bias_reshape,
    .forward_cpu = bias_forward_cpu,
    .backward_cpu = bias_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = bias_forward_gpu,
    .backward_gpu = bias_backward_gpu,
#endif
    .destroy = bias_destroy,
};
