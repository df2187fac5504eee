/* Shared by the solver tests that train a net: a least-squares problem
 *
 *   pred = x W^T + b,  loss = 1/(2N) sum (pred - y)^2
 *
 * (Input + InnerProduct + EuclideanLoss), solvers made from prototxt text,
 * and a double-precision reference of Caffe's update for that problem. */
#ifndef CT_TEST_SOLVER_FIXTURE_H
#define CT_TEST_SOLVER_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "net/net.h"
#include "proto/textformat.h"
#include "solvers/solver.h"
#include "testutil.h"

/* Exits 77 (ctest: skipped) when a layer type these tests need is not
 * registered yet (the layers are written on other branches). */
static inline void tsf_require_layers(void) {
  const char *need[] = {"Input", "InnerProduct", "EuclideanLoss", "DummyData"};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (!ct_layer_find(need[i])) {
      fprintf(stderr, "skipped: layer type %s is not in this build\n", need[i]);
      exit(77);
    }
}

/* The net: N records of D inputs, K outputs.  The bias learns at twice the
 * rate and without weight decay, so lr_mult and decay_mult are exercised. */
static inline char *quad_net_text(int N, int D, int K) {
  char *t = malloc(2048);
  snprintf(t, 2048,
           "name: 'quad'\n"
           "layer { name: 'data' type: 'Input' top: 'x' top: 'y'\n"
           "  input_param { shape { dim: %d dim: %d } shape { dim: %d dim: %d } } }\n"
           "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'pred'\n"
           "  param { lr_mult: 1 decay_mult: 1 } param { lr_mult: 2 decay_mult: 0 }\n"
           "  inner_product_param { num_output: %d\n"
           "    weight_filler { type: 'gaussian' std: 0.5 }\n"
           "    bias_filler { type: 'constant' value: 0.1 } } }\n"
           "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'pred' bottom: 'y' top: 'loss' }\n",
           N, D, N, K, K);
  return t;
}

static inline Caffe__SolverParameter *tsf_parse_solver(const char *text) {
  ProtobufCMessage *m = NULL;
  ct_error err;
  if (ct_text_parse(&caffe__solver_parameter__descriptor, text, strlen(text), "solver", &m, &err) !=
      CT_OK)
    fail_msg("solver text: %s", err.msg);
  return (Caffe__SolverParameter *)m;
}

/* A solver with options o from "net_param { <net> } <rest>" text; fails the
 * test on error. */
static inline ct_solver *tsf_solver_with(const char *net_text, const char *rest, const ct_solver_opts *o,
                                         ct_context *ctx) {
  size_t n = strlen(net_text) + strlen(rest) + 64;
  char *text = malloc(n);
  snprintf(text, n, "net_param { %s }\n%s", net_text, rest);
  Caffe__SolverParameter *p = tsf_parse_solver(text);
  free(text);
  ct_solver *s = NULL;
  ct_error err;
  if (ct_solver_init(&s, p, o, ctx, &err) != CT_OK) fail_msg("solver init: %s", err.msg);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  return s;
}

/* The same with quiet nets and no other option. */
static inline ct_solver *tsf_solver(const char *net_text, const char *rest, ct_context *ctx) {
  const ct_solver_opts o = {.quiet_nets = true};
  return tsf_solver_with(net_text, rest, &o, ctx);
}

/* Tries to make a solver from full solver text; returns the status. */
static inline ct_status tsf_try_solver(const char *text, ct_context *ctx, ct_solver **out,
                                       ct_error *err) {
  Caffe__SolverParameter *p = tsf_parse_solver(text);
  ct_solver_opts o = {.quiet_nets = true};
  ct_status st = ct_solver_init(out, p, &o, ctx, err);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  return st;
}

/* Fills the Input blobs x and y of net with `copies` repetitions of the
 * N-record batch (x: N*D values, y: N*K values). */
static inline void tsf_fill(ct_net *net, const float *x, const float *y, int N, int D, int K,
                            int copies) {
  ct_tensor *tx = ct_net_blob(net, "x"), *ty = ct_net_blob(net, "y");
  assert_non_null(tx);
  assert_non_null(ty);
  assert_int_equal(tx->count, (size_t)copies * N * D);
  assert_int_equal(ty->count, (size_t)copies * N * K);
  for (int c = 0; c < copies; c++) {
    memcpy(ct_f32(tx) + (size_t)c * N * D, x, sizeof(float) * N * D);
    memcpy(ct_f32(ty) + (size_t)c * N * K, y, sizeof(float) * N * K);
  }
}

/* The parameter tensor j of layer `name`. */
static inline ct_tensor *tsf_param(ct_net *net, const char *name, int j) {
  int li = ct_net_layer_index(net, name);
  assert_true(li >= 0);
  assert_true(j < net->layers[li]->nparams);
  return net->layers[li]->params[j];
}

/* ---------------------------------------------------------------- reference */

/* The problem and its parameters in double: W (K, D), b (K), and two
 * history slots for each. */
typedef struct tsf_ref {
  int N, D, K;
  const float *x, *y;
  double *w[2];     /* W, b */
  double *h0[2], *h1[2];
  size_t count[2];
  double lr_mult[2], decay_mult[2];
} tsf_ref;

static inline void tsf_ref_init(tsf_ref *r, ct_net *net, const float *x, const float *y, int N,
                                int D, int K) {
  memset(r, 0, sizeof *r);
  r->N = N, r->D = D, r->K = K, r->x = x, r->y = y;
  r->count[0] = (size_t)K * D;
  r->count[1] = (size_t)K;
  r->lr_mult[0] = 1, r->lr_mult[1] = 2;
  r->decay_mult[0] = 1, r->decay_mult[1] = 0;
  for (int p = 0; p < 2; p++) {
    r->w[p] = calloc(r->count[p], sizeof(double));
    r->h0[p] = calloc(r->count[p], sizeof(double));
    r->h1[p] = calloc(r->count[p], sizeof(double));
    ct_tensor *t = tsf_param(net, "ip", p);
    assert_int_equal(t->count, r->count[p]);
    for (size_t i = 0; i < r->count[p]; i++) r->w[p][i] = ct_f32(t)[i];
  }
}

static inline void tsf_ref_free(tsf_ref *r) {
  for (int p = 0; p < 2; p++) {
    free(r->w[p]);
    free(r->h0[p]);
    free(r->h1[p]);
  }
}

/* Gradient of the loss (one pass over the N records) into g[0] (W), g[1] (b);
 * returns the loss. */
static inline double tsf_ref_grad(const tsf_ref *r, double *g[2]) {
  const int N = r->N, D = r->D, K = r->K;
  memset(g[0], 0, r->count[0] * sizeof(double));
  memset(g[1], 0, r->count[1] * sizeof(double));
  double loss = 0;
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++) {
      double pred = r->w[1][k];
      for (int d = 0; d < D; d++) pred += r->w[0][k * D + d] * r->x[n * D + d];
      double diff = pred - r->y[n * K + k];
      loss += diff * diff;
      for (int d = 0; d < D; d++) g[0][k * D + d] += diff * r->x[n * D + d] / N;
      g[1][k] += diff / N;
    }
  return loss / (2.0 * N);
}

typedef struct tsf_hyper {
  const char *type;
  double rate;       /* this iteration's learning rate */
  double momentum, momentum2, delta, rms_decay, weight_decay;
  bool l1;
  double clip;       /* < 0: none */
  int iter_size;     /* the raw gradient is iter_size times one pass's */
  int iter;          /* 0-based, for Adam's correction */
  int larc;          /* NVCaffe's LARC: 0 off, 1 "scale", 2 "clip" */
  double larc_eta;
} tsf_hyper;

/* NVCaffe's LARC rate of one parameter: eta ||w|| / ||g|| (1 when a norm
 * is 0) in place of a positive lr_mult, times the rate (scale) or capped by
 * it (clip); g is the gradient after clipping and 1/iter_size. */
static inline double tsf_larc_rate(const tsf_hyper *h, double lr_mult, double w_norm,
                                   double g_norm) {
  double ratio = w_norm > 0 && g_norm > 0 ? h->larc_eta * w_norm / g_norm : 1.0;
  double local = lr_mult > 0 ? ratio : lr_mult;
  return h->larc == 1 ? h->rate * local : fmin(h->rate, local);
}

static inline double tsf_sign(double v) { return (v > 0) - (v < 0); }

/* One update of the reference by Caffe's rules; returns the loss before it. */
static inline double tsf_ref_step(tsf_ref *r, const tsf_hyper *h) {
  double *g[2] = {calloc(r->count[0], sizeof(double)), calloc(r->count[1], sizeof(double))};
  double loss = tsf_ref_grad(r, g);
  double sumsq = 0;
  for (int p = 0; p < 2; p++)
    for (size_t i = 0; i < r->count[p]; i++) {
      g[p][i] *= h->iter_size; /* accumulated over iter_size identical passes */
      sumsq += g[p][i] * g[p][i];
    }
  double scale = 1.0 / h->iter_size;
  if (h->clip >= 0 && sqrt(sumsq) > h->clip) scale *= h->clip / sqrt(sumsq);
  for (int p = 0; p < 2; p++) {
    double lr = h->rate * r->lr_mult[p], decay = h->weight_decay * r->decay_mult[p];
    if (h->larc) {
      double wsq = 0, gsq = 0;
      for (size_t i = 0; i < r->count[p]; i++) {
        wsq += r->w[p][i] * r->w[p][i];
        gsq += g[p][i] * scale * g[p][i] * scale;
      }
      lr = tsf_larc_rate(h, r->lr_mult[p], sqrt(wsq), sqrt(gsq));
    }
    for (size_t i = 0; i < r->count[p]; i++) {
      double w = r->w[p][i], gi = g[p][i] * scale;
      gi += decay * (h->l1 ? tsf_sign(w) : w);
      double *m = &r->h0[p][i], *v = &r->h1[p][i], u;
      if (!strcmp(h->type, "SGD")) {
        *m = lr * gi + h->momentum * *m;
        u = *m;
      } else if (!strcmp(h->type, "Nesterov")) {
        double prev = *m;
        *m = lr * gi + h->momentum * prev;
        u = (1 + h->momentum) * *m - h->momentum * prev;
      } else if (!strcmp(h->type, "AdaGrad")) {
        *m += gi * gi;
        u = lr * gi / (sqrt(*m) + h->delta);
      } else if (!strcmp(h->type, "RMSProp")) {
        *m = (1 - h->rms_decay) * gi * gi + h->rms_decay * *m;
        u = lr * gi / (sqrt(*m) + h->delta);
      } else if (!strcmp(h->type, "AdaDelta")) {
        *m = (1 - h->momentum) * gi * gi + h->momentum * *m;
        double d = gi * sqrt((*v + h->delta) / (*m + h->delta));
        *v = (1 - h->momentum) * d * d + h->momentum * *v;
        u = lr * d;
      } else {
        double t = h->iter + 1;
        *m = (1 - h->momentum) * gi + h->momentum * *m;
        *v = (1 - h->momentum2) * gi * gi + h->momentum2 * *v;
        u = lr * sqrt(1 - pow(h->momentum2, t)) / (1 - pow(h->momentum, t)) * *m /
            (sqrt(*v) + h->delta);
      }
      r->w[p][i] = w - u;
    }
  }
  free(g[0]);
  free(g[1]);
  return loss;
}

/* Largest |net - ref| / (|ref| + floor) over both parameters. */
static inline double tsf_ref_err(const tsf_ref *r, ct_net *net, double floor) {
  double worst = 0;
  for (int p = 0; p < 2; p++) {
    ct_tensor *t = tsf_param(net, "ip", p);
    for (size_t i = 0; i < r->count[p]; i++) {
      double e = fabs(ct_f32(t)[i] - r->w[p][i]) / (fabs(r->w[p][i]) + floor);
      if (e > worst) worst = e;
    }
  }
  return worst;
}

#endif
