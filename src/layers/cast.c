/* Cast: top = bottom converted to the layer's element type and memory
 * order (l->layout), and in backward the top's gradient converted back to
 * the bottom's type and order.  The net puts one where a layer reads a blob
 * of another type or order than the one it computes in (net/net_dtype.c);
 * in a prototxt, the layer's forward_type names the type of its top
 * (NVCaffe's field) and cortado_layout its order.  Not in place.
 * Device-neutral: the conversion runs on the context's device. */
#include "layers/layer.h"
#include "math/typed.h"

static ct_status cast_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  if (top[0] == bottom[0])
    return ct_error_set(err, CT_ERR_INVALID,
                        "Cast cannot run in place (top '%s' is its bottom): the element types or "
                        "memory orders differ",
                        top[0]->name ? top[0]->name : "");
  return CT_OK;
}

static ct_status cast_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  ct_tensor_reshape_like(top[0], bottom[0]);
  return CT_OK;
}

static ct_status cast_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  size_t n, c, sp;
  ct_tensor_ncs(bottom[0], &n, &c, &sp);
  ct_dev_relayout(l->ctx, n, c, sp, bottom[0]->dtype, bottom[0]->layout, bottom[0]->data,
                  top[0]->dtype, top[0]->layout, top[0]->data);
  return CT_OK;
}

static void cast_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                          ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  size_t n, c, sp;
  ct_tensor_ncs(top[0], &n, &c, &sp);
  ct_dev_relayout(l->ctx, n, c, sp, top[0]->dtype, top[0]->layout, top[0]->diff,
                  bottom[0]->dtype, bottom[0]->layout, bottom[0]->diff);
}

#define ALL_TYPES (CT_DTYPE_BIT(CT_BF16) | CT_DTYPE_BIT(CT_F16))

const ct_layer_ops ct_cast_ops = {
    .type = "Cast",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = cast_setup,
    .reshape = cast_reshape,
    .backward_reads = ct_layer_reads_no_values,
    .forward_cpu = cast_forward,
    .backward_cpu = cast_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = cast_forward,
    .backward_gpu = cast_backward,
#endif
    .dtypes_cpu = ALL_TYPES,
    .dtypes_gpu = ALL_TYPES,
};
