/* Input: the net's inputs.  No bottoms; its tops are blobs the caller fills
 * (deploy nets, tests).
 * input_param.shape gives their shapes: none (the caller shapes them), one
 * for every top, or one per top.  Forward and backward do nothing. */
#include <stdio.h>

#include "layers/layer.h"
#include "layers/shape_util.h"

static ct_status input_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  const Caffe__InputParameter *p =
      CT_PARAM_OR_DEFAULT(l, input_param, CAFFE__INPUT_PARAMETER__INIT);
  if (p->n_shape > 1 && (int)p->n_shape != l->ntop)
    return ct_error_set(err, CT_ERR_INVALID,
                        "input_param: give 'shape' once, once per top or not at all: %d tops vs "
                        "%zu shapes",
                        l->ntop, p->n_shape);
  if (p->n_shape == 0) return CT_OK;
  for (int i = 0; i < l->ntop; i++) {
    size_t k = p->n_shape == 1 ? 0 : (size_t)i;
    char field[48];
    int ndim, dims[CT_MAX_AXES];
    snprintf(field, sizeof field, "input_param.shape[%zu]", k);
    CT_TRY(ct_blob_shape_dims(p->shape[k], field, &ndim, dims, err));
    CT_TRY(ct_tensor_reshape(top[i], ndim, dims, err));
  }
  return CT_OK;
}

/* The tops keep whatever shape the caller gave them. */
static ct_status input_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  return CT_OK;
}

static ct_status input_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  return CT_OK;
}

/* Device-neutral: nothing runs, so the same function serves both devices. */
const ct_layer_ops ct_input_ops = {
    .type = "Input",
    .min_bottoms = 0, .max_bottoms = 0, .min_tops = 1, .max_tops = -1,
    .flags = CT_LAYER_NO_BACKWARD,
    .setup = input_setup,
    .reshape = input_reshape,
    .forward_cpu = input_forward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = input_forward,
#endif
};
