/* Learning-rate policies at several iterations against their formulas. */
#include <math.h>
#include <string.h>

#include "solvers/lr_policy.h"
#include "testutil.h"

static Caffe__SolverParameter solver(const char *policy) {
  Caffe__SolverParameter p = CAFFE__SOLVER_PARAMETER__INIT;
  p.lr_policy = (char *)policy;
  p.has_base_lr = 1;
  p.base_lr = 0.01f;
  return p;
}

static void expect_rate(const ct_lr_schedule *s, int iter, int *step, double want) {
  float got = ct_lr_rate(s, iter, step);
  if (fabs(got - want) > 1e-6 * fabs(want) + 1e-12)
    fail_msg("%s at iter %d: got %.9g, want %.9g", ct_lr_policy_name(s->policy), iter, got, want);
}

static void test_fixed(void **state) {
  Caffe__SolverParameter p = solver("fixed");
  ct_lr_schedule s;
  assert_int_equal(ct_lr_schedule_init(&s, &p, NULL), CT_OK);
  int step = 0;
  for (int it = 0; it < 3000; it += 999) expect_rate(&s, it, &step, 0.01);
  assert_int_equal(step, 0);
  ct_lr_schedule_free(&s);
}

static void test_step(void **state) {
  Caffe__SolverParameter p = solver("step");
  p.gamma = 0.1f;
  p.stepsize = 100;
  ct_lr_schedule s;
  assert_int_equal(ct_lr_schedule_init(&s, &p, NULL), CT_OK);
  int step = 0;
  const int iters[] = {0, 99, 100, 250, 1000};
  for (int i = 0; i < 5; i++) {
    expect_rate(&s, iters[i], &step, 0.01 * pow(0.1, iters[i] / 100));
    assert_int_equal(step, iters[i] / 100);
  }
  ct_lr_schedule_free(&s);
}

static void test_exp(void **state) {
  Caffe__SolverParameter p = solver("exp");
  p.gamma = 0.999f;
  ct_lr_schedule s;
  assert_int_equal(ct_lr_schedule_init(&s, &p, NULL), CT_OK);
  int step = 0;
  const int iters[] = {0, 1, 10, 500, 5000};
  for (int i = 0; i < 5; i++) expect_rate(&s, iters[i], &step, 0.01 * pow(0.999f, iters[i]));
  ct_lr_schedule_free(&s);
}

/* LeNet's schedule: base 0.01, gamma 1e-4, power 0.75. */
static void test_inv(void **state) {
  Caffe__SolverParameter p = solver("inv");
  p.gamma = 0.0001f;
  p.power = 0.75f;
  ct_lr_schedule s;
  assert_int_equal(ct_lr_schedule_init(&s, &p, NULL), CT_OK);
  int step = 0;
  const int iters[] = {0, 100, 5000, 10000};
  for (int i = 0; i < 4; i++)
    expect_rate(&s, iters[i], &step, 0.01 * pow(1 + 0.0001f * iters[i], -0.75));
  /* the value BVLC Caffe logs at iteration 10000 of LeNet */
  expect_rate(&s, 10000, &step, 0.00594604);
  ct_lr_schedule_free(&s);
}

/* Caffe's multistep advances current_step by at most one per call, only when
 * the iteration has reached the next step value; resuming with the saved
 * current_step continues the same schedule. */
static void test_multistep(void **state) {
  Caffe__SolverParameter p = solver("multistep");
  p.gamma = 0.5f;
  int values[] = {5, 8, 8, 20};
  p.stepvalue = values;
  p.n_stepvalue = 4;
  ct_lr_schedule s;
  assert_int_equal(ct_lr_schedule_init(&s, &p, NULL), CT_OK);
  int step = 0;
  int want_step[25];
  int k = 0;
  for (int it = 0; it < 25; it++) {
    if (k < 4 && it >= values[k]) k++;
    want_step[it] = k;
  }
  for (int it = 0; it < 25; it++) {
    expect_rate(&s, it, &step, 0.01 * pow(0.5, want_step[it]));
    assert_int_equal(step, want_step[it]);
  }
  /* the duplicate 8 costs one extra call: at 8 the step is 2, at 9 it is 3 */
  assert_int_equal(want_step[8], 2);
  assert_int_equal(want_step[9], 3);
  /* a jump (as after a restore without current_step) catches up one per call */
  step = 0;
  expect_rate(&s, 30, &step, 0.01 * 0.5);
  expect_rate(&s, 31, &step, 0.01 * 0.25);
  ct_lr_schedule_free(&s);
}

static void test_poly(void **state) {
  Caffe__SolverParameter p = solver("poly");
  p.power = 2.0f;
  p.max_iter = 1000;
  ct_lr_schedule s;
  assert_int_equal(ct_lr_schedule_init(&s, &p, NULL), CT_OK);
  int step = 0;
  const int iters[] = {0, 250, 500, 999};
  for (int i = 0; i < 4; i++)
    expect_rate(&s, iters[i], &step, 0.01 * pow(1 - iters[i] / 1000.0, 2.0));
  expect_rate(&s, 500, &step, 0.0025);
  assert_float_equal(ct_lr_rate(&s, 1000, &step), 0.0f, 0);
  ct_lr_schedule_free(&s);
}

static void test_sigmoid(void **state) {
  Caffe__SolverParameter p = solver("sigmoid");
  p.gamma = 0.05f;
  p.stepsize = 200;
  ct_lr_schedule s;
  assert_int_equal(ct_lr_schedule_init(&s, &p, NULL), CT_OK);
  int step = 0;
  const int iters[] = {0, 100, 200, 300, 1000};
  for (int i = 0; i < 5; i++)
    expect_rate(&s, iters[i], &step, 0.01 / (1 + exp(-0.05f * (iters[i] - 200.0))));
  expect_rate(&s, 200, &step, 0.005);
  ct_lr_schedule_free(&s);
}

static void expect_error(Caffe__SolverParameter *p, const char *msg) {
  ct_lr_schedule s;
  ct_error err;
  assert_int_equal(ct_lr_schedule_init(&s, p, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  ct_lr_schedule_free(&s);
}

/* NVCaffe's min_lr: a floor under any policy's rate; negative is refused. */
static void test_min_lr(void **state) {
  Caffe__SolverParameter p = solver("step");
  p.gamma = 0.1f;
  p.stepsize = 100;
  p.has_min_lr = 1;
  p.min_lr = 2e-5f;
  ct_lr_schedule s;
  assert_int_equal(ct_lr_schedule_init(&s, &p, NULL), CT_OK);
  int step = 0;
  expect_rate(&s, 0, &step, 0.01);
  expect_rate(&s, 150, &step, 0.001);
  expect_rate(&s, 250, &step, 1e-4);
  expect_rate(&s, 350, &step, 2e-5); /* 1e-5 by the policy */
  expect_rate(&s, 1000, &step, 2e-5);
  ct_lr_schedule_free(&s);
  p.min_lr = -1.0f;
  ct_error err;
  assert_int_equal(ct_lr_schedule_init(&s, &p, &err), CT_ERR_INVALID);
  assert_non_null(strstr(err.msg, "min_lr"));
}

/* NVCaffe 0.17's ramp-up: quadratic from rampup_lr to base_lr over
 * rampup_interval iterations, the policy (and multistep's current_step)
 * untouched meanwhile; min_lr still a floor. */
static void test_rampup(void **state) {
  Caffe__SolverParameter p = solver("multistep");
  p.gamma = 0.1f;
  int32_t steps[] = {50, 200};
  p.stepvalue = steps;
  p.n_stepvalue = 2;
  p.rampup_interval = 100;
  p.has_rampup_lr = 1;
  p.rampup_lr = 0.002f;
  ct_lr_schedule s;
  assert_int_equal(ct_lr_schedule_init(&s, &p, NULL), CT_OK);
  int step = 0;
  expect_rate(&s, 0, &step, 0.002);
  expect_rate(&s, 25, &step, 0.002 + 0.008 * 0.0625);
  expect_rate(&s, 50, &step, 0.002 + 0.008 * 0.25); /* a stepvalue passes inside the ramp-up */
  assert_int_equal(step, 0);
  expect_rate(&s, 99, &step, 0.002 + 0.008 * 0.99 * 0.99);
  expect_rate(&s, 100, &step, 0.001);               /* the policy: step 50 passed */
  assert_int_equal(step, 1);
  ct_lr_schedule_free(&s);
  /* no rampup_lr: from 0; min_lr holds the ramp-up too */
  p = solver("fixed");
  p.rampup_interval = 10;
  p.has_min_lr = 1;
  p.min_lr = 0.001f;
  assert_int_equal(ct_lr_schedule_init(&s, &p, NULL), CT_OK);
  expect_rate(&s, 0, &step, 0.001);
  expect_rate(&s, 5, &step, 0.0025);
  expect_rate(&s, 10, &step, 0.01);
  ct_lr_schedule_free(&s);
  p.rampup_interval = -1;
  ct_error err;
  assert_int_equal(ct_lr_schedule_init(&s, &p, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "rampup_interval: must not be negative, got -1");
}

/* NVCaffe's poly with min_lr decays to min_lr, not to 0 clamped. */
static void test_poly_min_lr(void **state) {
  Caffe__SolverParameter p = solver("poly");
  p.max_iter = 1000;
  p.power = 2.0f;
  p.has_min_lr = 1;
  p.min_lr = 0.001f;
  ct_lr_schedule s;
  assert_int_equal(ct_lr_schedule_init(&s, &p, NULL), CT_OK);
  int step = 0;
  expect_rate(&s, 0, &step, 0.01);
  expect_rate(&s, 500, &step, 0.009 * 0.25 + 0.001);
  expect_rate(&s, 1000, &step, 0.001);
  ct_lr_schedule_free(&s);
  p.min_lr = 0.02f;
  ct_error err;
  assert_int_equal(ct_lr_schedule_init(&s, &p, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "min_lr: lr_policy 'poly' decays from base_lr to min_lr, but base_lr 0.01 "
                               "is below min_lr 0.02");
}

static void test_errors(void **state) {
  Caffe__SolverParameter p = solver("stpe");
  expect_error(&p, "lr_policy: unknown policy 'stpe' (known: fixed, step, exp, inv, multistep, "
                   "poly, sigmoid; did you mean 'step'?)");
  p = solver("cosine");
  expect_error(&p, "lr_policy: unknown policy 'cosine' (known: fixed, step, exp, inv, multistep, "
                   "poly, sigmoid)");
  p = solver(NULL);
  expect_error(&p, "lr_policy: not set (one of fixed, step, exp, inv, multistep, poly, sigmoid)");
  p = solver("step");
  p.gamma = 0.1f;
  expect_error(&p, "stepsize: lr_policy 'step' needs stepsize > 0, got 0");
  p = solver("sigmoid");
  p.stepsize = 10;
  p.gamma = -1.0f;
  expect_error(&p, "gamma: lr_policy 'sigmoid' needs gamma >= 0, got -1");
  p = solver("poly");
  expect_error(&p, "max_iter: lr_policy 'poly' needs max_iter > 0, got 0");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixed),     cmocka_unit_test(test_step),
      cmocka_unit_test(test_exp),       cmocka_unit_test(test_inv),
      cmocka_unit_test(test_multistep), cmocka_unit_test(test_poly),
      cmocka_unit_test(test_sigmoid),   cmocka_unit_test(test_errors),
      cmocka_unit_test(test_min_lr),    cmocka_unit_test(test_rampup),
      cmocka_unit_test(test_poly_min_lr),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
