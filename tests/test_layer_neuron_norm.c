/* BatchNorm and MVN against double-precision references (statistics and the
 * running averages included), gradient checks with Caffe's settings, in
 * place against out of place, and bad parameters. */
#include "neurontest.h"

/* ---------------------------------------------------------------- BatchNorm */
static Caffe__LayerParameter bn_param(Caffe__BatchNormParameter *bp, int use_global) {
  Caffe__LayerParameter p = nt_layer("bn", "BatchNorm");
  caffe__batch_norm_parameter__init(bp);
  if (use_global >= 0) {
    bp->has_use_global_stats = 1;
    bp->use_global_stats = use_global;
    p.batch_norm_param = bp;
  }
  return p;
}

/* Per-channel mean and biased variance of x (N, C, S...) in double. */
static void channel_stats(const float *x, int N, int C, size_t S, double *mean, double *var) {
  for (int c = 0; c < C; c++) {
    double sum = 0, sq = 0;
    for (int n = 0; n < N; n++)
      for (size_t i = 0; i < S; i++) sum += x[((size_t)n * C + c) * S + i];
    mean[c] = sum / ((double)N * S);
    for (int n = 0; n < N; n++)
      for (size_t i = 0; i < S; i++) {
        double d = x[((size_t)n * C + c) * S + i] - mean[c];
        sq += d * d;
      }
    var[c] = sq / ((double)N * S);
  }
}

static void expect_bn_output(const tu_layer_case *c, const double *mean, const double *var,
                             double eps, double tol) {
  const ct_tensor *b = c->bottom[0];
  int N = b->shape[0], C = b->shape[1];
  size_t S = b->count / ((size_t)N * C);
  float *x = tu_values(b), *y = tu_values(c->top[0]);
  double *want = malloc(b->count * sizeof(double));
  for (size_t i = 0; i < b->count; i++) {
    int ch = (int)(i / S % (size_t)C);
    want[i] = (x[i] - mean[ch]) / sqrt(var[ch] + eps);
  }
  nt_expect_close("BatchNorm", y, want, b->count, tol);
  free(want);
  free(x);
  free(y);
}

static void test_batch_norm_train(void **state) {
  const char *shapes[] = {"2,3,4,5", "5,2,3,4", "6,3", "2,4,3,1,2"};
  for (int k = 0; k < 4; k++) {
    Caffe__BatchNormParameter bp;
    Caffe__LayerParameter p = bn_param(&bp, -1);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes[k], 1);
    const ct_tensor *b = c.bottom[0];
    int N = b->shape[0], C = b->shape[1];
    size_t S = b->count / ((size_t)N * C);
    double m = (double)N * S;
    assert_int_equal(c.l->nparams, 3);
    assert_int_equal(c.l->params[0]->ndim, 1);
    assert_int_equal(c.l->params[0]->shape[0], C);
    assert_int_equal(c.l->params[1]->shape[0], C);
    assert_int_equal(c.l->params[2]->ndim, 1);
    assert_int_equal(c.l->params[2]->shape[0], 1);
    for (int i = 0; i < 3; i++) assert_false(c.l->param_propagate_down[i]);

    double mean1[8], var1[8], mean2[8], var2[8];
    float *x = tu_values(b);
    channel_stats(x, N, C, S, mean1, var1);
    free(x);
    tu_forward(&c);
    expect_bn_output(&c, mean1, var1, 1e-5, 2e-5);
    float *ms = tu_values(c.l->params[0]), *vs = tu_values(c.l->params[1]);
    float *f = tu_values(c.l->params[2]);
    assert_float_equal(f[0], 1.0f, 0);
    double want_ms[8], want_vs[8];
    for (int ch = 0; ch < C; ch++) {
      want_ms[ch] = mean1[ch];
      want_vs[ch] = var1[ch] * m / (m - 1);
    }
    nt_expect_close("mean sum", ms, want_ms, C, 1e-6);
    nt_expect_close("variance sum", vs, want_vs, C, 1e-6);
    free(ms);
    free(vs);
    free(f);

    /* A second batch: the sums decay by moving_average_fraction. */
    tu_fill(c.bottom[0], -2.0f, 3.0f, 555);
    x = tu_values(b);
    channel_stats(x, N, C, S, mean2, var2);
    free(x);
    tu_forward(&c);
    expect_bn_output(&c, mean2, var2, 1e-5, 2e-5);
    ms = tu_values(c.l->params[0]);
    vs = tu_values(c.l->params[1]);
    f = tu_values(c.l->params[2]);
    assert_float_equal(f[0], 0.999f * 1.0f + 1.0f, 1e-7);
    for (int ch = 0; ch < C; ch++) {
      want_ms[ch] = mean2[ch] + 0.999 * mean1[ch];
      want_vs[ch] = (var2[ch] + 0.999 * var1[ch]) * m / (m - 1);
    }
    nt_expect_close("mean sum", ms, want_ms, C, 1e-5);
    nt_expect_close("variance sum", vs, want_vs, C, 1e-5);
    free(ms);
    free(vs);
    free(f);
    tu_layer_case_free(&c);
  }
}

/* Global statistics: the sums divided by the factor (a factor 0 means 0). */
static void test_batch_norm_global(void **state) {
  for (int k = 0; k < 4; k++) {
    Caffe__BatchNormParameter bp;
    /* k 0: TEST default; 1: TRAIN with use_global_stats; 2: custom eps; 3: factor 0 */
    Caffe__LayerParameter p = bn_param(&bp, k == 1 ? 1 : -1);
    if (k == 2) {
      bp.has_eps = 1;
      bp.eps = 0.1f;
      p.batch_norm_param = &bp;
    }
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, k == 1 ? CT_PHASE_TRAIN : CT_PHASE_TEST, "2,3,4,5",
                       1);
    const float ms[3] = {0.4f, -0.2f, 1.0f}, vs[3] = {2.0f, 0.5f, 1.2f};
    const float factor = k == 3 ? 0.0f : 2.5f;
    tu_set_values(c.l->params[0], ms);
    tu_set_values(c.l->params[1], vs);
    tu_set_values(c.l->params[2], &factor);
    tu_forward(&c);
    double mean[3], var[3];
    for (int ch = 0; ch < 3; ch++) {
      mean[ch] = factor ? ms[ch] / factor : 0;
      var[ch] = factor ? vs[ch] / factor : 0;
    }
    expect_bn_output(&c, mean, var, k == 2 ? 0.1 : 1e-5, 2e-5);
    /* The stored statistics are left alone. */
    float *after = tu_values(c.l->params[0]);
    assert_memory_equal(after, ms, sizeof ms);
    free(after);
    ct_gradcheck_opts o = nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f);
    if (k < 3) tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
  }
  /* use_global_stats false in TEST uses the batch. */
  Caffe__BatchNormParameter bp;
  Caffe__LayerParameter p = bn_param(&bp, 0);
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TEST, "2,3,4,5", 1);
  float *x = tu_values(c.bottom[0]);
  double mean[3], var[3];
  channel_stats(x, 2, 3, 20, mean, var);
  free(x);
  tu_forward(&c);
  expect_bn_output(&c, mean, var, 1e-5, 2e-5);
  tu_layer_case_free(&c);
}

static void test_batch_norm_gradient(void **state) {
  const char *shapes[] = {"5,2,3,4", "6,3"};
  for (int k = 0; k < 2; k++) {
    Caffe__BatchNormParameter bp;
    Caffe__LayerParameter p = bn_param(&bp, -1);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes[k], 1);
    ct_gradcheck_opts o = nt_opts(1e-2f, 1e-4f, 0.0f, -1.0f);
    o.check_params = false;
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
  }
}

static void test_batch_norm_in_place(void **state) {
  Caffe__BatchNormParameter bp;
  Caffe__LayerParameter p = bn_param(&bp, -1);
  nt_check_in_place(&p, CT_PHASE_TRAIN, "5,2,3,4", NULL);
  nt_check_in_place(&p, CT_PHASE_TEST, "5,2,3,4", NULL);
}

static void test_batch_norm_bad(void **state) {
  Caffe__BatchNormParameter bp;
  Caffe__LayerParameter p = bn_param(&bp, -1);
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "7", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(
      err.msg,
      "layer 'bn' (BatchNorm): BatchNorm needs a bottom with at least 2 axes (N, C, "
      "...), got 1");
  tu_layer_case_free(&c);
  /* Statistics cannot be learned: lr_mult must be 0 (and defaults to 1). */
  Caffe__ParamSpec frozen = CAFFE__PARAM_SPEC__INIT, learned = CAFFE__PARAM_SPEC__INIT;
  frozen.has_lr_mult = 1;
  frozen.lr_mult = 0.0f;
  Caffe__ParamSpec *specs[3] = {&frozen, &frozen, &learned};
  p.n_param = 3;
  p.param = specs;
  assert_int_equal(tu_layer_case_try(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "layer 'bn' (BatchNorm): param[2].lr_mult is 1, but batch normalization "
                      "statistics cannot be learned (use lr_mult: 0 or leave the param out)");
  tu_layer_case_free(&c);
  p.n_param = 2;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3", 1);
  /* A reshape to another channel count. */
  ct_tensor_reshape4(c.bottom[0], 2, 4, 1, 1);
  assert_int_equal(ct_layer_reshape(c.l, c.bottom, c.top, &err), CT_ERR_INVALID);
  assert_string_equal(
      err.msg, "layer 'bn' (BatchNorm): bottom has 4 channels but the layer was set up for 3");
  tu_layer_case_free(&c);
}

/* ---------------------------------------------------------------- MVN */
static Caffe__LayerParameter mvn_param(Caffe__MVNParameter *mp, bool variance, bool across) {
  Caffe__LayerParameter p = nt_layer("mvn", "MVN");
  caffe__mvnparameter__init(mp);
  mp->has_normalize_variance = mp->has_across_channels = 1;
  mp->normalize_variance = variance;
  mp->across_channels = across;
  p.mvn_param = mp;
  return p;
}

static void test_mvn_forward(void **state) {
  const char *shapes[] = {"2,3,4,5", "3,2,1,7", "4,5"};
  for (int k = 0; k < 4; k++) {
    bool variance = !(k & 1), across = k & 2;
    for (int s = 0; s < 3; s++) {
      Caffe__MVNParameter mp;
      Caffe__LayerParameter p = mvn_param(&mp, variance, across);
      tu_layer_case c;
      tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes[s], 1);
      tu_forward(&c);
      const ct_tensor *b = c.bottom[0];
      size_t groups = (size_t)b->shape[0] * (across ? 1 : (size_t)b->shape[1]);
      size_t D = b->count / groups;
      float *x = tu_values(b), *y = tu_values(c.top[0]);
      double *want = malloc(b->count * sizeof(double));
      for (size_t g = 0; g < groups; g++) {
        double sum = 0, sq = 0;
        for (size_t i = 0; i < D; i++) sum += x[g * D + i];
        double mean = sum / D;
        for (size_t i = 0; i < D; i++) sq += (x[g * D + i] - mean) * (x[g * D + i] - mean);
        double div = variance ? sqrt(sq / D) + 1e-9 : 1.0;
        for (size_t i = 0; i < D; i++) want[g * D + i] = (x[g * D + i] - mean) / div;
      }
      nt_expect_close("MVN", y, want, b->count, 2e-5);
      free(want);
      free(x);
      free(y);
      tu_layer_case_free(&c);
    }
  }
}

static void test_mvn_gradient(void **state) {
  for (int k = 0; k < 4; k++) {
    Caffe__MVNParameter mp;
    Caffe__LayerParameter p = mvn_param(&mp, !(k & 1), k & 2);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
    ct_gradcheck_opts o = nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f);
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
    nt_check_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", NULL);
  }
  /* eps is added to the standard deviation: a constant plane gives 0. */
  Caffe__MVNParameter mp;
  Caffe__LayerParameter p = mvn_param(&mp, true, false);
  mp.has_eps = 1;
  mp.eps = 0.5f;
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "1,1,2", 1);
  const float x[2] = {1.0f, 3.0f};
  tu_set_values(c.bottom[0], x);
  tu_forward(&c);
  float *y = tu_values(c.top[0]);
  assert_float_equal(y[0], -1.0f / 1.5f, 1e-7);
  assert_float_equal(y[1], 1.0f / 1.5f, 1e-7);
  free(y);
  tu_layer_case_free(&c);
}

static void test_mvn_bad(void **state) {
  Caffe__MVNParameter mp;
  Caffe__LayerParameter p = mvn_param(&mp, true, false);
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3;2,3", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'mvn' (MVN) takes 1 bottom blob, got 2");
  tu_layer_case_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batch_norm_train),
      cmocka_unit_test(test_batch_norm_global),
      cmocka_unit_test(test_batch_norm_gradient),
      cmocka_unit_test(test_batch_norm_in_place),
      cmocka_unit_test(test_batch_norm_bad),
      cmocka_unit_test(test_mvn_forward),
      cmocka_unit_test(test_mvn_gradient),
      cmocka_unit_test(test_mvn_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
