/* LSTM: Caffe's LSTMLayer, a long short-term memory over T steps of N
 * streams (bottoms, tops, parameters W_xc (4H, I), b_c (4H), [W_xc_static
 * (4H, S)], W_hc (4H, H), and the state carried between passes: see
 * recurrent.h).  Step t computes, with Caffe's gate order i, f, o, g:
 *
 *   gates_t = W_xc x_t + b_c [+ W_xc_static x_static] + W_hc (cont_t * h_t)
 *   c_{t+1}, h_{t+1} = LSTMUnit(c_t, gates_t, cont_t)      (lstm_unit.h)
 *
 * and the top is h_1 .. h_T.
 *
 * How it runs.  Caffe builds an unrolled net of 6 layers per step (Scale,
 * InnerProduct, Eltwise, LSTMUnit, ...).  Here the same arithmetic is a
 * direct time loop: the input term of every step is one GEMM over all T N
 * rows before the loop, each step is one GEMM (the recurrent term) and one
 * element-wise step (a kernel on a GPU) that also writes the next step's
 * cont-scaled input; backward mirrors it (one element-wise step and one GEMM
 * per step), and the parameter and input gradients are again single GEMMs
 * over all steps after the loop.  The activated gates replace the
 * pre-activations in place, since backward needs only those.  The same code
 * serves both devices through the ct_dev_* math; cuDNN's RNN is not used:
 * it has no per-stream cont resets inside a sequence. */
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/lstm_unit.h"
#include "layers/recurrent.h"
#include "math/math.h"


static ct_status lstm_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  ct_recurrent *r = ct_xcalloc(1, sizeof *r);
  l->priv = r;
  return ct_recurrent_setup(r, l, bottom, top, 2, 4, err);
}

static ct_status lstm_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  return ct_recurrent_reshape(l->priv, l, bottom, top, err);
}

static ct_status lstm_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  ct_recurrent *r = l->priv;
  const float *cont = bottom[1]->data;
  ct_recurrent_forward_begin(r, l, bottom);
  for (int t = 0; t < r->T; t++) {
    ct_recurrent_forward_step(r, l, t);
    const bool more = t + 1 < r->T;
    const ct_lstm_step_fwd a = {.N = r->N,
                                .D = r->H,
                                .cont = cont + (size_t)t * r->N,
                                .c_prev = ct_rec_row(r->cs, t),
                                .x = ct_rec_row(r->pre, t),
                                .acts = ct_rec_row(r->pre, t),
                                .c = ct_rec_row(r->cs, t + 1),
                                .h = ct_rec_row(r->hs, t + 1),
                                .cont_next = more ? cont + (size_t)(t + 1) * r->N : NULL,
                                .hc_next = more ? ct_rec_row(r->hc, t + 1) : NULL};
    ct_lstm_step_forward(l->ctx, &a);
  }
  ct_dev_copy(l->ctx, top[0]->count, ct_rec_row(r->hs, 1), top[0]->data);
  ct_recurrent_forward_end(r, l, top);
  return CT_OK;
}

static void lstm_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                          ct_tensor *const *bottom) {
  ct_recurrent *r = l->priv;
  const float *cont = bottom[1]->data;
  const size_t NH = (size_t)r->N * r->H;
  const float *dc_final = ct_recurrent_final_diff(r, top, 1);
  if (dc_final) ct_dev_copy(l->ctx, NH, dc_final, r->dc->data);
  else ct_dev_set(l->ctx, NH, 0.0f, r->dc->data);
  for (int t = r->T - 1; t >= 0; t--) {
    const bool last = t == r->T - 1;
    const ct_lstm_step_bwd a = {.N = r->N,
                                .D = r->H,
                                .cont = cont + (size_t)t * r->N,
                                .c_prev = ct_rec_row(r->cs, t),
                                .acts = ct_rec_row(r->pre, t),
                                .c = ct_rec_row(r->cs, t + 1),
                                .dh_a = top[0]->diff ? top[0]->diff + (size_t)t * NH : NULL,
                                .dh_b = last ? ct_recurrent_final_diff(r, top, 0) : r->dhc->data,
                                .cont_b = last ? NULL : cont + (size_t)(t + 1) * r->N,
                                .dc_in = r->dc->data,
                                .dc_prev = r->dc->data,
                                .dx = ct_rec_row(r->dpre, t)};
    ct_lstm_step_backward(l->ctx, &a);
    ct_recurrent_backward_step(r, l, t);
  }
  ct_recurrent_backward_end(r, l, propagate_down, bottom);
}

static void lstm_destroy(ct_layer *l) {
  ct_recurrent *r = l->priv;
  if (!r) return;
  ct_recurrent_free(r);
  free(r);
  l->priv = NULL;
}

const ct_layer_ops ct_lstm_ops = {
    .type = "LSTM",
    .min_bottoms = 2, .max_bottoms = 5, .min_tops = 1, .max_tops = 3,
    .no_force_backward_bottoms = 1u << 1,
    .setup = lstm_setup,
    .reshape = lstm_reshape,
    .forward_cpu = lstm_forward,
    .backward_cpu = lstm_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = lstm_forward,
    .backward_gpu = lstm_backward,
#endif
    .destroy = lstm_destroy,
};
