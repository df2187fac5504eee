/* Shared pieces of the elementwise ("neuron") layers: one bottom, one top of
 * the same shape, which may be the same tensor (in place, as Caffe allows).
 *
 * A layer whose backward needs its input x loses x when it runs in place;
 * ct_neuron_input keeps a copy for it (Caffe's bottom_memory_). */
#ifndef CT_LAYERS_NEURON_H
#define CT_LAYERS_NEURON_H

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reshapes top[0] like bottom[0] (nothing to do in place).  Never fails. */
ct_status ct_neuron_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err);

typedef struct ct_neuron_input {
  ct_tensor *copy; /* shape of the bottom on the layer's device; NULL out of place */
} ct_neuron_input;

/* For reshape: makes (or reshapes) the copy when top is bottom, and frees it
 * when the layer no longer runs in place. */
void ct_neuron_input_reshape(ct_neuron_input *in, ct_layer *l, const ct_tensor *bottom,
                             const ct_tensor *top);
/* For forward, before top is written: copies x aside when in place.  On a GPU
 * the copy is queued on the context's stream. */
void ct_neuron_input_save(ct_neuron_input *in, ct_layer *l, const ct_tensor *bottom,
                          const ct_tensor *top);
/* For backward: the forward input x (count values on the layer's device). */
const float *ct_neuron_input_data(const ct_neuron_input *in, const ct_tensor *bottom,
                                  const ct_tensor *top);
void ct_neuron_input_free(ct_neuron_input *in);
/* For ops->backward_state: the copy of x, when the layer runs in place
 * (into out[0]; returns 1), else 0. */
int ct_neuron_input_state(const ct_neuron_input *in, ct_layer_region *out);

#ifdef __cplusplus
}
#endif

#endif
