/* Training a tiny least-squares net with each solver type, against a
 * double-precision reference of Caffe's update for the same problem; and
 * gradient accumulation (iter_size) and clipping. */
#include "test_solver_fixture.h"

#define N 4
#define D 3
#define K 2

static float g_x[N * D], g_y[N * K];

static int setup(void **state) {
  tsf_require_layers();
  tu_fill_uniform(g_x, N * D, -1.0f, 1.0f, 11);
  tu_fill_uniform(g_y, N * K, -2.0f, 2.0f, 12);
  ct_log_set_level(CT_LOG_WARNING);
  return 0;
}

typedef struct rule_case {
  const char *solver_text; /* everything but the net */
  tsf_hyper hyper;         /* rate is filled per iteration */
  double base_lr, gamma;
  int stepsize;            /* 0: fixed */
} rule_case;

static void run_case(const rule_case *c, int iters) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  char *net = quad_net_text(N, D, K);
  ct_solver *s = tsf_solver(net, c->solver_text, &ctx);
  free(net);
  tsf_fill(s->net, g_x, g_y, N, D, K, 1);
  tsf_ref ref;
  tsf_ref_init(&ref, s->net, g_x, g_y, N, D, K);
  double last_loss = 0;
  for (int it = 0; it < iters; it++) {
    tsf_hyper h = c->hyper;
    h.iter = it;
    h.rate = c->stepsize ? c->base_lr * pow(c->gamma, it / c->stepsize) : c->base_lr;
    last_loss = tsf_ref_step(&ref, &h);
  }
  ct_error err;
  assert_int_equal(ct_solver_step(s, iters, &err), CT_OK);
  assert_int_equal(s->iter, iters);
  double e = tsf_ref_err(&ref, s->net, 1e-3);
  if (e > 1e-4) fail_msg("%s: parameters differ from the reference by %g", c->hyper.type, e);
  /* average_loss 1: the smoothed loss is the last iteration's */
  assert_true(fabs(s->smoothed_loss - last_loss) <= 1e-5 * (fabs(last_loss) + 1e-3));
  /* the parameters moved: the reference is not trivially the start */
  tsf_ref start;
  ct_context ctx2;
  assert_int_equal(ct_context_init(&ctx2, CT_DEVICE_CPU, 1, NULL), CT_OK);
  char *net2 = quad_net_text(N, D, K);
  ct_solver *s2 = tsf_solver(net2, c->solver_text, &ctx2);
  free(net2);
  tsf_ref_init(&start, s2->net, g_x, g_y, N, D, K);
  assert_true(tsf_ref_err(&start, s->net, 1e-3) > 1e-2);
  tsf_ref_free(&start);
  ct_solver_free(s2);
  ct_context_free(&ctx2);
  tsf_ref_free(&ref);
  ct_solver_free(s);
  ct_context_free(&ctx);
}

static void test_sgd(void **state) {
  rule_case c = {"type: 'SGD' base_lr: 0.05 lr_policy: 'step' gamma: 0.5 stepsize: 2 "
                 "momentum: 0.9 weight_decay: 0.01 random_seed: 3",
                 {.type = "SGD", .momentum = 0.9, .weight_decay = 0.01, .clip = -1, .iter_size = 1},
                 0.05, 0.5, 2};
  run_case(&c, 6);
}

static void test_nesterov(void **state) {
  rule_case c = {"type: 'Nesterov' base_lr: 0.05 lr_policy: 'step' gamma: 0.5 stepsize: 3 "
                 "momentum: 0.9 weight_decay: 0.02 random_seed: 4",
                 {.type = "Nesterov", .momentum = 0.9, .weight_decay = 0.02, .clip = -1,
                  .iter_size = 1},
                 0.05, 0.5, 3};
  run_case(&c, 6);
}

static void test_adagrad(void **state) {
  rule_case c = {"type: 'AdaGrad' base_lr: 0.1 lr_policy: 'fixed' weight_decay: 0.01 "
                 "delta: 1e-6 random_seed: 5",
                 {.type = "AdaGrad", .delta = 1e-6, .weight_decay = 0.01, .clip = -1,
                  .iter_size = 1},
                 0.1, 0, 0};
  run_case(&c, 6);
}

static void test_rmsprop(void **state) {
  rule_case c = {"type: 'RMSProp' base_lr: 0.01 lr_policy: 'fixed' rms_decay: 0.9 "
                 "delta: 1e-6 weight_decay: 0.001 random_seed: 6",
                 {.type = "RMSProp", .rms_decay = 0.9, .delta = 1e-6, .weight_decay = 0.001,
                  .clip = -1, .iter_size = 1},
                 0.01, 0, 0};
  run_case(&c, 6);
}

static void test_adadelta(void **state) {
  rule_case c = {"type: 'AdaDelta' base_lr: 1 lr_policy: 'fixed' momentum: 0.95 delta: 1e-6 "
                 "weight_decay: 0.001 random_seed: 7",
                 {.type = "AdaDelta", .momentum = 0.95, .delta = 1e-6, .weight_decay = 0.001,
                  .clip = -1, .iter_size = 1},
                 1.0, 0, 0};
  run_case(&c, 6);
}

static void test_adam(void **state) {
  rule_case c = {"type: 'Adam' base_lr: 0.01 lr_policy: 'step' gamma: 0.5 stepsize: 4 "
                 "momentum: 0.9 momentum2: 0.999 regularization_type: 'L1' "
                 "weight_decay: 0.01 random_seed: 8",
                 {.type = "Adam", .momentum = 0.9, .momentum2 = 0.999, .delta = 1e-8,
                  .weight_decay = 0.01, .l1 = true, .clip = -1, .iter_size = 1},
                 0.01, 0.5, 4};
  run_case(&c, 6);
}

/* The legacy enum solver_type still selects the rule. */
static void test_legacy_solver_type(void **state) {
  rule_case c = {"solver_type: NESTEROV base_lr: 0.05 lr_policy: 'fixed' momentum: 0.5 "
                 "random_seed: 9",
                 {.type = "Nesterov", .momentum = 0.5, .clip = -1, .iter_size = 1}, 0.05, 0, 0};
  run_case(&c, 4);
}

/* Clipping scales the raw accumulated gradient (before 1/iter_size and
 * before weight decay), as Caffe's ApplyUpdate does. */
static void test_clip_gradients(void **state) {
  rule_case c = {"type: 'SGD' base_lr: 0.1 lr_policy: 'fixed' momentum: 0.5 weight_decay: 0.05 "
                 "clip_gradients: 0.3 iter_size: 2 random_seed: 10",
                 {.type = "SGD", .momentum = 0.5, .weight_decay = 0.05, .clip = 0.3,
                  .iter_size = 2},
                 0.1, 0, 0};
  run_case(&c, 5);
}

/* iter_size k over batches of N equals one pass over the same k*N records. */
static void check_iter_size(const char *rule_text) {
  const int k = 3;
  ct_context ca, cb;
  assert_int_equal(ct_context_init(&ca, CT_DEVICE_CPU, 1, NULL), CT_OK);
  assert_int_equal(ct_context_init(&cb, CT_DEVICE_CPU, 1, NULL), CT_OK);
  char rest_a[512], rest_b[512];
  snprintf(rest_a, sizeof rest_a, "%s iter_size: %d random_seed: 21", rule_text, k);
  snprintf(rest_b, sizeof rest_b, "%s random_seed: 21", rule_text);
  char *net_a = quad_net_text(N, D, K), *net_b = quad_net_text(k * N, D, K);
  ct_solver *a = tsf_solver(net_a, rest_a, &ca), *b = tsf_solver(net_b, rest_b, &cb);
  free(net_a);
  free(net_b);
  tsf_fill(a->net, g_x, g_y, N, D, K, 1);
  tsf_fill(b->net, g_x, g_y, N, D, K, k);
  ct_error err;
  assert_int_equal(ct_solver_step(a, 4, &err), CT_OK);
  assert_int_equal(ct_solver_step(b, 4, &err), CT_OK);
  for (int p = 0; p < 2; p++) {
    ct_tensor *ta = tsf_param(a->net, "ip", p), *tb = tsf_param(b->net, "ip", p);
    double e = tu_max_rel_err(ta->data, tb->data, ta->count, 1e-3);
    if (e > 1e-5) fail_msg("%s: iter_size %d differs from one batch of %d by %g", rule_text, k,
                           k * N, e);
  }
  assert_true(fabs(a->smoothed_loss - b->smoothed_loss) <= 1e-5 * fabs(b->smoothed_loss));
  ct_solver_free(a);
  ct_solver_free(b);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

static void test_iter_size(void **state) {
  check_iter_size("type: 'SGD' base_lr: 0.05 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.05");
  check_iter_size("type: 'Adam' base_lr: 0.01 lr_policy: 'fixed' momentum: 0.9 weight_decay: 0.05");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sgd),          cmocka_unit_test(test_nesterov),
      cmocka_unit_test(test_adagrad),      cmocka_unit_test(test_rmsprop),
      cmocka_unit_test(test_adadelta),     cmocka_unit_test(test_adam),
      cmocka_unit_test(test_legacy_solver_type), cmocka_unit_test(test_clip_gradients),
      cmocka_unit_test(test_iter_size),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
