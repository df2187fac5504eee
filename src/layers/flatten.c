/* Flatten: merges axes flatten_param.axis (default 1) to end_axis (default
 * -1, the last) into one, e.g. (N, C, H, W) to (N, C*H*W).  The top is a view
 * of the bottom's data and diff (no copy, as in Caffe), so forward and
 * backward do nothing.  Not in place. */
#include "layers/layer.h"
#include "layers/shape_util.h"

static ct_status flatten_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  if (top[0] == bottom[0])
    return ct_error_set(err, CT_ERR_INVALID, "does not work in place (top and bottom are one blob)");
  return CT_OK;
}

static ct_status flatten_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  const Caffe__FlattenParameter *p =
      CT_PARAM_OR_DEFAULT(l, flatten_param, CAFFE__FLATTEN_PARAMETER__INIT);
  ct_tensor *b = bottom[0];
  int start, end;
  CT_TRY(ct_layer_axis(b, p->axis, "axis", &start, err));
  CT_TRY(ct_layer_axis(b, p->end_axis, "end_axis", &end, err));
  /* end == start - 1 merges nothing and inserts an axis of 1, as Caffe does. */
  if (end < start - 1)
    return ct_error_set(err, CT_ERR_INVALID, "end_axis %d (axis %d) comes before axis %d (axis %d)",
                        p->end_axis, end, p->axis, start);
  int shape[CT_MAX_AXES], n = 0;
  for (int k = 0; k < start; k++) shape[n++] = b->shape[k];
  shape[n++] = (int)ct_tensor_count_range(b, start, end + 1);
  for (int k = end + 1; k < b->ndim; k++) shape[n++] = b->shape[k];
  ct_layer_share_top(top[0], b, n, shape);
  return CT_OK;
}

static ct_status flatten_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  return CT_OK;
}

static void flatten_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {}

/* Device-neutral: the top is a view. */
const ct_layer_ops ct_flatten_ops = {
    .type = "Flatten",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = flatten_setup,
    .reshape = flatten_reshape,
    .forward_cpu = flatten_forward,
    .backward_cpu = flatten_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = flatten_forward,
    .backward_gpu = flatten_backward,
#endif
};
