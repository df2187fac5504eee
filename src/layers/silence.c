/* Silence: swallows its bottoms so that the net does not print or keep them
 * as outputs.  No tops.  Backward writes zeros into the bottoms' diffs. */
#include "layers/layer.h"
#include "math/math.h"

static ct_status silence_shape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  return CT_OK;
}

static ct_status silence_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  return CT_OK;
}

static void silence_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {
  for (int i = 0; i < l->nbottom; i++)
    if (propagate_down[i]) ct_dev_set(l->ctx, bottom[i]->count, 0.0f, bottom[i]->diff);
}

/* Device-neutral: a fill on the context's device. */
const ct_layer_ops ct_silence_ops = {
    .type = "Silence",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = -1, .min_tops = 0, .max_tops = 0,
    .setup = silence_shape,
    .reshape = silence_shape,
    .forward_cpu = silence_forward,
    .backward_cpu = silence_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = silence_forward,
    .backward_gpu = silence_backward,
#endif
};
