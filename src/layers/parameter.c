/* Parameter: one learnable blob of parameter_param.shape (zeros until a
 * .caffemodel or the solver changes it), exposed as the only top.
 *
 * Caffe makes the top share the blob's data and diff.  Here forward copies
 * the values into the top and backward adds the top's diff into the
 * parameter's diff, so that the parameter's gradient accumulates like every
 * other learnable blob (iter_size, shared weights) while the net keeps its
 * parameters in flat buffers.  No bottoms. */
#include "layers/layer.h"
#include "layers/shape_util.h"
#include "math/math.h"

static ct_status parameter_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  const Caffe__ParameterParameter *p =
      CT_PARAM_OR_DEFAULT(l, parameter_param, CAFFE__PARAMETER_PARAMETER__INIT);
  int ndim, dims[CT_MAX_AXES];
  CT_TRY(ct_blob_shape_dims(p->shape, "parameter_param.shape", &ndim, dims, err));
  CT_TRY(ct_tensor_reshape(top[0], ndim, dims, err));
  ct_layer_add_param(l, ndim, dims); /* zeroed, as Caffe's fresh blob */
  return CT_OK;
}

static ct_status parameter_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  ct_tensor_reshape_like(top[0], l->params[0]);
  return CT_OK;
}

static ct_status parameter_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  ct_copy_rows(l->ctx, 1, top[0]->count, l->params[0]->data, 0, top[0]->data, 0);
  return CT_OK;
}

static void parameter_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  if (!l->param_propagate_down[0]) return;
  ct_dev_axpy(l->ctx, top[0]->count, 1.0f, top[0]->diff, l->params[0]->diff);
}

/* Device-neutral: a copy and an axpy on the context's device. */
const ct_layer_ops ct_parameter_ops = {
    .type = "Parameter",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 0, .max_bottoms = 0, .min_tops = 1, .max_tops = 1,
    .setup = parameter_setup,
    .reshape = parameter_reshape,
    .forward_cpu = parameter_forward,
    .backward_cpu = parameter_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = parameter_forward,
    .backward_gpu = parameter_backward,
#endif
};
