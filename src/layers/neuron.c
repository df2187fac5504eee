#include "layers/neuron.h"
#include "math/typed.h"

#include <string.h>

#include "math/math.h"

ct_status ct_neuron_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  if (top[0] != bottom[0]) ct_tensor_reshape_like(top[0], bottom[0]);
  return CT_OK;
}

void ct_neuron_input_reshape(ct_neuron_input *in, ct_layer *l, const ct_tensor *bottom,
                             const ct_tensor *top) {
  if (top != bottom) {
    ct_tensor_free(in->copy);
    in->copy = NULL;
    return;
  }
  if (!in->copy) in->copy = ct_tensor_new(l->ctx->device, NULL);
  if (in->copy->dtype != bottom->dtype) ct_tensor_set_dtype(in->copy, bottom->dtype);
  ct_tensor_set_layout(in->copy, bottom->layout);
  ct_tensor_reshape_like(in->copy, bottom);
}

void ct_neuron_input_save(ct_neuron_input *in, ct_layer *l, const ct_tensor *bottom,
                          const ct_tensor *top) {
  if (top != bottom) return;
  CT_ASSERT(in->copy && in->copy->count == bottom->count);
  if (l->ctx->device == CT_DEVICE_CPU) {
    memcpy(in->copy->data, bottom->data, ct_tensor_bytes(bottom, bottom->count));
  } else if (bottom->dtype != CT_F32) {
    ct_dev_convert(l->ctx, bottom->count, bottom->dtype, bottom->data, bottom->dtype,
                   in->copy->data);
  } else {
#ifdef CORTADO_HAVE_CUDA
    ct_gpu_copy(l->ctx, bottom->count, bottom->data, in->copy->data);
#else
    CT_ASSERT(!"GPU layer in a CPU-only build");
#endif
  }
}

const float *ct_neuron_input_data(const ct_neuron_input *in, const ct_tensor *bottom,
                                  const ct_tensor *top) {
  if (top != bottom) return bottom->data;
  CT_ASSERT(in->copy);
  return in->copy->data;
}

int ct_neuron_input_state(const ct_neuron_input *in, ct_layer_region *out) {
  if (!in->copy || !in->copy->count) return 0;
  out[0] = (ct_layer_region){in->copy->data, ct_tensor_bytes(in->copy, in->copy->count)};
  return 1;
}

void ct_neuron_input_free(ct_neuron_input *in) {
  ct_tensor_free(in->copy);
  in->copy = NULL;
}
