/* One LSTM time step, element-wise (Caffe's LSTMUnit), shared by the LSTMUnit
 * layer (lstm_unit.c) and the LSTM layer's time loop (lstm.c).
 *
 * Glossary: N streams, D cells; a gate row (4D) holds the pre-activations of
 * Caffe's four gates in Caffe's order i, f, o, g (input, forget, output,
 * candidate), each D wide.  For stream n and cell d:
 *
 *   i = sigmoid(x_i)   f = sigmoid(x_f)   o = sigmoid(x_o)   g = tanh(x_g)
 *   c = cont[n] * f * c_prev + i * g
 *   h = o * tanh(c)
 *
 * cont is the sequence-continuation indicator: 0 starts a new sequence (the
 * previous cell is forgotten), 1 continues it.  Caffe has no clipping here:
 * cont scales the forget term, nothing else.
 *
 * Backward, with dc the gradient reaching c from above and dh the one
 * reaching h:
 *
 *   dc_t  = dc + dh * o * (1 - tanh(c)^2)          (the cell's whole gradient)
 *   dc_prev = cont * f * dc_t
 *   dx_i = dc_t * g * i (1 - i)      dx_f = dc_t * cont * c_prev * f (1 - f)
 *   dx_o = dh * tanh(c) * o (1 - o)  dx_g = dc_t * i * (1 - g^2)
 *
 * which is Caffe's GPU arithmetic (its host code writes the forget term as
 * (cont f)(1 - cont f); both agree for the 0/1 indicators Caffe documents).
 *
 * The inline functions below are the math of one (n, d) pair, compiled into
 * the host loops and the CUDA kernels alike; the step functions run one time
 * step on ctx's device (on a GPU, one kernel on ctx's stream). */
#ifndef CT_LAYERS_LSTM_UNIT_H
#define CT_LAYERS_LSTM_UNIT_H

#include <math.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define CT_LSTM_HD __host__ __device__
#else
#define CT_LSTM_HD
#endif

static inline CT_LSTM_HD float ct_lstm_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* One cell: the activated gates of pre-activations x[4] (i, f, o, g) into
 * act[4] (act may be x); returns c, *h receives h. */
static inline CT_LSTM_HD float ct_lstm_cell_forward(float cont, float c_prev, const float x[4],
                                                    float act[4], float *h) {
  const float i = ct_lstm_sigmoid(x[0]), f = ct_lstm_sigmoid(x[1]);
  const float o = ct_lstm_sigmoid(x[2]), g = tanhf(x[3]);
  act[0] = i;
  act[1] = f;
  act[2] = o;
  act[3] = g;
  const float c = cont * f * c_prev + i * g;
  *h = o * tanhf(c);
  return c;
}

/* One cell: the gradients of its four pre-activations into dx[4] from its
 * activated gates act[4], its cell values and the gradients dh, dc reaching
 * h and c; returns the gradient of c_prev. */
static inline CT_LSTM_HD float ct_lstm_cell_backward(float cont, float c_prev, float c,
                                                     const float act[4], float dh, float dc,
                                                     float dx[4]) {
  const float i = act[0], f = act[1], o = act[2], g = act[3];
  const float tc = tanhf(c);
  const float dct = dc + dh * o * (1.0f - tc * tc);
  dx[0] = dct * g * i * (1.0f - i);
  dx[1] = dct * cont * c_prev * f * (1.0f - f);
  dx[2] = dh * tc * o * (1.0f - o);
  dx[3] = dct * i * (1.0f - g * g);
  return cont * f * dct;
}

/* The gradient reaching h at cell k of stream n: dh_a + cont_b * dh_b, a
 * term absent when its pointer is NULL (cont_b NULL scales by 1).  Shared
 * with the RNN step (rnn.h). */
static inline CT_LSTM_HD float ct_step_dh(const float *dh_a, const float *dh_b,
                                          const float *cont_b, size_t k, int n) {
  float dh = dh_a ? dh_a[k] : 0.0f;
  if (dh_b) dh += (cont_b ? cont_b[n] : 1.0f) * dh_b[k];
  return dh;
}

/* Cell k = n * D + d of a step: its four gates, D apart in row n. */
static inline CT_LSTM_HD size_t ct_lstm_gate_index(int D, size_t k, int q) {
  return (k / (size_t)D) * 4 * (size_t)D + (size_t)q * D + k % (size_t)D;
}

/* One forward step over N streams of D cells. */
typedef struct ct_lstm_step_fwd {
  int N, D;
  const float *cont;      /* (N) */
  const float *c_prev;    /* (N, D) */
  const float *x;         /* (N, 4D) gate pre-activations */
  float *acts;            /* (N, 4D) the activated gates; may be x itself */
  float *c, *h;           /* (N, D) */
  const float *cont_next; /* (N) or NULL */
  float *hc_next;         /* (N, D) cont_next * h, written when cont_next is given */
} ct_lstm_step_fwd;

/* One backward step.  The gradient reaching h is dh_a + cont_b * dh_b
 * (either term absent when its pointer is NULL; cont_b NULL scales by 1);
 * the one reaching c is dc_in (0 when NULL). */
typedef struct ct_lstm_step_bwd {
  int N, D;
  const float *cont;    /* (N) */
  const float *c_prev;  /* (N, D) */
  const float *acts;    /* (N, 4D) from the forward */
  const float *c;       /* (N, D) from the forward */
  const float *dh_a;    /* (N, D) or NULL */
  const float *dh_b;    /* (N, D) or NULL */
  const float *cont_b;  /* (N) or NULL */
  const float *dc_in;   /* (N, D) or NULL */
  float *dc_prev;       /* (N, D) or NULL (not wanted); may be dc_in itself */
  float *dx;            /* (N, 4D) or NULL (not wanted) */
} ct_lstm_step_bwd;

/* The steps' work for cell k = n * D + d, which the host loops and the
 * kernels both run. */
static inline CT_LSTM_HD void ct_lstm_step_forward_cell(const ct_lstm_step_fwd *a, size_t k) {
  const int n = (int)(k / (size_t)a->D);
  float x[4], act[4], h;
  for (int q = 0; q < 4; q++) x[q] = a->x[ct_lstm_gate_index(a->D, k, q)];
  a->c[k] = ct_lstm_cell_forward(a->cont[n], a->c_prev[k], x, act, &h);
  for (int q = 0; q < 4; q++) a->acts[ct_lstm_gate_index(a->D, k, q)] = act[q];
  a->h[k] = h;
  if (a->cont_next) a->hc_next[k] = a->cont_next[n] * h;
}

static inline CT_LSTM_HD void ct_lstm_step_backward_cell(const ct_lstm_step_bwd *a, size_t k) {
  const int n = (int)(k / (size_t)a->D);
  float act[4], dx[4];
  for (int q = 0; q < 4; q++) act[q] = a->acts[ct_lstm_gate_index(a->D, k, q)];
  const float dh = ct_step_dh(a->dh_a, a->dh_b, a->cont_b, k, n);
  const float dc = a->dc_in ? a->dc_in[k] : 0.0f;
  const float dprev = ct_lstm_cell_backward(a->cont[n], a->c_prev[k], a->c[k], act, dh, dc, dx);
  if (a->dc_prev) a->dc_prev[k] = dprev;
  if (a->dx)
    for (int q = 0; q < 4; q++) a->dx[ct_lstm_gate_index(a->D, k, q)] = dx[q];
}

/* The step on ctx's device (host loop, or one kernel on ctx's stream). */
void ct_lstm_step_forward(ct_context *ctx, const ct_lstm_step_fwd *a);
void ct_lstm_step_backward(ct_context *ctx, const ct_lstm_step_bwd *a);

/* The GPU launchers behind them (lstm_unit.cu). */
void ct_lstm_step_forward_gpu(ct_context *ctx, const ct_lstm_step_fwd *a);
void ct_lstm_step_backward_gpu(ct_context *ctx, const ct_lstm_step_bwd *a);

#ifdef __cplusplus
}
#endif

#endif
