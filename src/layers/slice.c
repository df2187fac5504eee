/* Slice: cuts its bottom along one axis (slice_param.axis, default 1, or the
 * legacy slice_dim) into its tops, at slice_param.slice_point (one fewer
 * than the tops, strictly increasing inside the axis) or in equal parts.
 * The reverse of Concat; block copies, device-neutral. */
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/shape_util.h"

typedef struct {
  int axis;
  int *size; /* (ntop) extent of each top along the axis */
} slice_priv;

static ct_status slice_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  const Caffe__SliceParameter *p = CT_PARAM_OR_DEFAULT(l, slice_param, CAFFE__SLICE_PARAMETER__INIT);
  if (p->has_axis && p->has_slice_dim)
    return ct_error_set(err, CT_ERR_INVALID, "slice_param: give either axis or slice_dim, not both");
  slice_priv *s = ct_xcalloc(1, sizeof *s);
  s->size = ct_xcalloc((size_t)l->ntop, sizeof *s->size);
  l->priv = s;
  return CT_OK;
}

/* The extents along the axis, from slice points or an equal split. */
static ct_status slice_sizes(ct_layer *l, const Caffe__SliceParameter *p, int dim, ct_error *err) {
  slice_priv *s = l->priv;
  int nt = l->ntop;
  if (p->n_slice_point == 0) {
    if (dim % nt != 0)
      return ct_error_set(err, CT_ERR_INVALID,
                          "%d tops do not evenly divide slice axis %d of size %d", nt, s->axis, dim);
    for (int i = 0; i < nt; i++) s->size[i] = dim / nt;
    return CT_OK;
  }
  if ((int)p->n_slice_point != nt - 1)
    return ct_error_set(err, CT_ERR_INVALID, "slice_param: %zu slice_point values for %d tops (need %d)",
                        p->n_slice_point, nt, nt - 1);
  if (nt > dim)
    return ct_error_set(err, CT_ERR_INVALID, "%d tops are more than slice axis %d of size %d", nt,
                        s->axis, dim);
  uint32_t prev = 0;
  for (size_t i = 0; i < p->n_slice_point; i++) {
    uint32_t at = p->slice_point[i];
    if (at <= prev)
      return ct_error_set(err, CT_ERR_INVALID,
                          "slice_param: slice points must increase from above 0: slice_point[%zu] "
                          "= %u after %u",
                          i, at, prev);
    if (at > (uint32_t)dim) /* at == dim leaves the last top empty, as in Caffe */
      return ct_error_set(err, CT_ERR_INVALID,
                          "slice_param: slice_point[%zu] = %u is past the end of slice axis %d of "
                          "size %d",
                          i, at, s->axis, dim);
    s->size[i] = (int)(at - prev);
    prev = at;
  }
  s->size[nt - 1] = dim - (int)prev;
  return CT_OK;
}

static ct_status slice_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  const Caffe__SliceParameter *p = CT_PARAM_OR_DEFAULT(l, slice_param, CAFFE__SLICE_PARAMETER__INIT);
  slice_priv *s = l->priv;
  const ct_tensor *b = bottom[0];
  if (p->has_slice_dim) {
    if (p->slice_dim >= (uint32_t)b->ndim)
      return ct_error_set(err, CT_ERR_INVALID, "slice_dim %u out of range for a %d-axis bottom",
                          p->slice_dim, b->ndim);
    s->axis = (int)p->slice_dim;
  } else {
    CT_TRY(ct_layer_axis(b, p->axis, "axis", &s->axis, err));
  }
  CT_TRY(slice_sizes(l, p, b->shape[s->axis], err));
  int shape[CT_MAX_AXES];
  for (int k = 0; k < b->ndim; k++) shape[k] = b->shape[k];
  for (int i = 0; i < l->ntop; i++) {
    shape[s->axis] = s->size[i];
    CT_TRY(ct_tensor_reshape(top[i], b->ndim, shape, err));
  }
  return CT_OK;
}

static ct_status slice_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  slice_priv *s = l->priv;
  const ct_tensor *b = bottom[0];
  size_t outer = ct_tensor_count_range(b, 0, s->axis);
  size_t inner = ct_tensor_count_range(b, s->axis + 1, b->ndim);
  size_t bottom_row = (size_t)b->shape[s->axis] * inner, offset = 0;
  for (int i = 0; i < l->ntop; i++) {
    size_t row = (size_t)s->size[i] * inner;
    ct_copy_rows(l->ctx, outer, row, ct_f32(b) + offset, bottom_row, ct_f32(top[i]), row);
    offset += row;
  }
  return CT_OK;
}

static void slice_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                           ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  slice_priv *s = l->priv;
  ct_tensor *b = bottom[0];
  size_t outer = ct_tensor_count_range(b, 0, s->axis);
  size_t inner = ct_tensor_count_range(b, s->axis + 1, b->ndim);
  size_t bottom_row = (size_t)b->shape[s->axis] * inner, offset = 0;
  for (int i = 0; i < l->ntop; i++) {
    size_t row = (size_t)s->size[i] * inner;
    ct_copy_rows(l->ctx, outer, row, ct_f32_diff(top[i]), row, ct_f32_diff(b) + offset, bottom_row);
    offset += row;
  }
}

static void slice_destroy(ct_layer *l) {
  slice_priv *s = l->priv;
  if (!s) return;
  free(s->size);
  free(s);
}

/* Device-neutral: block copies on the context's device. */
const ct_layer_ops ct_slice_ops = {
    .type = "Slice",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = -1,
    .setup = slice_setup,
    .reshape = slice_reshape,
    .forward_cpu = slice_forward,
    .backward_cpu = slice_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = slice_forward,
    .backward_gpu = slice_backward,
#endif
    .destroy = slice_destroy,
};
