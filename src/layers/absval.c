/* AbsVal: y = |x|, dy/dx = sign(x) (0 at 0).  Like Caffe, it refuses to run in
 * place: backward needs the sign of x. */
#include <math.h>

#include "layers/absval.h"
#include "layers/layer.h"
#include "layers/neuron.h"

static ct_status absval_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  if (top[0] == bottom[0])
    return ct_error_set(err, CT_ERR_INVALID,
                        "AbsVal cannot run in place (top '%s' is its bottom): backward needs the "
                        "sign of the input", top[0]->name ? top[0]->name : "");
  return CT_OK;
}

static ct_status absval_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                    ct_error *err) {
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  for (size_t i = 0; i < bottom[0]->count; i++) y[i] = fabsf(x[i]);
  return CT_OK;
}

static void absval_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  const float *x = bottom[0]->data, *dy = top[0]->diff;
  float *dx = bottom[0]->diff;
  for (size_t i = 0; i < bottom[0]->count; i++)
    dx[i] = x[i] > 0 ? dy[i] : (x[i] < 0 ? -dy[i] : 0.0f);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status absval_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                    ct_error *err) {
  ct_absval_forward_gpu(l->ctx, bottom[0]->count, bottom[0]->data, top[0]->data);
  return CT_OK;
}

static void absval_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  ct_absval_backward_gpu(l->ctx, bottom[0]->count, bottom[0]->data, top[0]->diff, bottom[0]->diff);
}
#endif

const ct_layer_ops ct_absval_ops = {
    .type = "AbsVal",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = absval_setup,
    .reshape = ct_neuron_reshape,
    .forward_cpu = absval_forward_cpu,
    .backward_cpu = absval_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = absval_forward_gpu,
    .backward_gpu = absval_backward_gpu,
#endif
};
