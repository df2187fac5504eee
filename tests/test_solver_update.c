/* The six update rules against the textbook formulas, computed here in
 * double for a few steps on a tiny parameter vector. */
#include <math.h>
#include <stdio.h>

#include "solvers/update.h"
#include "testutil.h"

#define N 6
#define STEPS 5

/* Reference state in double. */
typedef struct ref_state {
  double w[N], h0[N], h1[N];
} ref_state;

static double ref_sign(double x) { return (x > 0) - (x < 0); }

/* One reference step of rule `type` for element i with gradient g. */
static double ref_step(const char *type, ref_state *r, int i, double g, const ct_update_hparams *hp,
                       int iter) {
  double w = r->w[i];
  g *= hp->grad_scale;
  if (hp->decay != 0) g += hp->decay * (hp->l1 ? ref_sign(w) : w);
  double u;
  if (!strcmp(type, "SGD")) {
    r->h0[i] = hp->lr * g + hp->momentum * r->h0[i];
    u = r->h0[i];
  } else if (!strcmp(type, "Nesterov")) {
    double prev = r->h0[i];
    r->h0[i] = hp->lr * g + hp->momentum * prev;
    u = (1 + hp->momentum) * r->h0[i] - hp->momentum * prev;
  } else if (!strcmp(type, "AdaGrad")) {
    r->h0[i] += g * g;
    u = hp->lr * g / (sqrt(r->h0[i]) + hp->delta);
  } else if (!strcmp(type, "RMSProp")) {
    r->h0[i] = (1 - hp->rms_decay) * g * g + hp->rms_decay * r->h0[i];
    u = hp->lr * g / (sqrt(r->h0[i]) + hp->delta);
  } else if (!strcmp(type, "AdaDelta")) {
    double rho = hp->momentum;
    r->h0[i] = (1 - rho) * g * g + rho * r->h0[i];
    double d = g * sqrt((r->h1[i] + hp->delta) / (r->h0[i] + hp->delta));
    r->h1[i] = (1 - rho) * d * d + rho * r->h1[i];
    u = hp->lr * d;
  } else {
    /* Adam: hp->lr is the plain local rate here; the correction is applied
     * from the textbook formula with t = iter + 1. */
    double b1 = hp->momentum, b2 = hp->momentum2, t = iter + 1;
    r->h0[i] = (1 - b1) * g + b1 * r->h0[i];
    r->h1[i] = (1 - b2) * g * g + b2 * r->h1[i];
    double corr = sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
    u = hp->lr * corr * r->h0[i] / (sqrt(r->h1[i]) + hp->delta);
  }
  r->w[i] = w - u;
  return u;
}

static void check_close(double got, double want, double rel, const char *what, const char *type,
                        int step, int i) {
  double tol = rel * fabs(want) + 1e-7; /* absolute floor for values that cancel to ~0 */
  if (fabs(got - want) > tol) {
    fail_msg("%s %s step %d element %d: got %.9g, want %.9g", type, what, step, i, got, want);
  }
}

/* Runs STEPS updates of `type` with the given hyper-parameters and varying
 * gradients, comparing weights, update values and history to the reference. */
static void run_rule(const char *type, ct_update_hparams hp) {
  const ct_update_rule *rule;
  ct_error err;
  assert_int_equal(ct_update_rule_lookup(type, &rule, &err), CT_OK);
  assert_string_equal(rule->type, type);
  float w[N] = {0.5f, -1.25f, 0.0f, 2.0f, -0.03f, 1.0f};
  float h0[N] = {0}, h1[N] = {0};
  ref_state r = {{0}};
  for (int i = 0; i < N; i++) r.w[i] = w[i];
  const float grads[STEPS][N] = {
      {0.1f, -0.2f, 0.3f, 0.0f, 1.5f, -0.7f},  {0.05f, 0.4f, -0.3f, 0.2f, -1.0f, 0.7f},
      {-0.3f, 0.1f, 0.0f, -0.6f, 0.5f, 0.25f}, {0.2f, -0.2f, 0.2f, -0.2f, 0.2f, -0.2f},
      {1.0f, 0.5f, -0.25f, 0.125f, 0.0f, -2.0f}};
  for (int step = 0; step < STEPS; step++) {
    float g[N];
    memcpy(g, grads[step], sizeof g);
    ct_update_hparams call = hp;
    if (!strcmp(type, "Adam"))
      call.lr = hp.lr * ct_update_adam_correction(hp.momentum, hp.momentum2, step);
    rule->cpu(N, w, g, h0, rule->nslots > 1 ? h1 : NULL, &call);
    for (int i = 0; i < N; i++) {
      double u = ref_step(type, &r, i, grads[step][i], &hp, step);
      check_close(g[i], u, 2e-5, "update", type, step, i);
      check_close(w[i], r.w[i], 2e-5, "weight", type, step, i);
      check_close(h0[i], r.h0[i], 2e-5, "history0", type, step, i);
      if (rule->nslots > 1) check_close(h1[i], r.h1[i], 2e-5, "history1", type, step, i);
    }
  }
}

static ct_update_hparams base_hp(void) {
  ct_update_hparams hp = {0};
  hp.grad_scale = 1.0f;
  hp.lr = 0.1f;
  hp.delta = 1e-8f;
  hp.momentum2 = 0.999f;
  hp.rms_decay = 0.99f;
  return hp;
}

static void test_sgd(void **state) {
  ct_update_hparams hp = base_hp();
  run_rule("SGD", hp);
  hp.momentum = 0.9f;
  hp.decay = 0.01f;
  hp.grad_scale = 0.5f;
  run_rule("SGD", hp);
  hp.l1 = true;
  run_rule("SGD", hp);
}

/* Exact small-number check of plain SGD so the test does not only compare
 * two implementations of the same thing: w = 1, g = 2, lr = 0.1, momentum 0.5,
 * L2 decay 0.25 and grad_scale 0.5 give g' = 1 + 0.25 = 1.25, h = 0.125,
 * w = 0.875; a second step with g = 2 gives g' = 1 + 0.21875, h = 0.121875 +
 * 0.0625 = 0.184375, w = 0.690625. */
static void test_sgd_by_hand(void **state) {
  float w = 1.0f, g = 2.0f, h = 0.0f;
  ct_update_hparams hp = base_hp();
  hp.momentum = 0.5f;
  hp.decay = 0.25f;
  hp.grad_scale = 0.5f;
  ct_update_sgd_cpu(1, &w, &g, &h, NULL, &hp);
  assert_float_equal(h, 0.125f, 1e-7);
  assert_float_equal(g, 0.125f, 1e-7);
  assert_float_equal(w, 0.875f, 1e-7);
  g = 2.0f;
  ct_update_sgd_cpu(1, &w, &g, &h, NULL, &hp);
  assert_float_equal(h, 0.184375f, 1e-7);
  assert_float_equal(w, 0.690625f, 1e-7);
}

/* L1 uses sign(w), and sign(0) is 0: a zero weight with zero gradient stays. */
static void test_l1_sign_of_zero(void **state) {
  float w[3] = {0.0f, 2.0f, -3.0f}, g[3] = {0, 0, 0}, h[3] = {0};
  ct_update_hparams hp = base_hp();
  hp.decay = 0.5f;
  hp.l1 = true;
  ct_update_sgd_cpu(3, w, g, h, NULL, &hp);
  assert_float_equal(w[0], 0.0f, 0);
  assert_float_equal(w[1], 2.0f - 0.05f, 1e-7);
  assert_float_equal(w[2], -3.0f + 0.05f, 1e-7);
}

static void test_nesterov(void **state) {
  ct_update_hparams hp = base_hp();
  hp.momentum = 0.9f;
  run_rule("Nesterov", hp);
  hp.decay = 0.005f;
  run_rule("Nesterov", hp);
}

static void test_adagrad(void **state) {
  ct_update_hparams hp = base_hp();
  run_rule("AdaGrad", hp);
  hp.delta = 0.1f;
  hp.decay = 0.01f;
  run_rule("AdaGrad", hp);
}

static void test_rmsprop(void **state) {
  ct_update_hparams hp = base_hp();
  run_rule("RMSProp", hp);
  hp.rms_decay = 0.9f;
  hp.delta = 1e-3f;
  hp.grad_scale = 0.25f;
  run_rule("RMSProp", hp);
}

static void test_adadelta(void **state) {
  ct_update_hparams hp = base_hp();
  hp.lr = 1.0f;
  hp.momentum = 0.95f;
  hp.delta = 1e-6f;
  run_rule("AdaDelta", hp);
  hp.decay = 0.001f;
  hp.delta = 1e-2f;
  run_rule("AdaDelta", hp);
}

static void test_adam(void **state) {
  ct_update_hparams hp = base_hp();
  hp.lr = 0.001f;
  hp.momentum = 0.9f;
  run_rule("Adam", hp);
  hp.momentum2 = 0.99f;
  hp.decay = 0.0005f;
  hp.l1 = true;
  run_rule("Adam", hp);
}

/* First Adam step: m = 0.1 g, v = 0.001 g^2, correction sqrt(0.001)/0.1,
 * so the step is lr * sign(g) (up to eps), whatever the gradient's size. */
static void test_adam_first_step(void **state) {
  float w[2] = {0, 0}, g[2] = {3.0f, -0.001f}, m[2] = {0}, v[2] = {0};
  ct_update_hparams hp = base_hp();
  hp.momentum = 0.9f;
  hp.lr = 0.01f * ct_update_adam_correction(0.9f, 0.999f, 0);
  ct_update_adam_cpu(2, w, g, m, v, &hp);
  assert_float_equal(w[0], -0.01f, 1e-6);
  assert_float_equal(w[1], 0.01f, 1e-5);
}

static void test_correction(void **state) {
  assert_float_equal(ct_update_adam_correction(0.9f, 0.999f, 0),
                     (float)(sqrt(1 - 0.999) / (1 - 0.9)), 1e-4);
  double want = sqrt(1 - pow(0.999, 10)) / (1 - pow(0.9, 10));
  assert_true(fabs(ct_update_adam_correction(0.9f, 0.999f, 9) - want) < 1e-5 * want);
}

static void test_lookup(void **state) {
  const ct_update_rule *r;
  ct_error err;
  const char *types[] = {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"};
  const int slots[] = {1, 1, 1, 1, 2, 2};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(ct_update_rule_lookup(types[i], &r, &err), CT_OK);
    assert_int_equal(r->nslots, slots[i]);
    assert_string_equal(ct_update_legacy_type_name(i), types[i]);
  }
  assert_int_equal(ct_update_rule_lookup("Adma", &r, &err), CT_ERR_NOTFOUND);
  assert_null(r);
  assert_string_equal(err.msg, "unknown solver type 'Adma' (known types: SGD, Nesterov, AdaGrad, "
                               "RMSProp, AdaDelta, Adam; did you mean 'Adam'?)");
  assert_int_equal(ct_update_rule_lookup("LBFGS", &r, &err), CT_ERR_NOTFOUND);
  assert_string_equal(err.msg, "unknown solver type 'LBFGS' (known types: SGD, Nesterov, AdaGrad, "
                               "RMSProp, AdaDelta, Adam)");
  assert_null(ct_update_legacy_type_name(6));
}

static void test_checks(void **state) {
  const ct_update_rule *r;
  ct_error err;
  Caffe__SolverParameter p = CAFFE__SOLVER_PARAMETER__INIT;
  p.has_momentum = 1;
  p.momentum = 0.9f;
  assert_int_equal(ct_update_rule_lookup("AdaGrad", &r, &err), CT_OK);
  assert_int_equal(r->check(&p, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "momentum: must be 0 for solver type AdaGrad (got 0.9); AdaGrad keeps no momentum");
  assert_int_equal(ct_update_rule_lookup("RMSProp", &r, &err), CT_OK);
  assert_int_equal(r->check(&p, &err), CT_ERR_INVALID);
  p.momentum = 0.0f;
  assert_int_equal(r->check(&p, &err), CT_OK);
  p.rms_decay = 1.0f;
  assert_int_equal(r->check(&p, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "rms_decay: must lie in [0, 1), got 1");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sgd),         cmocka_unit_test(test_sgd_by_hand),
      cmocka_unit_test(test_l1_sign_of_zero), cmocka_unit_test(test_nesterov),
      cmocka_unit_test(test_adagrad),     cmocka_unit_test(test_rmsprop),
      cmocka_unit_test(test_adadelta),    cmocka_unit_test(test_adam),
      cmocka_unit_test(test_adam_first_step), cmocka_unit_test(test_correction),
      cmocka_unit_test(test_lookup),      cmocka_unit_test(test_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
