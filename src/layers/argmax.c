/* ArgMax: the indices (and with out_max_val the values) of the top_k largest
 * values, either along argmax_param.axis or, when axis is unset, over each
 * item's flattened values (all axes but the first).  Ties go to the larger
 * index, as std::partial_sort with greater<pair<value, index>> gives in
 * Caffe.  Output shapes as Caffe:
 *   axis set:   bottom's shape with top_k on the axis (values or indices);
 *   axis unset: N x 1 x top_k (indices) or N x 2 x top_k (indices, then
 *               values), padded with 1s to the bottom's axis count.
 * No backward. */
#include <stdlib.h>

#include "layers/argmax.h"
#include "layers/layer.h"

typedef struct {
  bool out_max_val, has_axis;
  unsigned top_k;
  int axis;
  size_t dim, axis_dist, rows; /* values per selection, their stride, selections */
  float *val;                   /* (top_k) host scratch of one selection */
  int *idx;                     /* (top_k) */
} argmax_priv;

/* (v, i) ranks above (w, j) when v > w, or v == w and i > j. */
static bool ranks_above(float v, int i, float w, int j) { return v > w || (v == w && i > j); }

/* The top k (value, index) pairs of dim values spaced stride apart, best
 * first: k passes, each taking the best pair ranking below the last pick. */
static void argmax_row(const float *x, size_t dim, size_t stride, unsigned k, float *val, int *idx) {
  for (unsigned r = 0; r < k; r++) {
    int best = -1;
    float best_v = 0.0f;
    for (size_t j = 0; j < dim; j++) {
      float v = x[j * stride];
      if (r > 0 && !ranks_above(val[r - 1], idx[r - 1], v, (int)j)) continue;
      if (best < 0 || ranks_above(v, (int)j, best_v, best)) {
        best = (int)j;
        best_v = v;
      }
    }
    val[r] = best_v;
    idx[r] = best;
  }
}

static ct_status argmax_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  const Caffe__ArgMaxParameter *ap =
      CT_PARAM_OR_DEFAULT(l, argmax_param, CAFFE__ARG_MAX_PARAMETER__INIT);
  if (ap->top_k < 1) return ct_error_set(err, CT_ERR_INVALID, "argmax_param.top_k must be at least 1");
  argmax_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->out_max_val = ap->out_max_val;
  p->top_k = ap->top_k;
  p->has_axis = ap->has_axis;
  p->val = ct_xcalloc(p->top_k, sizeof *p->val);
  p->idx = ct_xcalloc(p->top_k, sizeof *p->idx);
  return CT_OK;
}

static ct_status argmax_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  argmax_priv *p = l->priv;
  const Caffe__ArgMaxParameter *ap =
      CT_PARAM_OR_DEFAULT(l, argmax_param, CAFFE__ARG_MAX_PARAMETER__INIT);
  const ct_tensor *b = bottom[0];
  int shape[CT_MAX_AXES], ndim;
  if (p->has_axis) {
    if (ct_tensor_canonical_axis(b, ap->axis, &p->axis, err) != CT_OK)
      return ct_error_prefix(err, "argmax_param.axis");
    p->dim = (size_t)b->shape[p->axis];
    if (p->top_k > p->dim)
      return ct_error_set(err, CT_ERR_INVALID,
                          "argmax_param.top_k %u must be less than or equal to the size of axis %d "
                          "(%zu)",
                          p->top_k, p->axis, p->dim);
    p->axis_dist = ct_tensor_count_range(b, p->axis + 1, b->ndim);
    ndim = b->ndim;
    for (int i = 0; i < ndim; i++) shape[i] = b->shape[i];
    shape[p->axis] = (int)p->top_k;
  } else {
    if (b->ndim < 1)
      return ct_error_set(err, CT_ERR_INVALID, "ArgMax without an axis needs a bottom with a first axis");
    p->dim = ct_tensor_count_range(b, 1, b->ndim);
    if (p->top_k > p->dim)
      return ct_error_set(err, CT_ERR_INVALID,
                          "argmax_param.top_k %u must be less than or equal to the number of values "
                          "per item (%zu)",
                          p->top_k, p->dim);
    p->axis_dist = 1;
    ndim = b->ndim > 3 ? b->ndim : 3;
    for (int i = 0; i < ndim; i++) shape[i] = 1;
    shape[0] = b->shape[0];
    shape[1] = p->out_max_val ? 2 : 1;
    shape[2] = (int)p->top_k;
  }
  p->rows = p->dim ? b->count / p->dim : 0;
  ct_tensor_reshape_or_die(top[0], ndim, shape);
  return CT_OK;
}

static ct_status argmax_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                    ct_error *err) {
  argmax_priv *p = l->priv;
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  unsigned k = p->top_k;
  float *val = p->val;
  int *idx = p->idx;
  for (size_t r = 0; r < p->rows; r++) {
    size_t outer = r / p->axis_dist, in = r % p->axis_dist;
    argmax_row(x + outer * p->dim * p->axis_dist + in, p->dim, p->axis_dist, k, val, idx);
    for (unsigned j = 0; j < k; j++) {
      if (!p->has_axis && p->out_max_val) {
        y[2 * r * k + j] = (float)idx[j];
        y[2 * r * k + k + j] = val[j];
      } else {
        y[(outer * k + j) * p->axis_dist + in] = p->out_max_val ? val[j] : (float)idx[j];
      }
    }
  }
  return CT_OK;
}

#ifdef CORTADO_HAVE_CUDA
static ct_status argmax_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                    ct_error *err) {
  argmax_priv *p = l->priv;
  ct_argmax_forward_gpu(l->ctx, p->rows, p->dim, p->axis_dist, p->top_k, p->out_max_val,
                        !p->has_axis && p->out_max_val, bottom[0]->data, top[0]->data);
  return CT_OK;
}
#endif

static void argmax_destroy(ct_layer *l) {
  argmax_priv *p = l->priv;
  if (!p) return;
  free(p->val);
  free(p->idx);
  free(p);
}

const ct_layer_ops ct_argmax_ops = {
    .type = "ArgMax",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .flags = CT_LAYER_NO_BACKWARD,
    .no_force_backward_bottoms = 1u << 0,
    .setup = argmax_setup,
    .reshape = argmax_reshape,
    .forward_cpu = argmax_forward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = argmax_forward_gpu,
#endif
    .destroy = argmax_destroy,
};
