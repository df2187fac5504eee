/* Clip: y = max(min, min(x, max)); dy/dx = 1 where min <= x <= max, else 0
 * (Caffe's convention at the bounds).  Backward needs x, so in place forward
 * keeps a copy. */
#include <math.h>
#include <stdlib.h>

#include "layers/clip.h"
#include "layers/layer.h"
#include "layers/neuron.h"

typedef struct {
  float min, max;
  ct_neuron_input input;
} clip_state;

static ct_status clip_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  const Caffe__ClipParameter *p = l->param->clip_param;
  if (!p) return ct_error_set(err, CT_ERR_INVALID, "clip_param (with min and max) must be given");
  clip_state *s = ct_xcalloc(1, sizeof *s);
  s->min = p->min;
  s->max = p->max;
  l->priv = s;
  return CT_OK;
}

static ct_status clip_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  clip_state *s = l->priv;
  ct_neuron_input_reshape(&s->input, l, bottom[0], top[0]);
  return ct_neuron_reshape(l, bottom, top, err);
}

static ct_status clip_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  clip_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  for (size_t i = 0; i < bottom[0]->count; i++) y[i] = fmaxf(s->min, fminf(x[i], s->max));
  return CT_OK;
}

static void clip_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  clip_state *s = l->priv;
  const float *x = ct_neuron_input_data(&s->input, bottom[0], top[0]);
  const float *dy = top[0]->diff;
  float *dx = bottom[0]->diff;
  for (size_t i = 0; i < bottom[0]->count; i++)
    dx[i] = (x[i] >= s->min && x[i] <= s->max) ? dy[i] : 0.0f;
}

static void clip_destroy(ct_layer *l) {
  clip_state *s = l->priv;
  if (!s) return;
  ct_neuron_input_free(&s->input);
  free(s);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status clip_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  clip_state *s = l->priv;
  ct_neuron_input_save(&s->input, l, bottom[0], top[0]);
  ct_clip_forward_gpu(l->ctx, bottom[0]->count, s->min, s->max, bottom[0]->data, top[0]->data);
  return CT_OK;
}

static void clip_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  clip_state *s = l->priv;
  ct_clip_backward_gpu(l->ctx, bottom[0]->count, s->min, s->max,
                       ct_neuron_input_data(&s->input, bottom[0], top[0]), top[0]->diff,
                       bottom[0]->diff);
}
#endif

/* In place, the copy of x its backward reads (layers/neuron.h). */
static int clip_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  (void)cap;
  return ct_neuron_input_state(&((clip_state *)l->priv)->input, out);
}

const ct_layer_ops ct_clip_ops = {
    .type = "Clip",
    .backward_state = clip_backward_state,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = clip_setup,
    .reshape = clip_reshape,
    .forward_cpu = clip_forward_cpu,
    .backward_cpu = clip_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = clip_forward_gpu,
    .backward_gpu = clip_backward_gpu,
#endif
    .destroy = clip_destroy,
};
