/* Small nets around one LSTM or RNN layer with fixed weights, checked
 * against the double-precision references of recurrent_ref.h, on any device
 * (test_layer_recurrent_ref.c on the CPU, test_gpu_layer_recurrent.c on a
 * GPU).
 *
 * The net: an Input of x (T, N, I), cont (T, N), the target (T, N, H)
 * [, x_static (N, S)] [, h_0, c_0 and targets for h_T, c_T with
 * expose_hidden]; the recurrent layer; a EuclideanLoss on its output (and on
 * h_T, c_T when exposed), force_backward so that every input gets its
 * gradient.  The weights, inputs and targets are fixed uniform values; cont
 * holds a fresh start for every other stream at the first step and a reset
 * in the middle of stream 1's sequence. */
#ifndef CT_TESTS_RECURRENT_CASES_H
#define CT_TESTS_RECURRENT_CASES_H

#include "layertest.h"
#include "recurrent_ref.h"
#include "runtime_nets.h"

#define RC_TOL 1e-5

typedef struct rc_config {
  bool lstm;
  int T, N, I, S, H;
  bool expose;
} rc_config;

typedef struct rc_case {
  rc_config cfg;
  ct_net *net;
  int layer;              /* the recurrent layer's index */
  double *w[8];           /* the layer's parameters, Caffe's order */
  size_t wn[8];
  int nw;
  double *x, *cont, *target, *xs, *h0, *c0, *hT_target, *cT_target;
} rc_case;

/* n values uniform in [lo, hi) from seed, rounded to float (what the net
 * sees) and kept in double. */
static inline double *rc_values(size_t n, double lo, double hi, uint64_t seed) {
  float *f = malloc(n * sizeof(float) + 1);
  tu_fill_uniform(f, n, (float)lo, (float)hi, seed);
  double *d = malloc(n * sizeof(double) + 1);
  for (size_t i = 0; i < n; i++) d[i] = f[i];
  free(f);
  return d;
}

static inline void rc_upload(ct_tensor *t, const double *v) {
  float *f = malloc(t->count * sizeof(float) + 1);
  for (size_t i = 0; i < t->count; i++) f[i] = (float)v[i];
  ct_tensor_upload(t, f);
  free(f);
}

/* |got - want| <= RC_TOL * max(1, |want|) everywhere, else the test fails
 * naming what and where. */
static inline void rc_expect(const char *what, const ct_tensor *t, bool diff, const double *want) {
  float *got = malloc(t->count * sizeof(float) + 1);
  if (diff) ct_tensor_download_diff(t, got);
  else ct_tensor_download(t, got);
  for (size_t i = 0; i < t->count; i++) {
    const double tol = RC_TOL * fmax(1.0, fabs(want[i]));
    if (!(fabs(got[i] - want[i]) <= tol))
      fail_msg("%s[%zu]: %.9g, the reference says %.9g", what, i, (double)got[i], want[i]);
  }
  free(got);
}

/* The net's prototxt for cfg (malloc'd); its fillers are absurd on purpose: the
 * tests set every weight themselves. */
static inline char *rc_net_text(const rc_config *c) {
  char *t = malloc(8192);
  int o = snprintf(t, 8192,
                   "name: 'rec' force_backward: true\n"
                   "layer { name: 'in' type: 'Input' top: 'x' top: 'cont' top: 'target'");
  if (c->S) o += snprintf(t + o, 8192 - o, " top: 'xs'");
  if (c->expose)
    o += snprintf(t + o, 8192 - o, " top: 'h0' top: 'hT_target'%s",
                  c->lstm ? " top: 'c0' top: 'cT_target'" : "");
  o += snprintf(t + o, 8192 - o,
                "\n  input_param { shape { dim: %d dim: %d dim: %d }"
                " shape { dim: %d dim: %d } shape { dim: %d dim: %d dim: %d }",
                c->T, c->N, c->I, c->T, c->N, c->T, c->N, c->H);
  if (c->S) o += snprintf(t + o, 8192 - o, " shape { dim: %d dim: %d }", c->N, c->S);
  for (int k = 0; c->expose && k < (c->lstm ? 4 : 2); k++)
    o += snprintf(t + o, 8192 - o, " shape { dim: 1 dim: %d dim: %d }", c->N, c->H);
  o += snprintf(t + o, 8192 - o,
                " } }\n"
                "layer { name: 'rec' type: '%s' bottom: 'x' bottom: 'cont'%s%s%s top: 'y'%s%s\n"
                "  recurrent_param { num_output: %d expose_hidden: %s\n"
                "    weight_filler { type: 'gaussian' std: 3 }\n"
                "    bias_filler { type: 'constant' value: 7 } } }\n"
                "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'y' bottom: 'target'\n"
                "  top: 'loss' }\n",
                c->lstm ? "LSTM" : "RNN", c->S ? " bottom: 'xs'" : "",
                c->expose ? " bottom: 'h0'" : "", c->expose && c->lstm ? " bottom: 'c0'" : "",
                c->expose ? " top: 'hT'" : "", c->expose && c->lstm ? " top: 'cT'" : "", c->H,
                c->expose ? "true" : "false");
  if (c->expose)
    o += snprintf(t + o, 8192 - o,
                  "layer { name: 'loss_h' type: 'EuclideanLoss' bottom: 'hT' bottom: 'hT_target' "
                  "top: 'loss_h' }\n");
  if (c->expose && c->lstm)
    o += snprintf(t + o, 8192 - o,
                  "layer { name: 'loss_c' type: 'EuclideanLoss' bottom: 'cT' bottom: 'cT_target' "
                  "top: 'loss_c' }\n");
  return t;
}

/* Fills cont: 0 for the even streams at step 0, 0 for stream 1 at step
 * T / 2, 1 elsewhere. */
static inline double *rc_cont(const rc_config *c) {
  double *v = malloc((size_t)c->T * c->N * sizeof(double));
  for (int t = 0; t < c->T; t++)
    for (int n = 0; n < c->N; n++)
      v[t * c->N + n] = (t == 0 && n % 2 == 0) || (t == c->T / 2 && n == 1) ? 0.0 : 1.0;
  return v;
}

/* The net on ctx with fixed weights and inputs (seeded by seed). */
static inline void rc_build(rc_case *rc, const rc_config *c, ct_context *ctx, uint64_t seed) {
  memset(rc, 0, sizeof *rc);
  rc->cfg = *c;
  char *text = rc_net_text(c);
  rc->net = rn_net(text, ctx, true);
  free(text);
  rc->layer = ct_net_layer_index(rc->net, "rec");
  assert_true(rc->layer >= 0);
  ct_layer *l = rc->net->layers[rc->layer];
  const int G = c->lstm ? 4 * c->H : c->H;
  const int nw = 3 + (c->S ? 1 : 0) + (c->lstm ? 0 : 2);
  assert_int_equal(l->nparams, nw);
  rc->nw = nw;
  for (int i = 0; i < nw; i++) {
    rc->wn[i] = l->params[i]->count;
    rc->w[i] = rc_values(rc->wn[i], -0.6, 0.6, seed + 10 + (uint64_t)i);
    rc_upload(l->params[i], rc->w[i]);
  }
  (void)G;
  const size_t TN = (size_t)c->T * c->N, NH = (size_t)c->N * c->H;
  rc->x = rc_values(TN * c->I, -1, 1, seed + 1);
  rc->cont = rc_cont(c);
  rc->target = rc_values(TN * c->H, -0.5, 0.5, seed + 2);
  rc_upload(ct_net_blob(rc->net, "x"), rc->x);
  rc_upload(ct_net_blob(rc->net, "cont"), rc->cont);
  rc_upload(ct_net_blob(rc->net, "target"), rc->target);
  if (c->S) {
    rc->xs = rc_values((size_t)c->N * c->S, -1, 1, seed + 3);
    rc_upload(ct_net_blob(rc->net, "xs"), rc->xs);
  }
  if (c->expose) {
    rc->h0 = rc_values(NH, -0.8, 0.8, seed + 4);
    rc->hT_target = rc_values(NH, -0.5, 0.5, seed + 5);
    rc_upload(ct_net_blob(rc->net, "h0"), rc->h0);
    rc_upload(ct_net_blob(rc->net, "hT_target"), rc->hT_target);
    if (c->lstm) {
      rc->c0 = rc_values(NH, -1.5, 1.5, seed + 6);
      rc->cT_target = rc_values(NH, -0.5, 0.5, seed + 7);
      rc_upload(ct_net_blob(rc->net, "c0"), rc->c0);
      rc_upload(ct_net_blob(rc->net, "cT_target"), rc->cT_target);
    }
  }
}

static inline void rc_free(rc_case *rc) {
  ct_net_free(rc->net);
  for (int i = 0; i < rc->nw; i++) free(rc->w[i]);
  double *p[] = {rc->x, rc->cont, rc->target, rc->xs, rc->h0, rc->c0, rc->hT_target, rc->cT_target};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
}

/* The reference for rc's weights and inputs, starting from h0, c0 (NULL:
 * zeros), run forward and backward with the loss gradients of the net. */
static inline void rc_reference(const rc_case *rc, rec_ref *r, const double *h0, const double *c0) {
  const rc_config *c = &rc->cfg;
  memset(r, 0, sizeof *r);
  *r = (rec_ref){.lstm = c->lstm, .T = c->T, .N = c->N, .I = c->I, .S = c->S, .H = c->H,
                 .x = rc->x, .cont = rc->cont, .xs = rc->xs, .h0 = h0, .c0 = c0};
  int k = 0;
  r->Wx = rc->w[k++];
  r->b = rc->w[k++];
  if (c->S) r->Ws = rc->w[k++];
  r->Wh = rc->w[k++];
  if (!c->lstm) {
    r->Wo = rc->w[k++];
    r->bo = rc->w[k++];
  }
  rr_alloc(r);
  rr_forward(r);
  /* EuclideanLoss: 1 / (2 num) sum (y - target)^2 with num the first axis */
  const size_t TNH = (size_t)c->T * c->N * c->H, NH = (size_t)c->N * c->H;
  double *dy = malloc(TNH * sizeof(double)), *dhT = NULL, *dcT = NULL;
  for (size_t i = 0; i < TNH; i++) dy[i] = (r->y[i] - rc->target[i]) / c->T;
  if (c->expose) {
    dhT = malloc(NH * sizeof(double));
    for (size_t i = 0; i < NH; i++) dhT[i] = r->hT[i] - rc->hT_target[i];
    if (c->lstm) {
      dcT = malloc(NH * sizeof(double));
      for (size_t i = 0; i < NH; i++) dcT[i] = r->cT[i] - rc->cT_target[i];
    }
  }
  r->dy = dy;
  r->dhT = dhT;
  r->dcT = dcT;
  rr_backward(r);
  free(dy);
  free(dhT);
  free(dcT);
  r->dy = r->dhT = r->dcT = NULL;
}

/* One forward and backward of the net (parameter gradients cleared first). */
static inline void rc_pass(rc_case *rc) {
  ct_error err;
  double loss = 0;
  ct_net_clear_param_diffs(rc->net);
  if (ct_net_forward(rc->net, &loss, &err) != CT_OK) fail_msg("forward: %s", err.msg);
  ct_net_backward(rc->net);
  ct_context_sync(rc->net->ctx);
}

/* The net's outputs and gradients against reference r. */
static inline void rc_check(const rc_case *rc, const rec_ref *r) {
  const rc_config *c = &rc->cfg;
  const ct_layer *l = rc->net->layers[rc->layer];
  rc_expect("y", ct_net_blob(rc->net, "y"), false, r->y);
  const double *grads[6] = {r->dWx, r->db};
  int k = 2;
  if (c->S) grads[k++] = r->dWs;
  grads[k++] = r->dWh;
  if (!c->lstm) {
    grads[k++] = r->dWo;
    grads[k++] = r->dbo;
  }
  static const char *const names_lstm[] = {"dW_xc", "db_c", "dW_xc_static", "dW_hc"};
  static const char *const names_rnn[] = {"dW_xh", "db_h", "dW_xh_static", "dW_hh", "dW_ho", "db_o"};
  for (int i = 0; i < k; i++) {
    int name = c->S || i < 2 ? i : i + 1;
    rc_expect(c->lstm ? names_lstm[name] : names_rnn[name], l->params[i], true, grads[i]);
  }
  rc_expect("dx", ct_net_blob(rc->net, "x"), true, r->dx);
  if (c->S) rc_expect("dx_static", ct_net_blob(rc->net, "xs"), true, r->dxs);
  if (c->expose) {
    rc_expect("h_T", ct_net_blob(rc->net, "hT"), false, r->hT);
    rc_expect("dh_0", ct_net_blob(rc->net, "h0"), true, r->dh0);
    if (c->lstm) {
      rc_expect("c_T", ct_net_blob(rc->net, "cT"), false, r->cT);
      rc_expect("dc_0", ct_net_blob(rc->net, "c0"), true, r->dc0);
    }
  }
}

/* A pass of cfg's net against the reference; without expose_hidden a
 * second pass with new inputs then starts from the first one's final state
 * (as Caffe carries it), checked against the reference started there. */
static inline void rc_run(const rc_config *cfg, ct_context *ctx, uint64_t seed) {
  rc_case rc;
  rc_build(&rc, cfg, ctx, seed);
  rec_ref r;
  rc_reference(&rc, &r, rc.h0, rc.c0);
  rc_pass(&rc);
  rc_check(&rc, &r);
  if (!cfg->expose) {
    /* new inputs; stream 0 starts afresh, the others continue */
    free(rc.x);
    rc.x = rc_values((size_t)cfg->T * cfg->N * cfg->I, -1, 1, seed + 99);
    rc_upload(ct_net_blob(rc.net, "x"), rc.x);
    for (int t = 0; t < cfg->T; t++)
      for (int n = 0; n < cfg->N; n++) rc.cont[t * cfg->N + n] = t == 0 && n == 0 ? 0.0 : 1.0;
    rc_upload(ct_net_blob(rc.net, "cont"), rc.cont);
    rec_ref r2;
    rc_reference(&rc, &r2, r.hT, r.cT);
    rc_pass(&rc);
    rc_check(&rc, &r2);
    rr_free(&r2);
  }
  rr_free(&r);
  rc_free(&rc);
}

/* ---------------------------------------------------------------- layer cases
 * One recurrent layer alone (layertest.h), for the gradient checks and the
 * GPU-against-CPU comparisons: bottoms as the shape specs say (x, cont
 * [, x_static] [, h_0 [, c_0]]; LSTMUnit: c_prev, x, cont), weights
 * uniform in [-0.5, 0.5), biases uniform in [-0.2, 0.2). */
typedef struct rl_case {
  const char *type;
  int H;             /* num_output (unused by LSTMUnit) */
  bool expose;
  const char *shapes;
  int ntop;
} rl_case;

static const rl_case k_rl_cases[] = {
    {"LSTM", 2, false, "3,2,3; 3,2", 1},
    {"LSTM", 3, false, "4,2,2,2; 4,2", 1},
    {"LSTM", 2, false, "3,2,3; 3,2; 2,2", 1},
    {"LSTM", 2, true, "3,2,3; 3,2; 1,2,2; 1,2,2", 3},
    {"LSTM", 2, true, "3,3,2; 3,3; 3,2,1; 1,3,2; 1,3,2", 3},
    {"RNN", 2, false, "3,2,3; 3,2", 1},
    {"RNN", 3, false, "4,2,2,2; 4,2; 2,3", 1},
    {"RNN", 3, true, "3,2,3; 3,2; 1,2,3", 2},
    {"LSTMUnit", 0, false, "1,3,2; 1,3,8; 1,3", 2},
};

typedef struct rl_param {
  Caffe__LayerParameter lp;
  Caffe__RecurrentParameter rp;
  Caffe__FillerParameter wf, bf;
} rl_param;

static inline void rl_make(rl_param *p, const rl_case *c) {
  memset(p, 0, sizeof *p);
  p->lp = (Caffe__LayerParameter)CAFFE__LAYER_PARAMETER__INIT;
  p->lp.name = "rec";
  p->lp.type = (char *)c->type;
  if (strcmp(c->type, "LSTMUnit") == 0) return;
  p->rp = (Caffe__RecurrentParameter)CAFFE__RECURRENT_PARAMETER__INIT;
  p->wf = (Caffe__FillerParameter)CAFFE__FILLER_PARAMETER__INIT;
  p->bf = (Caffe__FillerParameter)CAFFE__FILLER_PARAMETER__INIT;
  p->wf.type = "uniform";
  p->wf.has_min = p->wf.has_max = 1;
  p->wf.min = -0.5f;
  p->wf.max = 0.5f;
  p->bf = p->wf;
  p->bf.min = -0.2f;
  p->bf.max = 0.2f;
  p->rp.has_num_output = 1;
  p->rp.num_output = (uint32_t)c->H;
  p->rp.has_expose_hidden = 1;
  p->rp.expose_hidden = c->expose;
  p->rp.weight_filler = &p->wf;
  p->rp.bias_filler = &p->bf;
  p->lp.recurrent_param = &p->rp;
}

/* The cont bottom of a layer case: (T, N) with 0 at the first step (for
 * the even streams only when the initial state is a bottom, so that it
 * matters) and in the middle of the last stream; LSTMUnit's (1, N):
 * 0 for every third stream. */
static inline void rl_cont(tu_layer_case *c) {
  const bool unit = strcmp(c->l->ops->type, "LSTMUnit") == 0;
  ct_tensor *cont = c->bottom[unit ? 2 : 1];
  const int T = cont->shape[0], N = cont->shape[1];
  const bool expose = !unit && c->l->ntop > 1;
  float *v = malloc(cont->count * sizeof(float));
  for (int t = 0; t < T; t++)
    for (int n = 0; n < N; n++) {
      bool reset = unit ? n % 3 == 0
                        : (t == 0 && (!expose || n % 2 == 0)) || (t == T / 2 && n == N - 1);
      v[t * N + n] = reset ? 0.0f : 1.0f;
    }
  tu_set_values(cont, v);
  free(v);
}

/* The gradient-check options of the recurrent cases: Caffe's (step 1e-2,
 * threshold 1e-3), cont never checked. */
static inline ct_gradcheck_opts rl_gradcheck_opts(const rl_case *c) {
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.skip_bottom[strcmp(c->type, "LSTMUnit") == 0 ? 2 : 1] = true;
  return o;
}

#endif
