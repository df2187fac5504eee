/* RNN's element-wise step (rnn.c), for the host loop and the CUDA kernel
 * (rnn.cu) alike.  For stream n and cell d of step t:
 *   h_{t+1} = tanh(pre_t)               forward
 *   dpre_t = dh * (1 - h_{t+1}^2)       backward
 * with dh as in ct_step_dh (lstm_unit.h). */
#ifndef CT_LAYERS_RNN_H
#define CT_LAYERS_RNN_H

#include "layers/lstm_unit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_rnn_step_fwd {
  int N, D;
  const float *pre;       /* (N, D) */
  float *h;               /* (N, D) */
  const float *cont_next; /* (N) or NULL */
  float *hc_next;         /* (N, D) cont_next * h, written when cont_next is given */
} ct_rnn_step_fwd;

typedef struct ct_rnn_step_bwd {
  int N, D;
  const float *h;                   /* (N, D) the step's output */
  const float *dh_a, *dh_b, *cont_b; /* as ct_step_dh */
  float *dpre;                      /* (N, D) */
} ct_rnn_step_bwd;

static inline CT_LSTM_HD void ct_rnn_step_forward_cell(const ct_rnn_step_fwd *a, size_t k) {
  const float h = tanhf(a->pre[k]);
  a->h[k] = h;
  if (a->cont_next) a->hc_next[k] = a->cont_next[k / (size_t)a->D] * h;
}

static inline CT_LSTM_HD void ct_rnn_step_backward_cell(const ct_rnn_step_bwd *a, size_t k) {
  const float h = a->h[k];
  a->dpre[k] = ct_step_dh(a->dh_a, a->dh_b, a->cont_b, k, (int)(k / (size_t)a->D)) * (1.0f - h * h);
}

/* GPU launchers (rnn.cu), one kernel on ctx's stream. */
void ct_rnn_step_forward_gpu(ct_context *ctx, const ct_rnn_step_fwd *a);
void ct_rnn_step_backward_gpu(ct_context *ctx, const ct_rnn_step_bwd *a);

#ifdef __cplusplus
}
#endif

#endif
