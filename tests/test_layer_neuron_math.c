/* Power, Exp, Log and Dropout against double-precision references, gradient
 * checks with Caffe's settings, in place against out of place, and bad
 * parameters. */
#include "neurontest.h"

static void expect_setup_error(const Caffe__LayerParameter *p, const char *shape, const char *msg) {
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

/* ---------------------------------------------------------------- Power */
typedef struct {
  float power, scale, shift;
} power_case;
static power_case g_pow;

/* Caffe's trick for fractional powers: reflect values whose base
 * shift + scale * x would be negative about the root -shift / scale. */
static float reflect_for_power(float v) {
  if (g_pow.power == 0 || g_pow.power == 1 || g_pow.power == 2 || g_pow.scale == 0) return v;
  float root = -g_pow.shift / g_pow.scale;
  if (g_pow.scale > 0 ? v < root + 0.05f : v > root - 0.05f) v = 2 * root - v;
  if (fabsf(v - root) < 0.05f) v = root + (g_pow.scale > 0 ? 0.05f : -0.05f);
  return v;
}
static void power_values(tu_layer_case *c) { nt_map_values(c->bottom[0], reflect_for_power); }

static Caffe__LayerParameter power_param(Caffe__PowerParameter *pp, power_case pc) {
  Caffe__LayerParameter p = nt_layer("pow", "Power");
  caffe__power_parameter__init(pp);
  pp->has_power = pp->has_scale = pp->has_shift = 1;
  pp->power = pc.power;
  pp->scale = pc.scale;
  pp->shift = pc.shift;
  p.power_param = pp;
  return p;
}

static void test_power(void **state) {
  const power_case cases[] = {
      {0.37f, 0.83f, -2.4f}, {0.37f, 0.83f, 0.0f}, {0.37f, -0.83f, 1.5f}, {2.0f, 0.34f, -2.4f},
      {2.0f, 0.83f, 0.0f},   {1.0f, 0.83f, -2.4f}, {0.0f, 0.83f, -2.4f},  {-1.5f, 1.2f, 2.2f},
      {3.0f, 0.5f, 0.25f},   {1.5f, 0.0f, 2.0f},   {1.0f, 1.0f, 0.0f},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    g_pow = cases[k];
    Caffe__PowerParameter pp;
    Caffe__LayerParameter p = power_param(&pp, g_pow);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
    power_values(&c);
    tu_forward(&c);
    float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]);
    double want[120];
    for (int i = 0; i < 120; i++)
      want[i] = pow((double)g_pow.shift + (double)g_pow.scale * x[i], (double)g_pow.power);
    nt_expect_close("Power", y, want, 120, 2e-6);
    free(x);
    free(y);
    tu_layer_case_free(&c);

    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
    power_values(&c);
    ct_gradcheck_opts o = nt_opts(1e-3f, 1e-2f, 0.0f, 0.01f);
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
    nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", power_values);
  }
  /* 0^0 is 1 when scale is 0 (constant output). */
  Caffe__PowerParameter pp;
  Caffe__LayerParameter p = power_param(&pp, (power_case){0.0f, 0.0f, 0.0f});
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4", 1);
  tu_forward(&c);
  float *y = tu_values(c.top[0]);
  for (int i = 0; i < 4; i++) assert_float_equal(y[i], 1.0f, 0);
  free(y);
  tu_layer_case_free(&c);
  Caffe__LayerParameter bad = nt_layer("pow", "Power");
  tu_layer_case_init(&c, &bad, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3", 1);
  tu_layer_case_free(&c);
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &bad, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3", 2, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'pow' (Power) takes 1 top blob, got 2");
  tu_layer_case_free(&c);
}

/* ---------------------------------------------------------------- Exp */
static void test_exp(void **state) {
  const float cases[][3] = {/* base, scale, shift */
                            {-1.0f, 1.0f, 0.0f}, {-1.0f, 3.0f, 0.5f}, {2.0f, 1.0f, 0.0f},
                            {2.0f, 0.5f, 1.0f},  {0.5f, -2.0f, -1.0f}, {10.0f, 0.7f, 0.0f}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    Caffe__LayerParameter p = nt_layer("exp", "Exp");
    Caffe__ExpParameter ep = CAFFE__EXP_PARAMETER__INIT;
    ep.has_base = ep.has_scale = ep.has_shift = 1;
    ep.base_ = cases[k][0];
    ep.scale = cases[k][1];
    ep.shift = cases[k][2];
    if (k) p.exp_param = &ep;
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
    tu_forward(&c);
    float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]);
    double want[120], base = cases[k][0] == -1.0f ? M_E : cases[k][0];
    for (int i = 0; i < 120; i++)
      want[i] = pow(base, (double)cases[k][2] + (double)cases[k][1] * x[i]);
    nt_expect_close("Exp", y, want, 120, 2e-6);
    free(x);
    free(y);
    tu_layer_case_free(&c);
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
    ct_gradcheck_opts o = nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f);
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
    nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", NULL);
  }
  Caffe__LayerParameter p = nt_layer("exp", "Exp");
  Caffe__ExpParameter ep = CAFFE__EXP_PARAMETER__INIT;
  ep.has_base = 1;
  ep.base_ = -2.0f;
  p.exp_param = &ep;
  expect_setup_error(&p, "2,3",
                     "layer 'exp' (Exp): exp_param.base must be strictly positive (or -1 for e), "
                     "got -2");
  ep.base_ = 0.0f;
  expect_setup_error(&p, "2,3",
                     "layer 'exp' (Exp): exp_param.base must be strictly positive (or -1 for e), "
                     "got 0");
}

/* ---------------------------------------------------------------- Log */
static float g_log_lo;
static float into_log_domain(float v) { return g_log_lo + 0.75f * (v + 1.0f); }
static void log_values(tu_layer_case *c) { nt_map_values(c->bottom[0], into_log_domain); }

static void test_log(void **state) {
  /* base, scale, shift, and the smallest input (keeps shift + scale x >= 0.5) */
  const float cases[][4] = {{-1.0f, 1.0f, 0.0f, 0.5f},  {2.0f, 1.0f, 0.0f, 0.5f},
                            {10.0f, 0.5f, 1.2f, -1.0f}, {-1.0f, 3.0f, 4.0f, -1.0f},
                            {0.5f, 2.0f, 1.0f, 0.0f}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    g_log_lo = cases[k][3];
    Caffe__LayerParameter p = nt_layer("log", "Log");
    Caffe__LogParameter lp = CAFFE__LOG_PARAMETER__INIT;
    lp.has_base = lp.has_scale = lp.has_shift = 1;
    lp.base_ = cases[k][0];
    lp.scale = cases[k][1];
    lp.shift = cases[k][2];
    if (k) p.log_param = &lp;
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
    log_values(&c);
    tu_forward(&c);
    float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]);
    double want[120], ln_base = cases[k][0] == -1.0f ? 1.0 : log(cases[k][0]);
    for (int i = 0; i < 120; i++)
      want[i] = log((double)cases[k][2] + (double)cases[k][1] * x[i]) / ln_base;
    nt_expect_close("Log", y, want, 120, 2e-6);
    free(x);
    free(y);
    tu_layer_case_free(&c);
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
    log_values(&c);
    ct_gradcheck_opts o = nt_opts(1e-2f, 1e-2f, 0.0f, -1.0f);
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
    nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", log_values);
  }
  Caffe__LayerParameter p = nt_layer("log", "Log");
  Caffe__LogParameter lp = CAFFE__LOG_PARAMETER__INIT;
  lp.has_base = 1;
  lp.base_ = -3.0f;
  p.log_param = &lp;
  expect_setup_error(&p, "2,3",
                     "layer 'log' (Log): log_param.base must be strictly positive (or -1 for e), "
                     "got -3");
  lp.base_ = 1.0f;
  expect_setup_error(&p, "2,3",
                     "layer 'log' (Log): log_param.base 1 gives ln(base) = 0, which cannot divide");
}

/* ---------------------------------------------------------------- Dropout */
static Caffe__LayerParameter dropout_param(Caffe__DropoutParameter *dp, float ratio) {
  Caffe__LayerParameter p = nt_layer("drop", "Dropout");
  caffe__dropout_parameter__init(dp);
  if (ratio != -1.0f) { /* -1: leave dropout_ratio unset */
    dp->has_dropout_ratio = 1;
    dp->dropout_ratio = ratio;
    p.dropout_param = dp;
  }
  return p;
}

static void test_dropout_train(void **state) {
  const float ratios[] = {-1.0f /* default 0.5 */, 0.2f, 0.8f};
  for (int k = 0; k < 3; k++) {
    double ratio = ratios[k] < 0 ? 0.5 : ratios[k];
    Caffe__DropoutParameter dp;
    Caffe__LayerParameter p = dropout_param(&dp, ratios[k]);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,20,20", 1);
    size_t n = c.bottom[0]->count;
    float *x = tu_values(c.bottom[0]);
    tu_forward(&c);
    float *y1 = tu_values(c.top[0]);
    tu_forward(&c);
    float *y2 = tu_values(c.top[0]);
    size_t kept = 0, differ = 0;
    float scale = (float)(1.0 / (1.0 - ratio));
    for (size_t i = 0; i < n; i++) {
      if (y1[i] != 0.0f) {
        kept++;
        assert_float_equal(y1[i], x[i] * scale, 0);
      }
      if ((y1[i] == 0.0f) != (y2[i] == 0.0f)) differ++;
    }
    double frac = (double)kept / (double)n;
    if (fabs(frac - (1.0 - ratio)) > 0.04)
      fail_msg("ratio %g kept a fraction %g of the values", ratio, frac);
    /* A fresh mask per forward. */
    assert_true(differ > n / 10);
    /* Backward applies the last forward's mask and scale. */
    float *dy = malloc(n * sizeof(float)), *dx = malloc(n * sizeof(float));
    tu_fill_uniform(dy, n, -1.0f, 1.0f, 5);
    ct_tensor_upload_diff(c.top[0], dy);
    bool prop = true;
    ct_layer_backward(c.l, c.top, &prop, c.bottom);
    ct_tensor_download_diff(c.bottom[0], dx);
    for (size_t i = 0; i < n; i++)
      assert_float_equal(dx[i], y2[i] == 0.0f ? 0.0f : dy[i] * scale, 0);
    free(dy);
    free(dx);
    free(x);
    free(y1);
    free(y2);
    tu_layer_case_free(&c);
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
    ct_gradcheck_opts o = nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f);
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
    nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", NULL);
  }
}

/* The mask depends only on the context's seed and draw count: the same
 * seed, the same masks; another seed, other masks. */
static void test_dropout_deterministic(void **state) {
  Caffe__DropoutParameter dp;
  Caffe__LayerParameter p = dropout_param(&dp, -1);
  tu_layer_case a, b;
  tu_layer_case_init(&a, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3,50", 1);
  tu_layer_case_init(&b, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3,50", 1);
  tu_forward(&a);
  tu_forward(&b);
  float *ya = tu_values(a.top[0]), *yb = tu_values(b.top[0]);
  assert_memory_equal(ya, yb, 150 * sizeof(float));
  free(ya);
  free(yb);
  b.ctx.seed = 99;
  tu_forward(&a);
  tu_forward(&b);
  ya = tu_values(a.top[0]);
  yb = tu_values(b.top[0]);
  assert_true(memcmp(ya, yb, 150 * sizeof(float)) != 0);
  free(ya);
  free(yb);
  tu_layer_case_free(&a);
  tu_layer_case_free(&b);
}

static void test_dropout_test_phase(void **state) {
  Caffe__DropoutParameter dp;
  Caffe__LayerParameter p = dropout_param(&dp, 0.7f);
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TEST, "2,3,4,5", 1);
  tu_forward(&c);
  float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]);
  assert_memory_equal(x, y, 120 * sizeof(float));
  free(x);
  free(y);
  ct_gradcheck_opts o = nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f);
  tu_check_gradient(&c, &o);
  tu_layer_case_free(&c);
  nt_check_in_place(&p, CT_PHASE_TEST, "2,3,4,5", NULL);

  Caffe__LayerParameter zero = dropout_param(&dp, 0.0f);
  tu_layer_case_init(&c, &zero, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
  tu_forward(&c);
  x = tu_values(c.bottom[0]);
  y = tu_values(c.top[0]);
  assert_memory_equal(x, y, 120 * sizeof(float));
  free(x);
  free(y);
  tu_layer_case_free(&c);
}

static void test_dropout_bad(void **state) {
  Caffe__DropoutParameter dp;
  Caffe__LayerParameter p = dropout_param(&dp, 1.0f);
  expect_setup_error(
      &p, "2,3", "layer 'drop' (Dropout): dropout_param.dropout_ratio must be in [0, 1), got 1");
  p = dropout_param(&dp, -0.25f);
  expect_setup_error(&p, "2,3",
                     "layer 'drop' (Dropout): dropout_param.dropout_ratio must be in [0, 1), got "
                     "-0.25");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_power),
      cmocka_unit_test(test_exp),
      cmocka_unit_test(test_log),
      cmocka_unit_test(test_dropout_train),
      cmocka_unit_test(test_dropout_deterministic),
      cmocka_unit_test(test_dropout_test_phase),
      cmocka_unit_test(test_dropout_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
