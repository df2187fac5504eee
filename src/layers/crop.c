/* Crop: cuts bottom 0 down to the shape of bottom 1 (the reference) on axes
 * crop_param.axis (default 2) and after; earlier axes are kept.  offset
 * gives where the window starts: none (0), one for every cropped axis, or
 * one per cropped axis.  Backward puts the top's diff back into the window
 * of bottom 0's diff (zeros elsewhere); bottom 1 only lends its shape, so
 * its gradient is zero. */
#include <stdlib.h>

#include "layers/crop.h"
#include "layers/layer.h"
#include "layers/shape_util.h"
#include "math/math.h"

static ct_status crop_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  l->priv = ct_xcalloc(1, sizeof(ct_crop_geometry));
  return CT_OK;
}

static ct_status crop_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  const Caffe__CropParameter *p = CT_PARAM_OR_DEFAULT(l, crop_param, CAFFE__CROP_PARAMETER__INIT);
  ct_crop_geometry *g = l->priv;
  const ct_tensor *b = bottom[0], *ref = bottom[1];
  int axis;
  CT_TRY(ct_layer_axis(b, p->axis, "axis", &axis, err));
  if (p->n_offset > 1 && (int)p->n_offset != b->ndim - axis)
    return ct_error_set(err, CT_ERR_INVALID,
                        "crop_param: %zu offset values for the %d axes from axis %d on (give one, "
                        "or one per cropped axis)",
                        p->n_offset, b->ndim - axis, axis);
  if (ref->ndim < b->ndim)
    return ct_error_set(err, CT_ERR_INVALID,
                        "reference bottom 1 has %d axes, fewer than the %d of bottom 0", ref->ndim,
                        b->ndim);
  int shape[CT_MAX_AXES];
  g->ndim = b->ndim;
  for (int i = 0; i < b->ndim; i++) {
    long long off = 0;
    shape[i] = b->shape[i];
    if (i >= axis) {
      shape[i] = ref->shape[i];
      if (p->n_offset == 1) off = p->offset[0];
      else if (p->n_offset > 1) off = p->offset[i - axis];
      if (off + shape[i] > b->shape[i])
        return ct_error_set(err, CT_ERR_INVALID,
                            "the crop of axis %d is out of bounds: size %d at offset %lld does not "
                            "fit in %d",
                            i, shape[i], off, b->shape[i]);
    }
    g->offset[i] = (int)off;
  }
  CT_TRY(ct_tensor_reshape(top[0], b->ndim, shape, err));
  for (int i = 0; i < b->ndim; i++) {
    g->top_shape[i] = shape[i];
    g->bottom_stride[i] = (long long)ct_tensor_count_range(b, i + 1, b->ndim);
  }
  return CT_OK;
}

/* Index in bottom 0 of the first element of top row r (all axes but the last). */
static size_t bottom_row_start(const ct_crop_geometry *g, size_t r) {
  long long at = g->offset[g->ndim - 1];
  for (int k = g->ndim - 2; k >= 0; k--) {
    long long i = (long long)(r % (size_t)g->top_shape[k]);
    r /= (size_t)g->top_shape[k];
    at += (i + g->offset[k]) * g->bottom_stride[k];
  }
  return (size_t)at;
}

static ct_status crop_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  const ct_crop_geometry *g = l->priv;
  if (top[0]->count == 0) return CT_OK;
  size_t w = (size_t)g->top_shape[g->ndim - 1], rows = top[0]->count / w;
  for (size_t r = 0; r < rows; r++)
    ct_cpu_copy(w, ct_f32(bottom[0]) + bottom_row_start(g, r), ct_f32(top[0]) + r * w);
  return CT_OK;
}

static void crop_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  const ct_crop_geometry *g = l->priv;
  if (propagate_down[1]) ct_cpu_set(bottom[1]->count, 0.0f, bottom[1]->diff);
  if (!propagate_down[0]) return;
  ct_cpu_set(bottom[0]->count, 0.0f, bottom[0]->diff);
  if (top[0]->count == 0) return;
  size_t w = (size_t)g->top_shape[g->ndim - 1], rows = top[0]->count / w;
  for (size_t r = 0; r < rows; r++)
    ct_cpu_copy(w, ct_f32_diff(top[0]) + r * w, ct_f32_diff(bottom[0]) + bottom_row_start(g, r));
}

#ifdef CORTADO_HAVE_CUDA
static ct_status crop_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  ct_crop_forward_gpu(l->ctx, l->priv, top[0]->count, bottom[0]->data, top[0]->data);
  return CT_OK;
}

static void crop_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  if (propagate_down[1]) ct_gpu_set(l->ctx, bottom[1]->count, 0.0f, bottom[1]->diff);
  if (!propagate_down[0]) return;
  ct_gpu_set(l->ctx, bottom[0]->count, 0.0f, bottom[0]->diff);
  ct_crop_backward_gpu(l->ctx, l->priv, top[0]->count, top[0]->diff, bottom[0]->diff);
}
#endif

static void crop_destroy(ct_layer *l) { free(l->priv); }

const ct_layer_ops ct_crop_ops = {
    .type = "Crop",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 2, .max_bottoms = 2, .min_tops = 1, .max_tops = 1,
    .no_force_backward_bottoms = 1u << 1,
    .setup = crop_setup,
    .reshape = crop_reshape,
    .forward_cpu = crop_forward_cpu,
    .backward_cpu = crop_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = crop_forward_gpu,
    .backward_gpu = crop_backward_gpu,
#endif
    .destroy = crop_destroy,
};
