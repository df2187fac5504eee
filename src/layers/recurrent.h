/* What the recurrent layers LSTM (lstm.c) and RNN (rnn.c) share, Caffe's
 * RecurrentLayer: bottoms and tops, recurrent_param, the parameters, the
 * state carried from one forward pass to the next, and every product that
 * does not sit inside the time loop.
 *
 * Glossary: T time steps, N independent streams, H = num_output, G the
 * width of a step's pre-activation row (4H for LSTM's four gates, H for
 * RNN), I values of x per (step, stream), S values of x_static per stream.
 *
 * Bottoms, in Caffe's order:
 *   x (T, N, ...)     the input sequence (flattened to I from axis 2)
 *   cont (T, N)       sequence continuation: 0 at the first step of a new
 *                     sequence (the state before it is dropped), 1 after;
 *                     never gets a gradient
 *   x_static (N, ...) optional: one more input for every step (flattened to
 *                     S from axis 1)
 *   h_0 (1, N, H) [, c_0 (1, N, H)]  with expose_hidden: the initial state
 * Tops: the output (T, N, H) (LSTM's h, RNN's o), then with expose_hidden the
 *   final state h_T (1, N, H) [, c_T (1, N, H)].
 *
 * Parameters, Caffe's blobs in Caffe's order and shapes (the order in which
 * Caffe's unrolled net declares them), so that .caffemodel files trained by
 * Caffe load as they are:
 *   0 W_x (G, I), 1 b (G), [2 W_static (G, S)], then W_h (G, H)
 * (LSTM: W_xc, b_c, W_xc_static, W_hc; RNN: W_xh, b_h, W_xh_static, W_hh,
 * and RNN appends W_ho (H, H), b_o (H)).  weight_filler fills the W, and
 * bias_filler the b.
 *
 * The recurrence of step t (0-based; h_t is the state after step t - 1):
 *   pre_t = W_x x_t + b [+ W_static x_static] + W_h (cont_t * h_t)
 * then the type's element-wise step makes h_{t+1} (and c_{t+1}) from pre_t.
 *
 * State between passes, as Caffe carries it: without expose_hidden, a
 * forward starts from the final state of the previous forward (zeros at
 * first, and again whenever N changes), so consecutive batches of a long
 * stream continue each other and cont = 0 marks where a sequence restarts;
 * with expose_hidden the initial state comes from the bottoms and the final
 * state goes to the extra tops.
 *
 * Gradients stop at the batch's first step as in Caffe (truncated
 * backpropagation through time).  Where Caffe leaves something undefined,
 * Cortado computes the true gradient: the gradients of the h_0 / c_0
 * bottoms (Caffe never writes them) and the contribution of the h_T / c_T
 * tops' gradients (Caffe ignores them); with no loss on those tops and
 * nothing below h_0 / c_0, both are Caffe's gradients exactly.
 *
 * Memory: besides the tops, (T+1) N H values for each state and 2 T N G for
 * the pre-activations and their gradients. */
#ifndef CT_LAYERS_RECURRENT_H
#define CT_LAYERS_RECURRENT_H

#include <stdbool.h>

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_recurrent {
  int nstate;        /* states carried: 2 (h, c) for LSTM, 1 (h) for RNN */
  int gates;         /* G / H: 4 for LSTM, 1 for RNN */
  int T, N, H, G, I, S; /* S is 0 without x_static */
  bool expose;       /* recurrent_param.expose_hidden */
  bool debug;        /* recurrent_param.debug_info */
  int b_static;      /* bottom index of x_static, -1 when none */
  int b_state;       /* bottom index of h_0 (expose_hidden) */
  int p_static;      /* parameter index of W_static, -1 when none */
  int p_recur;       /* parameter index of W_h */
  ct_tensor *pre;    /* (T, N, G) pre-activations (LSTM: the activated gates once stepped) */
  ct_tensor *dpre;   /* (T, N, G) their gradients */
  ct_tensor *hs;     /* (T+1, N, H) h_0 .. h_T */
  ct_tensor *cs;     /* (T+1, N, H) c_0 .. c_T (LSTM) */
  ct_tensor *hc;     /* (T, N, H) cont_t * h_t: step t's recurrent input */
  ct_tensor *dhc;    /* (N, H) the gradient of the recurrent input of the step just done */
  ct_tensor *dc;     /* (N, H) LSTM: the gradient reaching c_{t+1} */
  ct_tensor *ones;   /* (T N) ones, for the bias and the sums over steps */
  ct_tensor *stat;   /* (N, G) W_static x_static, and its gradient summed over steps */
} ct_recurrent;

/* Setup for a type carrying nstate states with G = gates * num_output:
 * checks the bottom and top counts against expose_hidden (the static input
 * is there when one bottom more than the minimum is given), reads
 * recurrent_param (num_output must be positive), and declares and fills
 * the parameters W_x, b, [W_static,] W_h.  Stores the state in *r (owned
 * by the caller's l->priv).  Errors (CT_ERR_INVALID) name the field or the
 * bottom. */
ct_status ct_recurrent_setup(ct_recurrent *r, ct_layer *l, ct_tensor *const *bottom,
                             ct_tensor *const *top, int nstate, int gates, ct_error *err);
/* Checks the bottoms' shapes (x at least 2 axes, cont (T, N), x_static
 * (N, S), h_0 / c_0 (1, N, H)), shapes the tops and the buffers; zeroes the
 * carried state when T or N changed. */
ct_status ct_recurrent_reshape(ct_recurrent *r, ct_layer *l, ct_tensor *const *bottom,
                               ct_tensor *const *top, ct_error *err);
void ct_recurrent_free(ct_recurrent *r);

/* Forward, around the type's time loop:
 *   begin   pre = W_x x + b [+ W_static x_static] for every step, the
 *           initial state into hs[0] (cs[0]) and cont_0 * h_0 into hc[0];
 *   step    pre_t += W_h hc_t (before the type's step t, which writes
 *           hs[t+1], and hc[t+1] = cont_{t+1} * h_{t+1} when t + 1 < T);
 *   end     the final state into the h_T / c_T tops (expose_hidden), and
 *           the debug_info lines. */
void ct_recurrent_forward_begin(ct_recurrent *r, ct_layer *l, ct_tensor *const *bottom);
void ct_recurrent_forward_step(ct_recurrent *r, ct_layer *l, int t);
void ct_recurrent_forward_end(ct_recurrent *r, ct_layer *l, ct_tensor *const *top);

/* Backward, around the type's time loop from t = T-1 down to 0:
 *   final_dh / final_dc  the gradients of the h_T / c_T tops (NULL without
 *           expose_hidden or without a diff);
 *   step    after the type filled dpre_t: dhc = W_h^T dpre_t, the gradient
 *           of hc_t (so h_t's gradient from step t is cont_t * dhc);
 *   end     the parameter gradients (accumulated), and the bottom gradients
 *           whose propagate_down is set: x, x_static, h_0 = cont_0 * dhc,
 *           c_0 = dc. */
const float *ct_recurrent_final_diff(const ct_recurrent *r, ct_tensor *const *top, int state);
void ct_recurrent_backward_step(ct_recurrent *r, ct_layer *l, int t);
void ct_recurrent_backward_end(ct_recurrent *r, ct_layer *l, const bool *propagate_down,
                               ct_tensor *const *bottom);

/* Row `row` of a (rows, N, D) buffer: step row's (N, D) slice. */
static inline float *ct_rec_row(const ct_tensor *t, int row) {
  return t->data + (size_t)row * (size_t)t->shape[1] * (size_t)t->shape[2];
}

/* y (N, D) = cont (N) * x (N, D) row by row, on ctx's device. */
void ct_scale_rows(ct_context *ctx, int N, int D, const float *cont, const float *x, float *y);
#ifdef CORTADO_HAVE_CUDA
void ct_scale_rows_gpu(ct_context *ctx, int N, int D, const float *cont, const float *x, float *y);
#endif

/* debug_info: one line "[Forward] Layer NAME, WHAT data: |mean|" (or
 * "[Backward] ... diff: ") for n values on l's device. */
void ct_recurrent_debug(const ct_layer *l, const char *pass, const char *what, const char *kind,
                        const float *values, size_t n);

#ifdef __cplusplus
}
#endif

#endif
