/* The shared part of LSTM and RNN (recurrent.h): everything outside the
 * per-step element-wise work, written once for both devices through the
 * ct_dev_* math. */
#include "layers/recurrent.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"
#include "layers/filler.h"
#include "math/math.h"

static const char *const k_state_names[2] = {"h", "c"};

ct_status ct_recurrent_setup(ct_recurrent *r, ct_layer *l, ct_tensor *const *bottom,
                             ct_tensor *const *top, int nstate, int gates, ct_error *err) {
  const Caffe__RecurrentParameter *p =
      CT_PARAM_OR_DEFAULT(l, recurrent_param, CAFFE__RECURRENT_PARAMETER__INIT);
  r->nstate = nstate;
  r->gates = gates;
  r->expose = p->expose_hidden;
  r->debug = p->debug_info;
  const int exposed = r->expose ? nstate : 0;
  const int min_bottoms = 2 + exposed;
  const char *states = nstate == 2 ? "h_0, c_0" : "h_0";
  if (l->nbottom != min_bottoms && l->nbottom != min_bottoms + 1) {
    if (r->expose)
      return ct_error_set(err, CT_ERR_INVALID,
                          "with recurrent_param.expose_hidden the bottoms are x, cont, "
                          "[x_static,] %s (%d or %d blobs), got %d",
                          states, min_bottoms, min_bottoms + 1, l->nbottom);
    return ct_error_set(err, CT_ERR_INVALID,
                        "the bottoms are x, cont [, x_static] (2 or 3 blobs; %s come with "
                        "recurrent_param.expose_hidden), got %d",
                        states, l->nbottom);
  }
  if (l->ntop != 1 + exposed) {
    if (r->expose)
      return ct_error_set(err, CT_ERR_INVALID,
                          "with recurrent_param.expose_hidden the tops are the output and %s "
                          "(%d blobs), got %d",
                          nstate == 2 ? "h_T, c_T" : "h_T", 1 + exposed, l->ntop);
    return ct_error_set(err, CT_ERR_INVALID,
                        "the top is the output alone (1 blob; the final state comes with "
                        "recurrent_param.expose_hidden), got %d",
                        l->ntop);
  }
  for (int t = 0; t < l->ntop; t++)
    for (int b = 0; b < l->nbottom; b++)
      if (top[t] == bottom[b])
        return ct_error_set(err, CT_ERR_INVALID,
                            "top %d is bottom %d: a recurrent layer cannot run in place (backward "
                            "needs its inputs)",
                            t, b);
  r->b_static = l->nbottom > min_bottoms ? 2 : -1;
  r->b_state = r->b_static >= 0 ? 3 : 2;
  if (!p->has_num_output || p->num_output == 0 || p->num_output > (1u << 14))
    return ct_error_set(err, CT_ERR_INVALID,
                        "recurrent_param.num_output must be given and positive (at most 16384)");
  r->H = (int)p->num_output;
  r->G = gates * r->H;
  if (bottom[0]->ndim < 2)
    return ct_error_set(err, CT_ERR_INVALID,
                        "bottom 0 (x) must have at least 2 axes (T time steps, N streams, ...), "
                        "got %d",
                        bottom[0]->ndim);
  const size_t I = ct_tensor_count_range(bottom[0], 2, bottom[0]->ndim);
  if (I == 0 || I > (1u << 30) || I * (size_t)r->G > INT32_MAX)
    return ct_error_set(err, CT_ERR_INVALID,
                        "bottom 0 (x) has %zu values per step and stream (W_x would be %d x %zu)",
                        I, r->G, I);
  r->I = (int)I;
  if (r->b_static >= 0) {
    const ct_tensor *xs = bottom[r->b_static];
    const size_t S = xs->ndim < 1 ? 0 : ct_tensor_count_range(xs, 1, xs->ndim);
    if (S == 0 || S * (size_t)r->G > INT32_MAX)
      return ct_error_set(err, CT_ERR_INVALID,
                          "bottom 2 (x_static) must be (N, ...) with values per stream, got %d "
                          "axes and %zu values",
                          xs->ndim, S);
    r->S = (int)S;
  }
  /* Caffe's blobs, in Caffe's order */
  int wx[2] = {r->G, r->I}, wh[2] = {r->G, r->H};
  CT_TRY(ct_filler_fill(p->weight_filler, ct_layer_add_param(l, 2, wx), &l->ctx->rng, err));
  CT_TRY(ct_filler_fill(p->bias_filler, ct_layer_add_param(l, 1, &r->G), &l->ctx->rng, err));
  r->p_static = -1;
  if (r->b_static >= 0) {
    int ws[2] = {r->G, r->S};
    r->p_static = l->nparams;
    CT_TRY(ct_filler_fill(p->weight_filler, ct_layer_add_param(l, 2, ws), &l->ctx->rng, err));
  }
  r->p_recur = l->nparams;
  CT_TRY(ct_filler_fill(p->weight_filler, ct_layer_add_param(l, 2, wh), &l->ctx->rng, err));
  const int dev = l->ctx->device;
  ct_tensor **bufs[] = {&r->pre, &r->dpre, &r->hs, &r->cs, &r->hc, &r->dhc, &r->dc, &r->ones, &r->stat};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) *bufs[i] = ct_tensor_new(dev, NULL);
  r->T = r->N = -1;
  return CT_OK;
}

void ct_recurrent_free(ct_recurrent *r) {
  ct_tensor *bufs[] = {r->pre, r->dpre, r->hs, r->cs, r->hc, r->dhc, r->dc, r->ones, r->stat};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ct_tensor_free(bufs[i]);
}

/* Shapes t as (a, b, c) or (a, b) when c < 0. */
static ct_status shape3(ct_tensor *t, int a, int b, int c, ct_error *err) {
  int s[3] = {a, b, c};
  return ct_tensor_reshape(t, c < 0 ? 2 : 3, s, err);
}

ct_status ct_recurrent_reshape(ct_recurrent *r, ct_layer *l, ct_tensor *const *bottom,
                               ct_tensor *const *top, ct_error *err) {
  char buf[128];
  const ct_tensor *x = bottom[0], *cont = bottom[1];
  if (x->ndim < 2 || ct_tensor_count_range(x, 2, x->ndim) != (size_t)r->I)
    return ct_error_set(err, CT_ERR_INVALID,
                        "bottom 0 (x) must be (T, N, ...) with %d values per step and stream, "
                        "got %s",
                        r->I, ct_tensor_shape_string(x, buf, sizeof buf));
  const int T = x->shape[0], N = x->shape[1];
  if (T < 1 || N < 1 || (size_t)T * (size_t)N * (size_t)r->G > INT32_MAX)
    return ct_error_set(err, CT_ERR_INVALID, "bottom 0 (x): %s is not a usable (T, N, ...) shape",
                        ct_tensor_shape_string(x, buf, sizeof buf));
  if (cont->ndim != 2 || cont->shape[0] != T || cont->shape[1] != N)
    return ct_error_set(err, CT_ERR_INVALID, "bottom 1 (cont) must have shape (T, N) = (%d, %d), got %s",
                        T, N, ct_tensor_shape_string(cont, buf, sizeof buf));
  if (r->b_static >= 0) {
    const ct_tensor *xs = bottom[r->b_static];
    if (xs->ndim < 1 || xs->shape[0] != N || ct_tensor_count_range(xs, 1, xs->ndim) != (size_t)r->S)
      return ct_error_set(err, CT_ERR_INVALID,
                          "bottom 2 (x_static) must be (N, ...) = (%d, ...) with %d values per "
                          "stream, got %s",
                          N, r->S, ct_tensor_shape_string(xs, buf, sizeof buf));
  }
  for (int k = 0; r->expose && k < r->nstate; k++) {
    const ct_tensor *s = bottom[r->b_state + k];
    if (s->ndim != 3 || s->shape[0] != 1 || s->shape[1] != N || s->shape[2] != r->H)
      return ct_error_set(err, CT_ERR_INVALID,
                          "bottom %d (%s_0) must have shape (1, N, num_output) = (1, %d, %d), got %s",
                          r->b_state + k, k_state_names[k], N, r->H,
                          ct_tensor_shape_string(s, buf, sizeof buf));
  }
  CT_TRY(shape3(top[0], T, N, r->H, err));
  for (int k = 0; r->expose && k < r->nstate; k++) CT_TRY(shape3(top[1 + k], 1, N, r->H, err));
  const bool changed = T != r->T || N != r->N;
  r->T = T;
  r->N = N;
  CT_TRY(shape3(r->pre, T, N, r->G, err));
  CT_TRY(shape3(r->dpre, T, N, r->G, err));
  CT_TRY(shape3(r->hs, T + 1, N, r->H, err));
  if (r->nstate == 2) CT_TRY(shape3(r->cs, T + 1, N, r->H, err));
  CT_TRY(shape3(r->hc, T, N, r->H, err));
  CT_TRY(shape3(r->dhc, N, r->H, -1, err));
  if (r->nstate == 2) CT_TRY(shape3(r->dc, N, r->H, -1, err));
  CT_TRY(shape3(r->stat, N, r->G, -1, err));
  if (changed) {
    int n = T * N;
    CT_TRY(ct_tensor_reshape(r->ones, 1, &n, err));
    ct_dev_set(l->ctx, r->ones->count, 1.0f, r->ones->data);
    ct_dev_set(l->ctx, r->hs->count, 0.0f, r->hs->data);
    if (r->nstate == 2) ct_dev_set(l->ctx, r->cs->count, 0.0f, r->cs->data);
  }
  return CT_OK;
}


void ct_recurrent_forward_begin(ct_recurrent *r, ct_layer *l, ct_tensor *const *bottom) {
  ct_context *ctx = l->ctx;
  const int M = r->T * r->N;
  const size_t NH = (size_t)r->N * r->H;
  /* pre = 1 b^T + X W_x^T */
  ct_dev_gemm(ctx, false, false, M, r->G, 1, 1.0f, r->ones->data, l->params[1]->data, 0.0f,
              r->pre->data);
  ct_dev_gemm(ctx, false, true, M, r->G, r->I, 1.0f, bottom[0]->data, l->params[0]->data, 1.0f,
              r->pre->data);
  if (r->b_static >= 0) {
    /* stat (N, G) = x_static W_static^T, added to every step */
    ct_dev_gemm(ctx, false, true, r->N, r->G, r->S, 1.0f, bottom[r->b_static]->data,
                l->params[r->p_static]->data, 0.0f, r->stat->data);
    ct_dev_gemm(ctx, false, false, r->T, r->N * r->G, 1, 1.0f, r->ones->data, r->stat->data, 1.0f,
                r->pre->data);
  }
  /* the initial state: the bottoms, or the last forward's final state */
  ct_tensor *states[2] = {r->hs, r->cs};
  for (int k = 0; k < r->nstate; k++) {
    const float *from = r->expose ? bottom[r->b_state + k]->data : ct_rec_row(states[k], r->T);
    ct_dev_copy(ctx, NH, from, ct_rec_row(states[k], 0));
  }
  ct_scale_rows(ctx, r->N, r->H, bottom[1]->data, ct_rec_row(r->hs, 0), ct_rec_row(r->hc, 0));
}

void ct_recurrent_forward_step(ct_recurrent *r, ct_layer *l, int t) {
  ct_dev_gemm(l->ctx, false, true, r->N, r->G, r->H, 1.0f, ct_rec_row(r->hc, t),
              l->params[r->p_recur]->data, 1.0f, ct_rec_row(r->pre, t));
}

void ct_recurrent_forward_end(ct_recurrent *r, ct_layer *l, ct_tensor *const *top) {
  const size_t NH = (size_t)r->N * r->H;
  ct_tensor *states[2] = {r->hs, r->cs};
  for (int k = 0; r->expose && k < r->nstate; k++)
    ct_dev_copy(l->ctx, NH, ct_rec_row(states[k], r->T), top[1 + k]->data);
  if (!r->debug) return;
  for (int t = 1; t <= r->T; t++)
    for (int k = 0; k < r->nstate; k++) {
      char what[64];
      snprintf(what, sizeof what, "internal blob %s_%d", k_state_names[k], t);
      ct_recurrent_debug(l, "Forward", what, "data", ct_rec_row(states[k], t), NH);
    }
}

const float *ct_recurrent_final_diff(const ct_recurrent *r, ct_tensor *const *top, int state) {
  return r->expose ? top[1 + state]->diff : NULL;
}

void ct_recurrent_backward_step(ct_recurrent *r, ct_layer *l, int t) {
  ct_dev_gemm(l->ctx, false, false, r->N, r->H, r->G, 1.0f, ct_rec_row(r->dpre, t),
              l->params[r->p_recur]->data, 0.0f, r->dhc->data);
  if (!r->debug) return;
  char what[64];
  snprintf(what, sizeof what, "internal blob pre_%d", t + 1);
  ct_recurrent_debug(l, "Backward", what, "diff", ct_rec_row(r->dpre, t), (size_t)r->N * r->G);
}

void ct_recurrent_backward_end(ct_recurrent *r, ct_layer *l, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  ct_context *ctx = l->ctx;
  const int M = r->T * r->N;
  const float *dpre = r->dpre->data;
  /* accumulated parameter gradients, Caffe's convention */
  if (l->param_propagate_down[0])
    ct_dev_gemm(ctx, true, false, r->G, r->I, M, 1.0f, dpre, bottom[0]->data, 1.0f,
                l->params[0]->diff);
  if (l->param_propagate_down[1])
    ct_dev_gemv(ctx, true, M, r->G, 1.0f, dpre, r->ones->data, 1.0f, l->params[1]->diff);
  if (l->param_propagate_down[r->p_recur])
    ct_dev_gemm(ctx, true, false, r->G, r->H, M, 1.0f, dpre, r->hc->data, 1.0f,
                l->params[r->p_recur]->diff);
  if (r->b_static >= 0) {
    const ct_tensor *xs = bottom[r->b_static];
    /* stat (N, G) = the gradient of the static term, summed over steps */
    ct_dev_gemv(ctx, true, r->T, r->N * r->G, 1.0f, dpre, r->ones->data, 0.0f, r->stat->data);
    if (l->param_propagate_down[r->p_static])
      ct_dev_gemm(ctx, true, false, r->G, r->S, r->N, 1.0f, r->stat->data, xs->data, 1.0f,
                  l->params[r->p_static]->diff);
    if (propagate_down[r->b_static])
      ct_dev_gemm(ctx, false, false, r->N, r->S, r->G, 1.0f, r->stat->data,
                  l->params[r->p_static]->data, 0.0f, xs->diff);
  }
  if (propagate_down[0])
    ct_dev_gemm(ctx, false, false, M, r->I, r->G, 1.0f, dpre, l->params[0]->data, 0.0f,
                bottom[0]->diff);
  if (r->expose && propagate_down[r->b_state])
    ct_scale_rows(ctx, r->N, r->H, bottom[1]->data, r->dhc->data, bottom[r->b_state]->diff);
  if (r->expose && r->nstate == 2 && propagate_down[r->b_state + 1])
    ct_dev_copy(ctx, (size_t)r->N * r->H, r->dc->data, bottom[r->b_state + 1]->diff);
}

void ct_scale_rows(ct_context *ctx, int N, int D, const float *cont, const float *x, float *y) {
#ifdef CORTADO_HAVE_CUDA
  if (ctx->device != CT_DEVICE_CPU) {
    ct_scale_rows_gpu(ctx, N, D, cont, x, y);
    return;
  }
#endif
  for (int n = 0; n < N; n++)
    for (int d = 0; d < D; d++) y[(size_t)n * D + d] = cont[n] * x[(size_t)n * D + d];
}

void ct_recurrent_debug(const ct_layer *l, const char *pass, const char *what, const char *kind,
                        const float *values, size_t n) {
  const double mean = n ? ct_dev_asum(l->ctx, n, values) / (double)n : 0.0;
  LOG_INFO("    [%s] Layer %s, %s %s: %g", pass, l->name, what, kind, mean);
}
