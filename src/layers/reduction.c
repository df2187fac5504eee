/* Reduction: reduces reduction_param.axis (default 0) and every axis after
 * it to one number per leading index, by SUM, ASUM (sum of |x|), SUMSQ (sum
 * of x^2) or MEAN, times coeff (default 1).  Bottom (N, C, H, W) with axis 1
 * gives a top of shape (N); axis 0 gives a 0-axis top (one value). */
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/reduction.h"
#include "layers/shape_util.h"
#include "math/math.h"

typedef struct {
  Caffe__ReductionParameter__ReductionOp op;
  int axis;
  float coeff;  /* coeff, divided by the reduced count for MEAN */
  size_t num;   /* outputs */
  size_t dim;   /* values reduced into each */
} reduction_priv;

static ct_status reduction_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  const Caffe__ReductionParameter *p =
      CT_PARAM_OR_DEFAULT(l, reduction_param, CAFFE__REDUCTION_PARAMETER__INIT);
  switch (p->operation) {
    case CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__SUM:
    case CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__ASUM:
    case CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__SUMSQ:
    case CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__MEAN: break;
    default:
      return ct_error_set(err, CT_ERR_INVALID, "reduction_param: unknown operation %d",
                          (int)p->operation);
  }
  reduction_priv *r = ct_xcalloc(1, sizeof *r);
  r->op = p->operation;
  l->priv = r;
  return CT_OK;
}

static ct_status reduction_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  const Caffe__ReductionParameter *p =
      CT_PARAM_OR_DEFAULT(l, reduction_param, CAFFE__REDUCTION_PARAMETER__INIT);
  reduction_priv *r = l->priv;
  const ct_tensor *b = bottom[0];
  CT_TRY(ct_layer_axis(b, p->axis, "axis", &r->axis, err));
  CT_TRY(ct_tensor_reshape(top[0], r->axis, b->shape, err));
  r->num = ct_tensor_count_range(b, 0, r->axis);
  r->dim = ct_tensor_count_range(b, r->axis, b->ndim);
  r->coeff = p->coeff;
  if (r->op == CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__MEAN) r->coeff /= (float)r->dim;
  return CT_OK;
}

static ct_status reduction_forward_cpu(ct_layer *l, ct_tensor *const *bottom,
                                       ct_tensor *const *top, ct_error *err) {
  const reduction_priv *r = l->priv;
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  for (size_t i = 0; i < r->num; i++, x += r->dim) {
    double s = 0;
    switch (r->op) {
      case CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__ASUM: s = ct_cpu_asum(r->dim, x); break;
      case CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__SUMSQ: s = ct_cpu_dot(r->dim, x, x); break;
      default:
        for (size_t k = 0; k < r->dim; k++) s += x[k];
    }
    y[i] = (float)s * r->coeff;
  }
  return CT_OK;
}

static void reduction_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                   ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  const reduction_priv *r = l->priv;
  const float *x = bottom[0]->data, *dy = top[0]->diff;
  float *dx = bottom[0]->diff;
  for (size_t i = 0; i < r->num; i++, x += r->dim, dx += r->dim) {
    float g = dy[i] * r->coeff;
    switch (r->op) {
      case CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__ASUM:
        for (size_t k = 0; k < r->dim; k++) dx[k] = x[k] > 0 ? g : (x[k] < 0 ? -g : 0.0f);
        break;
      case CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__SUMSQ:
        for (size_t k = 0; k < r->dim; k++) dx[k] = 2.0f * g * x[k];
        break;
      default: ct_cpu_set(r->dim, g, dx);
    }
  }
}

#ifdef CORTADO_HAVE_CUDA
static ct_reduce_term term_of(Caffe__ReductionParameter__ReductionOp op) {
  if (op == CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__ASUM) return CT_REDUCE_ASUM;
  if (op == CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__SUMSQ) return CT_REDUCE_SUMSQ;
  return CT_REDUCE_SUM;
}

static ct_status reduction_forward_gpu(ct_layer *l, ct_tensor *const *bottom,
                                       ct_tensor *const *top, ct_error *err) {
  const reduction_priv *r = l->priv;
  ct_reduction_forward_gpu(l->ctx, term_of(r->op), r->num, r->dim, r->coeff, bottom[0]->data, top[0]->data);
  return CT_OK;
}

static void reduction_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                   ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  const reduction_priv *r = l->priv;
  ct_reduction_backward_gpu(l->ctx, term_of(r->op), r->num, r->dim, r->coeff, bottom[0]->data,
                            top[0]->diff, bottom[0]->diff);
}
#endif

static void reduction_destroy(ct_layer *l) { free(l->priv); }

const ct_layer_ops ct_reduction_ops = {
    .type = "Reduction",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = reduction_setup,
    .reshape = reduction_reshape,
    .forward_cpu = reduction_forward_cpu,
    .backward_cpu = reduction_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = reduction_forward_gpu,
    .backward_gpu = reduction_backward_gpu,
#endif
    .destroy = reduction_destroy,
};
