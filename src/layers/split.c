/* Split: hands one bottom to several consumers.  Every top is a copy of the
 * bottom; backward writes the sum of the tops' diffs into the bottom's diff.
 * The net inserts Split layers where one blob feeds several layers.  Not in
 * place.  Device-neutral (a copy and axpys on the context's device). */
#include "layers/layer.h"
#include "layers/shape_util.h"
#include "math/math.h"

static ct_status split_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  return CT_OK;
}

static ct_status split_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  for (int i = 0; i < l->ntop; i++) {
    if (top[i] == bottom[0])
      return ct_error_set(err, CT_ERR_INVALID,
                          "does not work in place (top %d is the bottom blob)", i);
    ct_tensor_reshape_like(top[i], bottom[0]);
  }
  return CT_OK;
}

static ct_status split_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  for (int i = 0; i < l->ntop; i++)
    ct_copy_rows(l->ctx, 1, bottom[0]->count, bottom[0]->data, 0, top[i]->data, 0);
  return CT_OK;
}

static void split_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                           ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  size_t n = bottom[0]->count;
  ct_copy_rows(l->ctx, 1, n, top[0]->diff, 0, bottom[0]->diff, 0);
  for (int i = 1; i < l->ntop; i++) ct_dev_axpy(l->ctx, n, 1.0f, top[i]->diff, bottom[0]->diff);
}

const ct_layer_ops ct_split_ops = {
    .type = "Split",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = -1,
    .setup = split_setup,
    .reshape = split_reshape,
    .forward_cpu = split_forward,
    .backward_cpu = split_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = split_forward,
    .backward_gpu = split_backward,
#endif
};
