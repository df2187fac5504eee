/* Concat: joins its bottoms along one axis (concat_param.axis, default 1, or
 * the legacy concat_dim).  The other axes must agree.  Backward hands each
 * bottom its block of the top's diff.  Both directions are block copies of
 * values of any type, so the same code runs on the host and on a GPU
 * (ct_copy_rows_sized).  Channels-last (NHWC) tensors join along the
 * channels (axis 1) or the batch (axis 0): the channels are then the rows'
 * last axis. */
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/shape_util.h"

typedef struct {
  int axis;
} concat_priv;

static ct_status concat_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  const Caffe__ConcatParameter *p =
      CT_PARAM_OR_DEFAULT(l, concat_param, CAFFE__CONCAT_PARAMETER__INIT);
  if (p->has_axis && p->has_concat_dim)
    return ct_error_set(err, CT_ERR_INVALID,
                        "concat_param: give either axis or concat_dim, not both");
  l->priv = ct_xcalloc(1, sizeof(concat_priv));
  return CT_OK;
}

static ct_status concat_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  const Caffe__ConcatParameter *p =
      CT_PARAM_OR_DEFAULT(l, concat_param, CAFFE__CONCAT_PARAMETER__INIT);
  concat_priv *c = l->priv;
  const ct_tensor *b0 = bottom[0];
  if (p->has_concat_dim) {
    if (p->concat_dim >= (uint32_t)b0->ndim)
      return ct_error_set(err, CT_ERR_INVALID, "concat_dim %u out of range for a %d-axis bottom",
                          p->concat_dim, b0->ndim);
    c->axis = (int)p->concat_dim;
  } else {
    CT_TRY(ct_layer_axis(b0, p->axis, "axis", &c->axis, err));
  }
  int shape[CT_MAX_AXES];
  for (int k = 0; k < b0->ndim; k++) shape[k] = b0->shape[k];
  for (int i = 1; i < l->nbottom; i++) {
    const ct_tensor *b = bottom[i];
    char sb[256], s0[256];
    if (b->ndim != b0->ndim)
      return ct_error_set(err, CT_ERR_INVALID, "bottom %d has %d axes but bottom 0 has %d", i,
                          b->ndim, b0->ndim);
    for (int k = 0; k < b0->ndim; k++)
      if (k != c->axis && b->shape[k] != b0->shape[k])
        return ct_error_set(err, CT_ERR_INVALID,
                            "bottom %d has shape %s but bottom 0 has %s: only the concat axis %d "
                            "may differ",
                            i, ct_tensor_shape_string(b, sb, sizeof sb),
                            ct_tensor_shape_string(b0, s0, sizeof s0), c->axis);
    shape[c->axis] += b->shape[c->axis];
  }
  if (l->layout == CT_NHWC && c->axis > 1 && b0->ndim > 2 &&
      ct_tensor_count_range(b0, 2, b0->ndim) > 1)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "channels-last Concat joins along axis 0 or 1, not %d (give the layer "
                        "cortado_layout: NCHW)", c->axis);
  return ct_tensor_reshape(top[0], b0->ndim, shape, err);
}

/* The copies as rows: outer rows of inner values per unit of the axis. */
static void rows_of(const ct_layer *l, const ct_tensor *top, int axis, size_t *outer,
                    size_t *inner) {
  if (l->layout == CT_NHWC && axis == 1) {
    size_t n, c, s;
    ct_tensor_ncs(top, &n, &c, &s);
    *outer = n * s;
    *inner = 1;
    return;
  }
  *outer = ct_tensor_count_range(top, 0, axis);
  *inner = ct_tensor_count_range(top, axis + 1, top->ndim);
}

static ct_status concat_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  int axis = ((concat_priv *)l->priv)->axis;
  size_t outer, inner;
  rows_of(l, top[0], axis, &outer, &inner);
  const size_t size = ct_dtype_size(top[0]->dtype);
  size_t top_row = (size_t)top[0]->shape[axis] * inner, offset = 0;
  for (int i = 0; i < l->nbottom; i++) {
    size_t row = (size_t)bottom[i]->shape[axis] * inner;
    ct_copy_rows_sized(l->ctx, size, outer, row, bottom[i]->data, row,
                       (char *)top[0]->data + offset * size, top_row);
    offset += row;
  }
  return CT_OK;
}

static void concat_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                            ct_tensor *const *bottom) {
  int axis = ((concat_priv *)l->priv)->axis;
  size_t outer, inner;
  rows_of(l, top[0], axis, &outer, &inner);
  const size_t size = ct_dtype_size(top[0]->dtype);
  size_t top_row = (size_t)top[0]->shape[axis] * inner, offset = 0;
  for (int i = 0; i < l->nbottom; i++) {
    size_t row = (size_t)bottom[i]->shape[axis] * inner;
    if (propagate_down[i])
      ct_copy_rows_sized(l->ctx, size, outer, row, (const char *)top[0]->diff + offset * size,
                         top_row, bottom[i]->diff, row);
    offset += row;
  }
}

static void concat_destroy(ct_layer *l) { free(l->priv); }

/* Device-neutral: block copies on the context's device. */
const ct_layer_ops ct_concat_ops = {
    .type = "Concat",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = -1, .min_tops = 1, .max_tops = 1,
    .setup = concat_setup,
    .reshape = concat_reshape,
    .backward_reads = ct_layer_reads_no_values,
    .forward_cpu = concat_forward,
    .backward_cpu = concat_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = concat_forward,
    .backward_gpu = concat_backward,
#endif
    .destroy = concat_destroy,
    .dtypes_cpu = CT_DTYPE_BIT(CT_BF16),
    .dtypes_gpu = CT_DTYPE_BIT(CT_BF16) | CT_DTYPE_BIT(CT_F16),
    .layouts_cpu = CT_LAYOUT_BIT(CT_NHWC),
    .layouts_gpu = CT_LAYOUT_BIT(CT_NHWC),
};
