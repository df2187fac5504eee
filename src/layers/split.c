/* Split: hands one bottom to several consumers, as Caffe's SplitLayer does.
 * Every top views the bottom's data (no copy: forward does no device work)
 * and keeps a diff of its own; backward writes the sum of the tops' diffs
 * into the bottom's diff.  The net inserts Split layers where one blob feeds
 * several layers.  Not in place.  As in Caffe, a consumer that works in
 * place on a top changes the values every other top sees.  Device-neutral
 * (a copy and axpys on the context's device), in any element type (its
 * bottom's). */
#include "layers/layer.h"
#include "layers/shape_util.h"
#include "math/math.h"
#include "math/typed.h"

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
    ct_tensor_alias_data(top[i], bottom[0]);
  }
  return CT_OK;
}

/* Host bookkeeping only: re-points a top whose bottom was reshaped or moved
 * since the net's last reshape (a layer that sets its top shapes in forward,
 * such as Filter). */
static ct_status split_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  for (int i = 0; i < l->ntop; i++)
    if (top[i]->data != bottom[0]->data || !ct_tensor_same_shape(top[i], bottom[0]))
      ct_tensor_alias_data(top[i], bottom[0]);
  return CT_OK;
}

/* The first two tops' diffs are added in one pass (the usual two-way split). */
static void split_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                           ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  size_t n = bottom[0]->count;
  const ct_dtype t = bottom[0]->dtype;
  if (t != CT_F32) {
    if (l->ntop == 1) ct_dev_convert(l->ctx, n, t, top[0]->diff, t, bottom[0]->diff);
    else ct_dev_add_typed(l->ctx, t, n, top[0]->diff, top[1]->diff, bottom[0]->diff);
    for (int i = 2; i < l->ntop; i++) ct_dev_acc_typed(l->ctx, t, n, top[i]->diff, bottom[0]->diff);
    return;
  }
  float *dx = bottom[0]->diff;
  int i = 1;
  if (l->ntop == 1) {
    ct_copy_rows(l->ctx, 1, n, top[0]->diff, 0, dx, 0);
  } else {
#ifdef CORTADO_HAVE_CUDA
    if (l->ctx->device != CT_DEVICE_CPU) ct_gpu_add(l->ctx, n, top[0]->diff, top[1]->diff, dx);
    else
#endif
      ct_cpu_add(n, top[0]->diff, top[1]->diff, dx);
    i = 2;
  }
  for (; i < l->ntop; i++) ct_dev_axpy(l->ctx, n, 1.0f, top[i]->diff, dx);
}

const ct_layer_ops ct_split_ops = {
    .type = "Split",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = -1,
    .setup = split_setup,
    .reshape = split_reshape,
    .backward_reads = ct_layer_reads_no_values,
    .forward_cpu = split_forward,
    .backward_cpu = split_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = split_forward,
    .backward_gpu = split_backward,
#endif
    .dtypes_cpu = CT_DTYPES_ANY,
    .dtypes_gpu = CT_DTYPES_ANY,
    .layouts_cpu = CT_LAYOUTS_ANY, /* element-wise */
    .layouts_gpu = CT_LAYOUTS_ANY,
};
