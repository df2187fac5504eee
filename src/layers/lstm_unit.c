/* LSTMUnit: one LSTM time step as its own layer (Caffe's LSTMUnitLayer, the
 * step its LSTM layer repeats), the math of lstm_unit.h.
 *
 * Bottoms: c_prev (1, N, D), x (1, N, 4D) the gate pre-activations in
 * Caffe's order i, f, o, g, and cont (1, N) the sequence-continuation
 * indicators.  Tops: c (1, N, D) and h (1, N, D).  No parameters.  cont gets
 * no gradient, even under force_backward (Caffe's AllowForceBackward). */
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/lstm_unit.h"

typedef struct lstm_unit_priv {
  int N, D;
  ct_tensor *acts; /* (1, N, 4D) the activated gates of the last forward */
} lstm_unit_priv;

void ct_lstm_step_forward(ct_context *ctx, const ct_lstm_step_fwd *a) {
  if (ctx->device != CT_DEVICE_CPU) {
#ifdef CORTADO_HAVE_CUDA
    ct_lstm_step_forward_gpu(ctx, a);
    return;
#endif
  }
  const size_t n = (size_t)a->N * a->D;
  for (size_t k = 0; k < n; k++) ct_lstm_step_forward_cell(a, k);
}

void ct_lstm_step_backward(ct_context *ctx, const ct_lstm_step_bwd *a) {
  if (ctx->device != CT_DEVICE_CPU) {
#ifdef CORTADO_HAVE_CUDA
    ct_lstm_step_backward_gpu(ctx, a);
    return;
#endif
  }
  const size_t n = (size_t)a->N * a->D;
  for (size_t k = 0; k < n; k++) ct_lstm_step_backward_cell(a, k);
}

static ct_status unit_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  for (int t = 0; t < 2; t++)
    for (int b = 0; b < 3; b++)
      if (top[t] == bottom[b])
        return ct_error_set(err, CT_ERR_INVALID,
                            "LSTMUnit cannot run in place (top %d is bottom %d): backward needs "
                            "the bottoms and the cell top as forward saw them",
                            t, b);
  lstm_unit_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->acts = ct_tensor_new(l->ctx->device, NULL);
  return CT_OK;
}

static ct_status unit_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  lstm_unit_priv *p = l->priv;
  static const char *const names[3] = {"c_prev", "x", "cont"};
  char buf[128];
  const int N = bottom[0]->ndim >= 2 ? bottom[0]->shape[1] : -1;
  for (int i = 0; i < 3; i++) {
    const ct_tensor *b = bottom[i];
    const int want = i == 2 ? 2 : 3;
    if (b->ndim != want || b->shape[0] != 1 || b->shape[1] != N)
      return ct_error_set(err, CT_ERR_INVALID,
                          "bottom %d (%s) must have shape (1, N%s) with the N of bottom 0, got %s",
                          i, names[i], i == 2 ? "" : i == 1 ? ", 4D" : ", D",
                          ct_tensor_shape_string(b, buf, sizeof buf));
  }
  const int D = bottom[0]->shape[2];
  if ((size_t)bottom[1]->shape[2] != 4 * (size_t)D)
    return ct_error_set(err, CT_ERR_INVALID,
                        "bottom 1 (x) must hold 4 gates of the %d cells of bottom 0 (4 x %d = %d "
                        "values per stream), got %d",
                        D, D, 4 * D, bottom[1]->shape[2]);
  p->N = N;
  p->D = D;
  int shape[3] = {1, N, 4 * D};
  CT_TRY(ct_tensor_reshape(p->acts, 3, shape, err));
  CT_TRY(ct_tensor_reshape(top[0], 3, bottom[0]->shape, err));
  return ct_tensor_reshape(top[1], 3, bottom[0]->shape, err);
}

static ct_status unit_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  lstm_unit_priv *p = l->priv;
  const ct_lstm_step_fwd a = {.N = p->N,
                              .D = p->D,
                              .cont = bottom[2]->data,
                              .c_prev = bottom[0]->data,
                              .x = bottom[1]->data,
                              .acts = p->acts->data,
                              .c = top[0]->data,
                              .h = top[1]->data};
  ct_lstm_step_forward(l->ctx, &a);
  return CT_OK;
}

static void unit_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                          ct_tensor *const *bottom) {
  lstm_unit_priv *p = l->priv;
  if (!propagate_down[0] && !propagate_down[1]) return;
  const ct_lstm_step_bwd a = {.N = p->N,
                              .D = p->D,
                              .cont = bottom[2]->data,
                              .c_prev = bottom[0]->data,
                              .acts = p->acts->data,
                              .c = top[0]->data,
                              .dh_a = top[1]->diff,
                              .dc_in = top[0]->diff,
                              .dc_prev = propagate_down[0] ? bottom[0]->diff : NULL,
                              .dx = propagate_down[1] ? bottom[1]->diff : NULL};
  ct_lstm_step_backward(l->ctx, &a);
}

static void unit_destroy(ct_layer *l) {
  lstm_unit_priv *p = l->priv;
  if (!p) return;
  ct_tensor_free(p->acts);
  free(p);
  l->priv = NULL;
}

const ct_layer_ops ct_lstm_unit_ops = {
    .type = "LSTMUnit",
    .min_bottoms = 3, .max_bottoms = 3, .min_tops = 2, .max_tops = 2,
    .no_force_backward_bottoms = 1u << 2,
    .setup = unit_setup,
    .reshape = unit_reshape,
    .forward_cpu = unit_forward,
    .backward_cpu = unit_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = unit_forward,
    .backward_gpu = unit_backward,
#endif
    .destroy = unit_destroy,
};
