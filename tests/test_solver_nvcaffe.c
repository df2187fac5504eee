/* NVCaffe's LARC, momentum_policy and weight_decay_policy on the CPU: the
 * schedules' values, a few iterations of a tiny net against the reference
 * (nvcaffe_solver_cases.h), the checks of the fields, and the display line. */
#include "nvcaffe_solver_cases.h"

static int setup(void **state) {
  tsf_require_layers();
  ct_log_set_level(CT_LOG_WARNING);
  return 0;
}

/* The schedules at a few iterations, against the formulas. */
static void test_schedules(void **state) {
  Caffe__SolverParameter *p = tsf_parse_solver(
      "base_lr: 0.25 lr_policy: 'fixed' max_iter: 20 momentum: 0.8 momentum_policy: 'poly' "
      "max_momentum: 0.98 momentum_power: 3 weight_decay: 0.002 weight_decay_policy: 'poly' "
      "weight_decay_power: 0.5");
  ct_lr_schedule s;
  ct_error err;
  assert_int_equal(ct_lr_schedule_init(&s, p, &err), CT_OK);
  for (int it = 0; it <= 20; it += 5) {
    double x = it / 20.0;
    assert_float_equal(ct_momentum_rate(&s, it, 0.25f), 0.8 + 0.18 * x * x * x, 1e-6);
    assert_float_equal(ct_weight_decay_rate(&s, it), 0.002 * sqrt(x), 1e-8);
  }
  ct_lr_schedule_free(&s);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  /* opt: (1 - sqrt(rate) / 2)^2, capped only when max_momentum is in the file */
  p = tsf_parse_solver("base_lr: 0.04 lr_policy: 'fixed' momentum_policy: 'opt'");
  assert_int_equal(ct_lr_schedule_init(&s, p, &err), CT_OK);
  assert_float_equal(ct_momentum_rate(&s, 3, 0.04f), 0.81, 1e-6);
  assert_float_equal(ct_momentum_rate(&s, 3, 0.0001f), 0.990025, 1e-6);
  assert_float_equal(ct_weight_decay_rate(&s, 3), 0.0, 0.0);
  ct_lr_schedule_free(&s);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  p = tsf_parse_solver("base_lr: 0.04 lr_policy: 'fixed' momentum_policy: 'opt' max_momentum: 0.9");
  assert_int_equal(ct_lr_schedule_init(&s, p, &err), CT_OK);
  assert_float_equal(ct_momentum_rate(&s, 0, 0.0001f), 0.9, 1e-7);
  assert_float_equal(ct_momentum_rate(&s, 0, 0.04f), 0.81, 1e-6);
  ct_lr_schedule_free(&s);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

/* The LARC rate of one blob, by hand: ||w|| = 5, ||g|| = 2. */
static void test_larc_rate(void **state) {
  assert_float_equal(ct_update_larc_rate(CT_UPDATE_LARC_SCALE, 0.01f, 0.5f, 1.0f, 5.0f, 2.0f),
                     0.5 * 0.025, 1e-9);
  assert_float_equal(ct_update_larc_rate(CT_UPDATE_LARC_SCALE, 0.01f, 0.5f, 2.0f, 5.0f, 2.0f),
                     0.5 * 0.025, 1e-9); /* a positive lr_mult is replaced */
  assert_float_equal(ct_update_larc_rate(CT_UPDATE_LARC_CLIP, 0.01f, 0.5f, 1.0f, 5.0f, 2.0f), 0.025,
                     1e-9);
  assert_float_equal(ct_update_larc_rate(CT_UPDATE_LARC_CLIP, 0.01f, 0.02f, 1.0f, 5.0f, 2.0f), 0.02,
                     1e-9);
  assert_float_equal(ct_update_larc_rate(CT_UPDATE_LARC_SCALE, 0.01f, 0.5f, 0.0f, 5.0f, 2.0f), 0.0,
                     0.0); /* lr_mult 0 stays */
  assert_float_equal(ct_update_larc_rate(CT_UPDATE_LARC_SCALE, 0.01f, 0.5f, 1.0f, 0.0f, 2.0f), 0.5,
                     0.0); /* ||w|| = 0: ratio 1 */
  assert_float_equal(ct_update_larc_rate(CT_UPDATE_LARC_SCALE, 0.01f, 0.5f, 1.0f, 5.0f, NAN), 0.5,
                     0.0); /* a NaN norm counts as 0 */
}

static void test_cases(void **state) {
  for (size_t i = 0; i < NV_NCASES; i++) nv_run(CT_DEVICE_CPU, &g_nv_cases[i], 4, 3, 2, 6);
}

static void expect_error(const char *rest, const char *want) {
  char *net = quad_net_text(4, 3, 2);
  size_t n = strlen(net) + strlen(rest) + 64;
  char *text = malloc(n);
  snprintf(text, n, "net_param { %s }\n%s", net, rest);
  free(net);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_solver *s = NULL;
  ct_error err;
  assert_int_equal(tsf_try_solver(text, &ctx, &s, &err), CT_ERR_INVALID);
  if (!strstr(err.msg, want)) fail_msg("error '%s' lacks '%s'", err.msg, want);
  free(text);
  ct_context_free(&ctx);
}

static void test_errors(void **state) {
  expect_error("base_lr: 0.1 lr_policy: 'fixed' momentum_policy: 'pol'",
               "momentum_policy: unknown policy 'pol' (known: fixed, poly, opt; did you mean 'poly'?)");
  expect_error("base_lr: 0.1 lr_policy: 'fixed' weight_decay_policy: 'fxed'",
               "weight_decay_policy: unknown policy 'fxed' (known: fixed, poly; did you mean 'fixed'?)");
  expect_error("base_lr: 0.1 lr_policy: 'fixed' momentum_policy: 'poly'",
               "max_iter: momentum_policy 'poly' needs max_iter > 0, got 0");
  expect_error("base_lr: 0.1 lr_policy: 'fixed' weight_decay_policy: 'poly'",
               "max_iter: weight_decay_policy 'poly' needs max_iter > 0, got 0");
  expect_error("base_lr: 0.1 lr_policy: 'fixed' larc: true larc_policy: 'scal'",
               "larc_policy: unknown policy 'scal' (known: scale, clip; did you mean 'scale'?)");
}

/* NVCaffe's display line with the schedules, Caffe's without; and the
 * warnings for fields NVCaffe ignores for a solver type. */
static void log_of(const char *rest, int iters, char **text) {
  const char *dir = tu_tmpdir("test_solver_nvcaffe");
  char path[512];
  snprintf(path, sizeof path, "%s/log.txt", dir);
  ct_error err;
  ct_log_set_level(CT_LOG_INFO);
  assert_int_equal(ct_log_set_file(path, &err), CT_OK);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  char *net = quad_net_text(4, 3, 2);
  ct_solver *s = tsf_solver(net, rest, &ctx);
  free(net);
  assert_int_equal(ct_solver_step(s, iters, &err), CT_OK);
  ct_solver_free(s);
  ct_context_free(&ctx);
  assert_int_equal(ct_log_set_file(NULL, &err), CT_OK);
  ct_log_set_level(CT_LOG_WARNING);
  *text = tu_read_file(path, NULL);
  assert_non_null(*text);
}

static void test_log_lines(void **state) {
  char *t;
  log_of("type: 'SGD' base_lr: 0.04 lr_policy: 'fixed' momentum: 0.5 momentum_policy: 'poly' "
         "max_momentum: 0.9 weight_decay: 0.01 weight_decay_policy: 'poly' weight_decay_power: 1 "
         "max_iter: 4 display: 2",
         3, &t);
  assert_non_null(strstr(t, "Iteration 0, lr = 0.04, m = 0.5, wd = 0\n"));
  assert_non_null(strstr(t, "Iteration 2, lr = 0.04, m = 0.7, wd = 0.005\n"));
  free(t);
  log_of("type: 'SGD' base_lr: 0.04 lr_policy: 'fixed' momentum: 0.5 display: 1", 1, &t);
  assert_non_null(strstr(t, "Iteration 0, lr = 0.04\n"));
  free(t);
  log_of("type: 'Adam' base_lr: 0.01 lr_policy: 'fixed' momentum: 0.9 momentum_policy: 'opt' "
         "larc: true",
         1, &t);
  assert_non_null(strstr(t, "larc: NVCaffe's LARC applies to solver type SGD only; the Adam solver "
                            "ignores it"));
  assert_non_null(strstr(t, "momentum_policy: NVCaffe schedules the momentum of solver type SGD "
                            "only; the Adam solver keeps momentum 0.9"));
  free(t);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schedules), cmocka_unit_test(test_larc_rate),
      cmocka_unit_test(test_cases),     cmocka_unit_test(test_errors),
      cmocka_unit_test(test_log_lines),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
