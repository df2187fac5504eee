/* RNN: Caffe's RNNLayer, a plain (Elman) recurrent net over T steps of N
 * streams (bottoms, tops and the state carried between passes: see
 * recurrent.h).  Step t computes
 *
 *   h_{t+1} = tanh(W_xh x_t + b_h [+ W_xh_static x_static] + W_hh (cont_t * h_t))
 *   o_{t+1} = tanh(W_ho h_{t+1} + b_o)
 *
 * and the top is o_1 .. o_T.  Parameters, Caffe's blobs in Caffe's order:
 * W_xh (H, I), b_h (H), [W_xh_static (H, S)], W_hh (H, H), W_ho (H, H),
 * b_o (H).
 *
 * How it runs: as LSTM (lstm.c), a direct time loop instead of Caffe's
 * unrolled net: per step one GEMM and one element-wise kernel each way;
 * the output layer, its gradient and every parameter gradient are single
 * GEMMs over all T N rows outside the loop. */
#include <math.h>
#include <stdlib.h>

#include "layers/filler.h"
#include "layers/layer.h"
#include "layers/recurrent.h"
#include "layers/rnn.h"
#include "layers/tanh.h"
#include "math/math.h"

typedef struct rnn_priv {
  ct_recurrent r;  /* first: the shared state */
  int p_wo, p_bo;  /* parameter indices of W_ho and b_o */
  ct_tensor *o;    /* (T, N, H) o_1 .. o_T */
  ct_tensor *dh;   /* (T, N, H) the gradients reaching h_1 .. h_T from the outputs */
} rnn_priv;

static ct_status rnn_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                           ct_error *err) {
  rnn_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  CT_TRY(ct_recurrent_setup(&p->r, l, bottom, top, 1, 1, err));
  const Caffe__RecurrentParameter *rp =
      CT_PARAM_OR_DEFAULT(l, recurrent_param, CAFFE__RECURRENT_PARAMETER__INIT);
  int wo[2] = {p->r.H, p->r.H};
  p->p_wo = l->nparams;
  CT_TRY(ct_filler_fill(rp->weight_filler, ct_layer_add_param(l, 2, wo), &l->ctx->rng, err));
  p->p_bo = l->nparams;
  CT_TRY(ct_filler_fill(rp->bias_filler, ct_layer_add_param(l, 1, &p->r.H), &l->ctx->rng, err));
  p->o = ct_tensor_new(l->ctx->device, NULL);
  p->dh = ct_tensor_new(l->ctx->device, NULL);
  return CT_OK;
}

static ct_status rnn_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  rnn_priv *p = l->priv;
  CT_TRY(ct_recurrent_reshape(&p->r, l, bottom, top, err));
  CT_TRY(ct_tensor_reshape(p->o, 3, top[0]->shape, err));
  return ct_tensor_reshape(p->dh, 3, top[0]->shape, err);
}

/* y = tanh(x) over n values, and dx = dy (1 - y^2), on l's device. */
static void tanh_fwd(ct_context *ctx, size_t n, const float *x, float *y) {
#ifdef CORTADO_HAVE_CUDA
  if (ctx->device != CT_DEVICE_CPU) {
    ct_tanh_forward_gpu(ctx, n, x, y);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
}

static void tanh_bwd(ct_context *ctx, size_t n, const float *y, const float *dy, float *dx) {
#ifdef CORTADO_HAVE_CUDA
  if (ctx->device != CT_DEVICE_CPU) {
    ct_tanh_backward_gpu(ctx, n, y, dy, dx);
    return;
  }
#endif
  for (size_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

static void rnn_step_forward(ct_context *ctx, const ct_rnn_step_fwd *a) {
#ifdef CORTADO_HAVE_CUDA
  if (ctx->device != CT_DEVICE_CPU) {
    ct_rnn_step_forward_gpu(ctx, a);
    return;
  }
#endif
  for (size_t k = 0; k < (size_t)a->N * a->D; k++) ct_rnn_step_forward_cell(a, k);
}

static void rnn_step_backward(ct_context *ctx, const ct_rnn_step_bwd *a) {
#ifdef CORTADO_HAVE_CUDA
  if (ctx->device != CT_DEVICE_CPU) {
    ct_rnn_step_backward_gpu(ctx, a);
    return;
  }
#endif
  for (size_t k = 0; k < (size_t)a->N * a->D; k++) ct_rnn_step_backward_cell(a, k);
}

static ct_status rnn_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  rnn_priv *p = l->priv;
  ct_recurrent *r = &p->r;
  ct_context *ctx = l->ctx;
  const float *cont = bottom[1]->data;
  ct_recurrent_forward_begin(r, l, bottom);
  for (int t = 0; t < r->T; t++) {
    ct_recurrent_forward_step(r, l, t);
    const bool more = t + 1 < r->T;
    const ct_rnn_step_fwd a = {.N = r->N,
                               .D = r->H,
                               .pre = ct_rec_row(r->pre, t),
                               .h = ct_rec_row(r->hs, t + 1),
                               .cont_next = more ? cont + (size_t)(t + 1) * r->N : NULL,
                               .hc_next = more ? ct_rec_row(r->hc, t + 1) : NULL};
    rnn_step_forward(ctx, &a);
  }
  /* o = tanh(1 b_o^T + h W_ho^T) over all steps */
  const int M = r->T * r->N;
  ct_dev_gemm(ctx, false, false, M, r->H, 1, 1.0f, r->ones->data, l->params[p->p_bo]->data, 0.0f,
              p->o->data);
  ct_dev_gemm(ctx, false, true, M, r->H, r->H, 1.0f, ct_rec_row(r->hs, 1),
              l->params[p->p_wo]->data, 1.0f, p->o->data);
  tanh_fwd(ctx, p->o->count, p->o->data, p->o->data);
  ct_dev_copy(ctx, p->o->count, p->o->data, top[0]->data);
  ct_recurrent_forward_end(r, l, top);
  return CT_OK;
}

static void rnn_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                         ct_tensor *const *bottom) {
  rnn_priv *p = l->priv;
  ct_recurrent *r = &p->r;
  ct_context *ctx = l->ctx;
  const float *cont = bottom[1]->data;
  const int M = r->T * r->N;
  const size_t NH = (size_t)r->N * r->H;
  /* the output layer: dpre holds its pre-activation gradient for now */
  float *dout = r->dpre->data;
  if (top[0]->diff) tanh_bwd(ctx, p->o->count, p->o->data, top[0]->diff, dout);
  else ct_dev_set(ctx, p->o->count, 0.0f, dout);
  if (l->param_propagate_down[p->p_wo])
    ct_dev_gemm(ctx, true, false, r->H, r->H, M, 1.0f, dout, ct_rec_row(r->hs, 1), 1.0f,
                l->params[p->p_wo]->diff);
  if (l->param_propagate_down[p->p_bo])
    ct_dev_gemv(ctx, true, M, r->H, 1.0f, dout, r->ones->data, 1.0f, l->params[p->p_bo]->diff);
  ct_dev_gemm(ctx, false, false, M, r->H, r->H, 1.0f, dout, l->params[p->p_wo]->data, 0.0f,
              p->dh->data);
  for (int t = r->T - 1; t >= 0; t--) {
    const bool last = t == r->T - 1;
    const ct_rnn_step_bwd a = {.N = r->N,
                               .D = r->H,
                               .h = ct_rec_row(r->hs, t + 1),
                               .dh_a = p->dh->data + (size_t)t * NH,
                               .dh_b = last ? ct_recurrent_final_diff(r, top, 0) : r->dhc->data,
                               .cont_b = last ? NULL : cont + (size_t)(t + 1) * r->N,
                               .dpre = ct_rec_row(r->dpre, t)};
    rnn_step_backward(ctx, &a);
    ct_recurrent_backward_step(r, l, t);
  }
  ct_recurrent_backward_end(r, l, propagate_down, bottom);
}

static void rnn_destroy(ct_layer *l) {
  rnn_priv *p = l->priv;
  if (!p) return;
  ct_recurrent_free(&p->r);
  ct_tensor_free(p->o);
  ct_tensor_free(p->dh);
  free(p);
  l->priv = NULL;
}

const ct_layer_ops ct_rnn_ops = {
    .type = "RNN",
    .min_bottoms = 2, .max_bottoms = 4, .min_tops = 1, .max_tops = 2,
    .no_force_backward_bottoms = 1u << 1,
    .setup = rnn_setup,
    .reshape = rnn_reshape,
    .forward_cpu = rnn_forward,
    .backward_cpu = rnn_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = rnn_forward,
    .backward_gpu = rnn_backward,
#endif
    .destroy = rnn_destroy,
};
