/* NVCaffe's solver fields (LARC, momentum_policy, weight_decay_policy) on
 * the least-squares net of test_solver_fixture.h, on either device, against
 * the double-precision reference with every iteration's momentum, weight
 * decay and LARC rate computed here from NVCaffe's formulas.  Shared by
 * test_solver_nvcaffe.c (CPU) and test_gpu_solver_nvcaffe.c. */
#ifndef CT_TEST_NVCAFFE_SOLVER_CASES_H
#define CT_TEST_NVCAFFE_SOLVER_CASES_H

#include "core/mem.h"
#include "test_solver_fixture.h"

typedef enum nv_momentum { NV_M_FIXED, NV_M_POLY, NV_M_OPT } nv_momentum;

typedef struct nv_case {
  const char *name;
  const char *solver_text; /* everything but the net */
  tsf_hyper hyper;         /* rate, momentum and weight_decay are filled per iteration */
  double base_lr;          /* lr_policy fixed */
  nv_momentum momentum_policy;
  double momentum, max_momentum, momentum_power; /* max_momentum < 0: not in the file */
  bool decay_poly;
  double weight_decay, decay_power;
  int max_iter;
} nv_case;

/* The momentum and weight decay of iteration it, from NVCaffe's formulas. */
static inline void nv_schedule(const nv_case *c, int it, tsf_hyper *h) {
  const double progress = (double)it / c->max_iter;
  switch (c->momentum_policy) {
    case NV_M_FIXED: h->momentum = c->momentum; break;
    case NV_M_POLY:
      h->momentum = c->momentum + (c->max_momentum - c->momentum) * pow(progress, c->momentum_power);
      break;
    case NV_M_OPT: {
      double m = (1 - 0.5 * sqrt(h->rate)) * (1 - 0.5 * sqrt(h->rate));
      h->momentum = c->max_momentum >= 0 && c->max_momentum < m ? c->max_momentum : m;
      break;
    }
  }
  h->weight_decay = c->decay_poly ? c->weight_decay * pow(progress, c->decay_power) : c->weight_decay;
}

/* Copies host values into a (possibly device) tensor and back. */
static inline void nv_put(ct_context *ctx, ct_tensor *t, const float *x, size_t n) {
  assert_int_equal(t->count, n);
  ct_mem_copy(ctx->device, t->data, CT_DEVICE_CPU, x, n * sizeof(float));
}

/* Largest |net - ref| / (|ref| + floor) over both parameters, on any device. */
static inline double nv_ref_err(ct_context *ctx, const tsf_ref *r, ct_net *net, double floor) {
  double worst = 0;
  for (int p = 0; p < 2; p++) {
    ct_tensor *t = tsf_param(net, "ip", p);
    float *host = malloc(t->count * sizeof(float));
    ct_mem_copy(CT_DEVICE_CPU, host, ctx->device, t->data, t->count * sizeof(float));
    for (size_t i = 0; i < r->count[p]; i++) {
      double e = fabs(host[i] - r->w[p][i]) / (fabs(r->w[p][i]) + floor);
      if (e > worst) worst = e;
    }
    free(host);
  }
  return worst;
}

/* Trains `iters` iterations of case c on device (CT_DEVICE_CPU or a GPU)
 * with N records of D inputs and K outputs, and compares the parameters
 * with the reference. */
static inline void nv_run(int device, const nv_case *c, int N, int D, int K, int iters) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, device, 1, NULL), CT_OK);
  float *x = malloc((size_t)N * D * sizeof(float)), *y = malloc((size_t)N * K * sizeof(float));
  tu_fill_uniform(x, (size_t)N * D, -1.0f, 1.0f, 11);
  tu_fill_uniform(y, (size_t)N * K, -2.0f, 2.0f, 12);
  char *net = quad_net_text(N, D, K);
  ct_solver *s = tsf_solver(net, c->solver_text, &ctx);
  free(net);
  nv_put(&ctx, ct_net_blob(s->net, "x"), x, (size_t)N * D);
  nv_put(&ctx, ct_net_blob(s->net, "y"), y, (size_t)N * K);
  /* the reference starts from the net's (host copies of its) weights */
  tsf_ref ref;
  memset(&ref, 0, sizeof ref);
  ref.N = N, ref.D = D, ref.K = K, ref.x = x, ref.y = y;
  ref.count[0] = (size_t)K * D, ref.count[1] = (size_t)K;
  ref.lr_mult[0] = 1, ref.lr_mult[1] = 2, ref.decay_mult[0] = 1, ref.decay_mult[1] = 0;
  for (int p = 0; p < 2; p++) {
    ref.w[p] = calloc(ref.count[p], sizeof(double));
    ref.h0[p] = calloc(ref.count[p], sizeof(double));
    ref.h1[p] = calloc(ref.count[p], sizeof(double));
    float *host = malloc(ref.count[p] * sizeof(float));
    ct_tensor *t = tsf_param(s->net, "ip", p);
    ct_mem_copy(CT_DEVICE_CPU, host, device, t->data, ref.count[p] * sizeof(float));
    for (size_t i = 0; i < ref.count[p]; i++) ref.w[p][i] = host[i];
    free(host);
  }
  for (int it = 0; it < iters; it++) {
    tsf_hyper h = c->hyper;
    h.iter = it;
    h.rate = c->base_lr;
    nv_schedule(c, it, &h);
    tsf_ref_step(&ref, &h);
  }
  ct_error err;
  assert_int_equal(ct_solver_step(s, iters, &err), CT_OK);
  double e = nv_ref_err(&ctx, &ref, s->net, 1e-3);
  if (e > 2e-4) fail_msg("%s: parameters differ from the reference by %g", c->name, e);
  tsf_ref_free(&ref);
  ct_solver_free(s);
  ct_context_free(&ctx);
  free(x);
  free(y);
}

/* The cases, each with its hand-computed schedule. */
static const nv_case g_nv_cases[] = {
    {"LARC scale", "type: 'SGD' base_lr: 0.5 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.01 "
                   "larc: true larc_policy: 'scale' larc_eta: 0.02 clip_gradients: 0.8 iter_size: 2 "
                   "max_iter: 10 random_seed: 3",
     {.type = "SGD", .clip = 0.8, .iter_size = 2, .larc = 1, .larc_eta = 0.02},
     0.5, NV_M_FIXED, 0.9, -1, 1, false, 0.01, 0.5, 10},
    {"LARC clip", "type: 'SGD' base_lr: 0.05 lr_policy: 'fixed' momentum: 0.5 weight_decay: 0.02 "
                  "larc: true larc_policy: 'clip' larc_eta: 0.05 max_iter: 10 random_seed: 4",
     {.type = "SGD", .clip = -1, .iter_size = 1, .larc = 2, .larc_eta = 0.05},
     0.05, NV_M_FIXED, 0.5, -1, 1, false, 0.02, 0.5, 10},
    {"momentum and weight decay poly",
     "type: 'SGD' base_lr: 0.05 lr_policy: 'fixed' momentum: 0.5 momentum_policy: 'poly' "
     "max_momentum: 0.95 momentum_power: 2 weight_decay: 0.05 weight_decay_policy: 'poly' "
     "weight_decay_power: 0.5 max_iter: 8 random_seed: 5",
     {.type = "SGD", .clip = -1, .iter_size = 1}, 0.05, NV_M_POLY, 0.5, 0.95, 2, true, 0.05, 0.5, 8},
    {"momentum opt, capped", "type: 'SGD' base_lr: 0.09 lr_policy: 'fixed' momentum: 0.2 "
                             "momentum_policy: 'opt' max_momentum: 0.7 max_iter: 8 random_seed: 6",
     {.type = "SGD", .clip = -1, .iter_size = 1}, 0.09, NV_M_OPT, 0.2, 0.7, 1, false, 0, 0.5, 8},
    {"momentum opt with LARC", "type: 'SGD' base_lr: 0.04 lr_policy: 'fixed' momentum_policy: 'opt' "
                               "larc: true larc_eta: 0.01 weight_decay: 0.001 max_iter: 8 random_seed: 7",
     {.type = "SGD", .clip = -1, .iter_size = 1, .larc = 1, .larc_eta = 0.01},
     0.04, NV_M_OPT, 0, -1, 1, false, 0.001, 0.5, 8},
    /* Nesterov: NVCaffe schedules its weight decay but not its momentum,
     * and has no LARC */
    {"Nesterov", "type: 'Nesterov' base_lr: 0.05 lr_policy: 'fixed' momentum: 0.6 "
                 "momentum_policy: 'poly' larc: true weight_decay: 0.05 weight_decay_policy: 'poly' "
                 "weight_decay_power: 1 max_iter: 8 random_seed: 8",
     {.type = "Nesterov", .clip = -1, .iter_size = 1}, 0.05, NV_M_FIXED, 0.6, -1, 1, true, 0.05, 1, 8},
};
#define NV_NCASES (sizeof g_nv_cases / sizeof g_nv_cases[0])

#endif
