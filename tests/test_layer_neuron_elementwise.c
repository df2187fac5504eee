/* ELU, Sigmoid, TanH, AbsVal, BNLL, Threshold, Clip, Swish and PReLU against
 * double-precision references, gradient checks with Caffe's settings, in
 * place against out of place, and bad parameters. */
#include "neurontest.h"

typedef double (*ref_fn)(double x, const void *arg);

/* Forward of p on shape against ref applied to each bottom value. */
static void check_forward(const Caffe__LayerParameter *p, const char *shape, ref_fn ref,
                          const void *arg, void (*prepare)(tu_layer_case *c), double tol) {
  tu_layer_case c;
  tu_layer_case_init(&c, p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, 1);
  if (prepare) prepare(&c);
  tu_forward(&c);
  assert_true(ct_tensor_same_shape(c.top[0], c.bottom[0]));
  float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]);
  double *want = malloc(c.top[0]->count * sizeof(double));
  for (size_t i = 0; i < c.top[0]->count; i++) want[i] = ref(x[i], arg);
  nt_expect_close(p->type, y, want, c.top[0]->count, tol);
  free(want);
  free(x);
  free(y);
  tu_layer_case_free(&c);
}

static void check_gradient(const Caffe__LayerParameter *p, const char *shape,
                           ct_gradcheck_opts o, void (*prepare)(tu_layer_case *c)) {
  tu_layer_case c;
  tu_layer_case_init(&c, p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, 1);
  if (prepare) prepare(&c);
  tu_check_gradient(&c, &o);
  tu_layer_case_free(&c);
}

static void expect_setup_error(const Caffe__LayerParameter *p, const char *shape, int ntop,
                               const char *msg) {
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, ntop, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

/* Bottom values over a wider range, with a few extremes, for the smooth
 * layers. */
static float widen(float v) { return 4.0f * v; }
static void wide_values(tu_layer_case *c) {
  nt_map_values(c->bottom[0], widen);
  float *v = tu_values(c->bottom[0]);
  v[0] = 60.0f;
  v[1] = -60.0f;
  v[2] = 0.0f;
  tu_set_values(c->bottom[0], v);
  free(v);
}

/* ---------------------------------------------------------------- ELU */
static double ref_elu(double x, const void *arg) {
  double alpha = *(const float *)arg;
  return x > 0 ? x : alpha * (exp(x) - 1);
}

static void test_elu(void **state) {
  const float alphas[] = {1.0f, 0.5f, 2.0f};
  for (int k = 0; k < 3; k++) {
    Caffe__LayerParameter p = nt_layer("elu", "ELU");
    Caffe__ELUParameter ep = CAFFE__ELUPARAMETER__INIT;
    if (k) {
      ep.has_alpha = 1;
      ep.alpha = alphas[k];
      p.elu_param = &ep;
    }
    check_forward(&p, "2,3,4,5", ref_elu, &alphas[k], wide_values, 1e-6);
    check_gradient(&p, "2,3,4,5", nt_opts(1e-2f, 1e-3f, 0.0f, 0.01f), NULL);
    nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", NULL);
  }
  Caffe__LayerParameter p = nt_layer("elu", "ELU");
  expect_setup_error(&p, "2,3", 2, "layer 'elu' (ELU) takes 1 top blob, got 2");
}

/* ---------------------------------------------------------------- Sigmoid, TanH */
static double ref_sigmoid(double x, const void *arg) { return 1.0 / (1.0 + exp(-x)); }
static double ref_tanh(double x, const void *arg) { return tanh(x); }

static void test_sigmoid(void **state) {
  Caffe__LayerParameter p = nt_layer("sigmoid", "Sigmoid");
  check_forward(&p, "2,3,4,5", ref_sigmoid, NULL, wide_values, 1e-6);
  check_gradient(&p, "2,3,4,5", nt_opts(1e-2f, 1e-3f, 0.0f, 0.01f), NULL);
  nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", wide_values);
  expect_setup_error(&p, "2,3;2,3", 1, "layer 'sigmoid' (Sigmoid) takes 1 bottom blob, got 2");
}

static void test_tanh(void **state) {
  Caffe__LayerParameter p = nt_layer("tanh", "TanH");
  check_forward(&p, "2,3,4,5", ref_tanh, NULL, wide_values, 1e-6);
  check_forward(&p, "7", ref_tanh, NULL, NULL, 1e-6);
  check_gradient(&p, "2,3,4,5", nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), NULL);
  nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", wide_values);
  expect_setup_error(&p, "2,3;2,3", 1, "layer 'tanh' (TanH) takes 1 bottom blob, got 2");
}

/* ---------------------------------------------------------------- AbsVal */
static double ref_abs(double x, const void *arg) { return fabs(x); }

static void test_absval(void **state) {
  Caffe__LayerParameter p = nt_layer("abs", "AbsVal");
  check_forward(&p, "2,3,4,5", ref_abs, NULL, wide_values, 0);
  check_gradient(&p, "2,3,4,5", nt_opts(1e-3f, 1e-2f, 0.0f, 0.01f), NULL);
  /* The gradient at exactly 0 is 0. */
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3", 1);
  const float x[3] = {-2.0f, 0.0f, 3.0f}, dy[3] = {5.0f, 7.0f, 11.0f};
  tu_set_values(c.bottom[0], x);
  tu_forward(&c);
  ct_tensor_upload_diff(c.top[0], dy);
  bool prop = true;
  ct_layer_backward(c.l, c.top, &prop, c.bottom);
  float dx[3];
  ct_tensor_download_diff(c.bottom[0], dx);
  assert_float_equal(dx[0], -5.0f, 0);
  assert_float_equal(dx[1], 0.0f, 0);
  assert_float_equal(dx[2], 11.0f, 0);
  tu_layer_case_free(&c);
  ct_error err;
  int shape[2] = {2, 3};
  assert_int_equal(nt_try_in_place(&p, CT_PHASE_TRAIN, 2, shape, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "layer 'abs' (AbsVal): AbsVal cannot run in place (top 'inplace' is its "
                      "bottom): backward needs the sign of the input");
}

/* ---------------------------------------------------------------- BNLL */
static double ref_bnll(double x, const void *arg) {
  return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

static void test_bnll(void **state) {
  Caffe__LayerParameter p = nt_layer("bnll", "BNLL");
  check_forward(&p, "2,3,4,5", ref_bnll, NULL, wide_values, 1e-6);
  check_gradient(&p, "2,3,4,5", nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), NULL);
  nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", wide_values);
  expect_setup_error(&p, "2,3", 0, "layer 'bnll' (BNLL) takes 1 top blob, got 0");
}

/* ---------------------------------------------------------------- Threshold */
static double ref_threshold(double x, const void *arg) { return x > *(const float *)arg ? 1 : 0; }

static void test_threshold(void **state) {
  const float thresholds[] = {0.0f, 0.3f, -0.55f};
  for (int k = 0; k < 3; k++) {
    Caffe__LayerParameter p = nt_layer("thr", "Threshold");
    Caffe__ThresholdParameter tp = CAFFE__THRESHOLD_PARAMETER__INIT;
    if (k) {
      tp.has_threshold = 1;
      tp.threshold = thresholds[k];
      p.threshold_param = &tp;
    }
    check_forward(&p, "2,3,4,5", ref_threshold, &thresholds[k], NULL, 0);
    nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", NULL);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3", 1);
    assert_null(c.l->ops->backward_cpu);
    assert_true(c.l->ops->flags & CT_LAYER_NO_BACKWARD);
    /* x equal to the threshold is not above it. */
    const float x[3] = {thresholds[k], thresholds[k] + 1e-6f, thresholds[k] - 1e-6f};
    tu_set_values(c.bottom[0], x);
    tu_forward(&c);
    float *y = tu_values(c.top[0]);
    assert_float_equal(y[0], 0.0f, 0);
    assert_float_equal(y[1], 1.0f, 0);
    assert_float_equal(y[2], 0.0f, 0);
    free(y);
    tu_layer_case_free(&c);
  }
  Caffe__LayerParameter p = nt_layer("thr", "Threshold");
  expect_setup_error(&p, "-", 2, "layer 'thr' (Threshold) takes 1 top blob, got 2");
}

/* ---------------------------------------------------------------- Clip */
typedef struct {
  float min, max;
} clip_range;
static const clip_range g_clip = {-0.5f, 0.6f};

static double ref_clip(double x, const void *arg) {
  const clip_range *r = arg;
  return x < r->min ? r->min : (x > r->max ? r->max : x);
}

/* Moves values off the two kinks by more than the checker's step. */
static float off_clip_kinks(float v) {
  if (fabsf(v - g_clip.min) < 0.02f) return g_clip.min - 0.05f;
  if (fabsf(v - g_clip.max) < 0.02f) return g_clip.max + 0.05f;
  return v;
}
static void clip_values(tu_layer_case *c) { nt_map_values(c->bottom[0], off_clip_kinks); }

static void test_clip(void **state) {
  Caffe__LayerParameter p = nt_layer("clip", "Clip");
  Caffe__ClipParameter cp = CAFFE__CLIP_PARAMETER__INIT;
  cp.min = g_clip.min;
  cp.max = g_clip.max;
  p.clip_param = &cp;
  check_forward(&p, "2,3,4,5", ref_clip, &g_clip, NULL, 0);
  check_gradient(&p, "2,3,4,5", nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), clip_values);
  nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", NULL);
  /* At the bounds themselves the gradient passes (Caffe's convention). */
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4", 1);
  const float x[4] = {-0.5f, 0.6f, -0.51f, 0.61f}, dy[4] = {1, 2, 3, 4};
  tu_set_values(c.bottom[0], x);
  tu_forward(&c);
  ct_tensor_upload_diff(c.top[0], dy);
  bool prop = true;
  ct_layer_backward(c.l, c.top, &prop, c.bottom);
  float dx[4];
  ct_tensor_download_diff(c.bottom[0], dx);
  assert_float_equal(dx[0], 1.0f, 0);
  assert_float_equal(dx[1], 2.0f, 0);
  assert_float_equal(dx[2], 0.0f, 0);
  assert_float_equal(dx[3], 0.0f, 0);
  tu_layer_case_free(&c);
  p.clip_param = NULL;
  expect_setup_error(&p, "2,3", 1,
                     "layer 'clip' (Clip): clip_param (with min and max) must be given");
}

/* ---------------------------------------------------------------- Swish */
static double ref_swish(double x, const void *arg) {
  double beta = *(const float *)arg;
  return x / (1.0 + exp(-beta * x));
}

static void test_swish(void **state) {
  const float betas[] = {1.0f, 1.5f, 0.25f};
  for (int k = 0; k < 3; k++) {
    Caffe__LayerParameter p = nt_layer("swish", "Swish");
    Caffe__SwishParameter sp = CAFFE__SWISH_PARAMETER__INIT;
    if (k) {
      sp.has_beta = 1;
      sp.beta = betas[k];
      p.swish_param = &sp;
    }
    check_forward(&p, "2,3,4,5", ref_swish, &betas[k], wide_values, 1e-6);
    check_gradient(&p, "2,3,4,5", nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f), NULL);
    nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", wide_values);
  }
  Caffe__LayerParameter p = nt_layer("swish", "Swish");
  expect_setup_error(&p, "2,3;2,3", 2, "layer 'swish' (Swish) takes 1 bottom blob, got 2");
}

/* ---------------------------------------------------------------- PReLU */
static void test_prelu_forward(void **state) {
  Caffe__FillerParameter gauss = CAFFE__FILLER_PARAMETER__INIT;
  gauss.type = "gaussian";
  for (int k = 0; k < 4; k++) {
    bool shared = k & 1, filled = k & 2;
    Caffe__LayerParameter p = nt_layer("prelu", "PReLU");
    Caffe__PReLUParameter pp = CAFFE__PRE_LUPARAMETER__INIT;
    pp.has_channel_shared = 1;
    pp.channel_shared = shared;
    if (filled) pp.filler = &gauss;
    p.prelu_param = &pp;
    const char *shapes[] = {"2,3,4,5", "4,3", "2,3,2,2,3"};
    for (int s = 0; s < 3; s++) {
      tu_layer_case c;
      tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes[s], 1);
      assert_int_equal(c.l->nparams, 1);
      ct_tensor *a = c.l->params[0];
      if (shared) {
        assert_int_equal(a->ndim, 0);
        assert_int_equal(a->count, 1);
      } else {
        assert_int_equal(a->ndim, 1);
        assert_int_equal(a->shape[0], 3);
      }
      float *slope = tu_values(a);
      if (!filled)
        for (size_t i = 0; i < a->count; i++) assert_float_equal(slope[i], 0.25f, 0);
      tu_forward(&c);
      float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]);
      size_t n = c.bottom[0]->count, dim = n / (size_t)(c.bottom[0]->shape[0] * 3);
      double *want = malloc(n * sizeof(double));
      for (size_t i = 0; i < n; i++) {
        size_t ch = shared ? 0 : i / dim % 3;
        want[i] = x[i] > 0 ? x[i] : (double)slope[ch] * x[i];
      }
      nt_expect_close("PReLU", y, want, n, 1e-7);
      free(want);
      free(x);
      free(y);
      free(slope);
      tu_layer_case_free(&c);
    }
  }
}

static void test_prelu_gradient(void **state) {
  Caffe__FillerParameter gauss = CAFFE__FILLER_PARAMETER__INIT;
  gauss.type = "gaussian";
  for (int shared = 0; shared < 2; shared++) {
    Caffe__LayerParameter p = nt_layer("prelu", "PReLU");
    Caffe__PReLUParameter pp = CAFFE__PRE_LUPARAMETER__INIT;
    pp.has_channel_shared = 1;
    pp.channel_shared = shared;
    pp.filler = &gauss;
    p.prelu_param = &pp;
    check_gradient(&p, "2,3,4,5", nt_opts(1e-2f, 1e-3f, 0.0f, 0.01f), NULL);
    check_gradient(&p, "3,2", nt_opts(1e-2f, 1e-3f, 0.0f, 0.01f), NULL);
    nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", NULL);
    nt_check_param_diffs_accumulate(&p, "2,3,4,5");
  }
}

/* Slope diffs accumulate across backward passes (shared weights, iter_size). */
static void test_prelu_param_diff_accumulates(void **state) {
  Caffe__LayerParameter p = nt_layer("prelu", "PReLU");
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "1,2,2", 1);
  const float x[4] = {-1.0f, 2.0f, -3.0f, -4.0f}, dy[4] = {1.0f, 1.0f, 0.5f, 2.0f};
  tu_set_values(c.bottom[0], x);
  tu_forward(&c);
  ct_tensor_upload_diff(c.top[0], dy);
  ct_tensor_zero_diff(c.l->params[0]);
  bool prop = true;
  ct_layer_backward(c.l, c.top, &prop, c.bottom);
  ct_layer_backward(c.l, c.top, &prop, c.bottom);
  float da[2], dx[4];
  ct_tensor_download_diff(c.l->params[0], da);
  ct_tensor_download_diff(c.bottom[0], dx);
  assert_float_equal(da[0], 2 * (-1.0f), 0);
  assert_float_equal(da[1], 2 * (-1.5f - 8.0f), 0);
  assert_float_equal(dx[0], 0.25f, 0);
  assert_float_equal(dx[1], 1.0f, 0);
  assert_float_equal(dx[3], 0.5f, 0);
  tu_layer_case_free(&c);
}

static void test_prelu_bad(void **state) {
  Caffe__LayerParameter p = nt_layer("prelu", "PReLU");
  expect_setup_error(
      &p, "6", 1,
      "layer 'prelu' (PReLU): PReLU needs a bottom with at least 2 axes (N, C, ...), "
      "got 1");
  Caffe__PReLUParameter pp = CAFFE__PRE_LUPARAMETER__INIT;
  Caffe__FillerParameter bad = CAFFE__FILLER_PARAMETER__INIT;
  bad.type = "gausian";
  pp.filler = &bad;
  p.prelu_param = &pp;
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3", 1, &err),
                   CT_ERR_INVALID);
  assert_non_null(strstr(err.msg, "gausian"));
  tu_layer_case_free(&c);
  /* A reshape to another channel count than the slopes were made for. */
  p.prelu_param = NULL;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4", 1);
  ct_tensor_reshape4(c.bottom[0], 2, 5, 4, 1);
  assert_int_equal(ct_layer_reshape(c.l, c.bottom, c.top, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "layer 'prelu' (PReLU): bottom has 5 channels but the layer has 3 slopes");
  tu_layer_case_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_elu),
      cmocka_unit_test(test_sigmoid),
      cmocka_unit_test(test_tanh),
      cmocka_unit_test(test_absval),
      cmocka_unit_test(test_bnll),
      cmocka_unit_test(test_threshold),
      cmocka_unit_test(test_clip),
      cmocka_unit_test(test_swish),
      cmocka_unit_test(test_prelu_forward),
      cmocka_unit_test(test_prelu_gradient),
      cmocka_unit_test(test_prelu_param_diff_accumulates),
      cmocka_unit_test(test_prelu_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
