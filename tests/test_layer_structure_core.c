/* Input, DummyData, Parameter, Split and Silence. */
#include <math.h>
#include <stdio.h>

#include "layers/layer.h"
#include "layertest.h"
#include "math/math.h"
#include "testutil.h"

static Caffe__LayerParameter layer(const char *name, const char *type) {
  Caffe__LayerParameter p = CAFFE__LAYER_PARAMETER__INIT;
  p.name = (char *)name;
  p.type = (char *)type;
  return p;
}

static Caffe__BlobShape blob_shape(int64_t *dims, size_t n) {
  Caffe__BlobShape s = CAFFE__BLOB_SHAPE__INIT;
  s.dim = dims;
  s.n_dim = n;
  return s;
}

static void assert_shape(const ct_tensor *t, int ndim, const int *shape) {
  assert_int_equal(t->ndim, ndim);
  for (int i = 0; i < ndim; i++) assert_int_equal(t->shape[i], shape[i]);
}

static void expect_error(const Caffe__LayerParameter *p, const char *shapes, int ntop,
                         const char *msg) {
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes, ntop, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

/* ---------------------------------------------------------------- Input */

static void test_input_shapes(void **state) {
  int64_t d0[] = {2, 3, 4}, d1[] = {5};
  Caffe__BlobShape s0 = blob_shape(d0, 3), s1 = blob_shape(d1, 1);
  Caffe__BlobShape *both[] = {&s0, &s1};
  Caffe__InputParameter ip = CAFFE__INPUT_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("in", "Input");
  p.input_param = &ip;
  /* One shape for every top. */
  ip.n_shape = 1;
  ip.shape = both;
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "", 2);
  assert_shape(c.top[0], 3, (int[]){2, 3, 4});
  assert_shape(c.top[1], 3, (int[]){2, 3, 4});
  /* Forward leaves the caller's values alone. */
  tu_fill(c.top[0], -1, 1, 5);
  float *before = tu_values(c.top[0]);
  tu_forward(&c);
  float *after = tu_values(c.top[0]);
  assert_memory_equal(before, after, 24 * sizeof(float));
  free(before);
  free(after);
  tu_layer_case_free(&c);
  /* One shape per top. */
  ip.n_shape = 2;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "", 2);
  assert_shape(c.top[0], 3, (int[]){2, 3, 4});
  assert_shape(c.top[1], 1, (int[]){5});
  tu_layer_case_free(&c);
  /* No shape: the caller shapes the tops. */
  ip.n_shape = 0;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "", 1);
  assert_int_equal(c.top[0]->ndim, 0);
  tu_layer_case_free(&c);
}

static void test_input_bad(void **state) {
  int64_t d0[] = {2, 3}, bad[] = {2, -3};
  Caffe__BlobShape s0 = blob_shape(d0, 2), s1 = blob_shape(bad, 2);
  Caffe__BlobShape *shapes[] = {&s0, &s1};
  Caffe__InputParameter ip = CAFFE__INPUT_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("in", "Input");
  p.input_param = &ip;
  ip.shape = shapes;
  ip.n_shape = 2;
  expect_error(&p, "", 3, "layer 'in' (Input): input_param: give 'shape' once, once per top or not "
                          "at all: 3 tops vs 2 shapes");
  expect_error(&p, "", 2, "layer 'in' (Input): input_param.shape[1] dim 1 is -3 (must be in [0, "
                          "2147483647])");
  expect_error(&p, "2,3", 2, "layer 'in' (Input) takes 0 bottom blobs, got 1");
}

/* ---------------------------------------------------------------- DummyData */

static Caffe__FillerParameter filler(const char *type) {
  Caffe__FillerParameter f = CAFFE__FILLER_PARAMETER__INIT;
  f.type = (char *)type;
  return f;
}

static void assert_all(const ct_tensor *t, float v) {
  float *x = tu_values(t);
  for (size_t i = 0; i < t->count; i++) assert_float_equal(x[i], v, 0);
  free(x);
}

static void test_dummy_constant_legacy(void **state) {
  uint32_t num[] = {2}, ch[] = {3, 1}, h[] = {4}, w[] = {5};
  Caffe__FillerParameter f = filler("constant");
  f.has_value = 1;
  f.value = 3.5f;
  Caffe__FillerParameter *fs[] = {&f};
  Caffe__DummyDataParameter dp = CAFFE__DUMMY_DATA_PARAMETER__INIT;
  dp.num = num, dp.n_num = 1, dp.channels = ch, dp.n_channels = 2;
  dp.height = h, dp.n_height = 1, dp.width = w, dp.n_width = 1;
  dp.data_filler = fs, dp.n_data_filler = 1;
  Caffe__LayerParameter p = layer("dd", "DummyData");
  p.dummy_data_param = &dp;
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "", 2);
  assert_true((c.l->ops->flags & CT_LAYER_DATA) != 0);
  assert_shape(c.top[0], 4, (int[]){2, 3, 4, 5});
  assert_shape(c.top[1], 4, (int[]){2, 1, 4, 5});
  /* Filled at setup... */
  assert_all(c.top[0], 3.5f);
  assert_all(c.top[1], 3.5f);
  /* ...and, like Caffe, not refilled: a value written by someone else stays. */
  float *x = tu_values(c.top[0]);
  x[0] = -1.0f;
  ct_tensor_upload(c.top[0], x);
  free(x);
  tu_forward(&c);
  x = tu_values(c.top[0]);
  assert_float_equal(x[0], -1.0f, 0);
  assert_float_equal(x[1], 3.5f, 0);
  free(x);
  /* A top moved to other storage gets the constant written there. */
  float *other = calloc(c.top[1]->count, sizeof(float));
  ct_tensor_set_view(c.top[1], other, NULL);
  tu_forward(&c);
  for (size_t i = 0; i < c.top[1]->count; i++) assert_float_equal(other[i], 3.5f, 0);
  tu_layer_case_free(&c);
  free(other);
}

static void test_dummy_default_and_random(void **state) {
  int64_t d0[] = {3, 4}, d1[] = {7};
  Caffe__BlobShape s0 = blob_shape(d0, 2), s1 = blob_shape(d1, 1);
  Caffe__BlobShape *shapes[] = {&s0, &s1};
  Caffe__DummyDataParameter dp = CAFFE__DUMMY_DATA_PARAMETER__INIT;
  dp.shape = shapes, dp.n_shape = 2;
  Caffe__LayerParameter p = layer("dd", "DummyData");
  p.dummy_data_param = &dp;
  /* No filler: constant 0. */
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "", 2);
  tu_fill(c.top[0], 1, 2, 3);
  tu_forward(&c); /* constant: not refilled */
  float *x = tu_values(c.top[0]);
  assert_true(x[0] >= 1.0f);
  free(x);
  assert_all(c.top[1], 0.0f);
  tu_layer_case_free(&c);
  /* One filler per top: uniform is drawn afresh on every forward, the
   * constant top is not. */
  Caffe__FillerParameter u = filler("uniform"), k = filler("constant");
  u.has_min = u.has_max = 1;
  u.min = 2.0f, u.max = 3.0f;
  k.has_value = 1, k.value = -2.0f;
  Caffe__FillerParameter *fs[] = {&u, &k};
  dp.data_filler = fs, dp.n_data_filler = 2;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "", 2);
  assert_all(c.top[1], -2.0f);
  tu_forward(&c);
  float *a = tu_values(c.top[0]);
  tu_forward(&c);
  float *b = tu_values(c.top[0]);
  int same = 0;
  for (int i = 0; i < 12; i++) {
    assert_true(a[i] >= 2.0f && a[i] < 3.0f);
    assert_true(b[i] >= 2.0f && b[i] < 3.0f);
    same += a[i] == b[i];
  }
  assert_true(same < 2);
  assert_all(c.top[1], -2.0f);
  free(a);
  free(b);
  tu_layer_case_free(&c);
}

static void test_dummy_bad(void **state) {
  int64_t d0[] = {3, 4};
  uint32_t num[] = {2};
  Caffe__BlobShape s0 = blob_shape(d0, 2);
  Caffe__BlobShape *shapes[] = {&s0, &s0};
  Caffe__FillerParameter f = filler("unifrom");
  Caffe__FillerParameter *fs[] = {&f, &f};
  Caffe__DummyDataParameter dp = CAFFE__DUMMY_DATA_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("dd", "DummyData");
  p.dummy_data_param = &dp;
  expect_error(&p, "", 1, "layer 'dd' (DummyData): dummy_data_param: 'shape' given 0 times for 1 "
                          "tops (give it once or once per top)");
  dp.shape = shapes, dp.n_shape = 2;
  expect_error(&p, "", 3, "layer 'dd' (DummyData): dummy_data_param: 'shape' given 2 times for 3 "
                          "tops (give it once or once per top)");
  dp.num = num, dp.n_num = 1;
  expect_error(&p, "", 2, "layer 'dd' (DummyData): dummy_data_param: both shape and the legacy "
                          "num/channels/height/width were given");
  dp.n_shape = 0;
  expect_error(&p, "", 2, "layer 'dd' (DummyData): dummy_data_param: 'channels' given 0 times for "
                          "2 tops (give it once or once per top)");
  dp.n_num = 0, dp.n_shape = 1;
  dp.data_filler = fs, dp.n_data_filler = 2;
  expect_error(&p, "", 3, "layer 'dd' (DummyData): dummy_data_param: 2 data_filler values for 3 "
                          "tops (give 0, 1 or one per top)");
  expect_error(&p, "", 2, "layer 'dd' (DummyData): dummy_data_param.data_filler: unknown filler "
                          "type 'unifrom' (did you mean 'uniform'?)");
}

/* ---------------------------------------------------------------- Parameter */

static void test_parameter(void **state) {
  int64_t d[] = {2, 3};
  Caffe__BlobShape s = blob_shape(d, 2);
  Caffe__ParameterParameter pp = CAFFE__PARAMETER_PARAMETER__INIT;
  pp.shape = &s;
  Caffe__LayerParameter p = layer("par", "Parameter");
  p.parameter_param = &pp;
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "", 1);
  assert_int_equal(c.l->nparams, 1);
  assert_shape(c.l->params[0], 2, (int[]){2, 3});
  assert_shape(c.top[0], 2, (int[]){2, 3});
  assert_all(c.l->params[0], 0.0f); /* a fresh blob is zero, as in Caffe */
  tu_fill(c.l->params[0], -1, 1, 9);
  tu_forward(&c);
  float *w = tu_values(c.l->params[0]), *y = tu_values(c.top[0]);
  assert_memory_equal(w, y, 6 * sizeof(float));
  /* The gradient accumulates into the parameter's diff. */
  float ones[6] = {1, 1, 1, 1, 1, 1}, dy[6] = {0.5f, -1, 2, 0, 3, -4}, dw[6];
  ct_tensor_upload_diff(c.l->params[0], ones);
  ct_tensor_upload_diff(c.top[0], dy);
  ct_layer_backward(c.l, c.top, NULL, c.bottom);
  ct_tensor_download_diff(c.l->params[0], dw);
  for (int i = 0; i < 6; i++) assert_float_equal(dw[i], 1.0f + dy[i], 0);
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  tu_check_gradient(&c, &o);
  free(w);
  free(y);
  tu_layer_case_free(&c);
  int64_t bad[] = {2, -3};
  s = blob_shape(bad, 2);
  expect_error(&p, "", 1, "layer 'par' (Parameter): parameter_param.shape dim 1 is -3 (must be in "
                          "[0, 2147483647])");
}

/* ---------------------------------------------------------------- Split */

static void test_split(void **state) {
  Caffe__LayerParameter p = layer("sp", "Split");
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4", 3);
  tu_forward(&c);
  float *x = tu_values(c.bottom[0]);
  for (int t = 0; t < 3; t++) {
    /* Each top views the bottom's data (no copy) and has a diff of its own. */
    assert_shape(c.top[t], 3, (int[]){2, 3, 4});
    assert_ptr_equal(c.top[t]->data, c.bottom[0]->data);
    assert_false(c.top[t]->owns_data);
    assert_non_null(c.top[t]->diff);
    assert_true(c.top[t]->diff != c.bottom[0]->diff);
    for (int u = 0; u < t; u++) assert_true(c.top[t]->diff != c.top[u]->diff);
    float *y = tu_values(c.top[t]);
    assert_memory_equal(x, y, 24 * sizeof(float));
    free(y);
  }
  /* Backward sums the tops' diffs. */
  float d[3][24], dx[24];
  for (int t = 0; t < 3; t++) {
    tu_fill_uniform(d[t], 24, -1, 1, 40 + t);
    ct_tensor_upload_diff(c.top[t], d[t]);
  }
  bool prop[1] = {true};
  ct_layer_backward(c.l, c.top, prop, c.bottom);
  ct_tensor_download_diff(c.bottom[0], dx);
  for (int i = 0; i < 24; i++) assert_float_equal(dx[i], d[0][i] + d[1][i] + d[2][i], 1e-6);
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  tu_check_gradient(&c, &o);
  free(x);
  tu_layer_case_free(&c);
}

static void test_split_in_place(void **state) {
  Caffe__LayerParameter p = layer("sp", "Split");
  ct_context ctx;
  ct_error err;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, &err), CT_OK);
  ct_tensor *b = ct_tensor_new_shape(CT_DEVICE_CPU, "b", 1, (int[]){4}, true);
  ct_tensor *t1 = ct_tensor_new(CT_DEVICE_CPU, "t1");
  ct_tensor *bottom[1] = {b}, *top[2] = {t1, b};
  ct_layer *l;
  assert_int_equal(ct_layer_create(&p, CT_PHASE_TRAIN, &ctx, 1, 2, &l, &err), CT_OK);
  assert_int_equal(ct_layer_setup(l, bottom, top, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'sp' (Split): does not work in place (top 1 is the bottom blob)");
  ct_layer_free(l);
  ct_tensor_free(b);
  ct_tensor_free(t1);
  ct_context_free(&ctx);
}

/* ---------------------------------------------------------------- Silence */

static void test_silence(void **state) {
  Caffe__LayerParameter p = layer("sil", "Silence");
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3; 4", 0);
  tu_forward(&c);
  float ones[6] = {1, 1, 1, 1, 1, 1}, d[6];
  ct_tensor_upload_diff(c.bottom[0], ones);
  ct_tensor_upload_diff(c.bottom[1], ones);
  bool prop[2] = {true, false};
  ct_layer_backward(c.l, c.top, prop, c.bottom);
  ct_tensor_download_diff(c.bottom[0], d);
  for (int i = 0; i < 6; i++) assert_float_equal(d[i], 0.0f, 0);
  ct_tensor_download_diff(c.bottom[1], d);
  for (int i = 0; i < 4; i++) assert_float_equal(d[i], 1.0f, 0);
  tu_layer_case_free(&c);
  expect_error(&p, "", 0, "layer 'sil' (Silence) takes at least 1 bottom blobs, got 0");
  expect_error(&p, "3", 1, "layer 'sil' (Silence) takes 0 top blobs, got 1");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_input_shapes),       cmocka_unit_test(test_input_bad),
      cmocka_unit_test(test_dummy_constant_legacy), cmocka_unit_test(test_dummy_default_and_random),
      cmocka_unit_test(test_dummy_bad),          cmocka_unit_test(test_parameter),
      cmocka_unit_test(test_split),              cmocka_unit_test(test_split_in_place),
      cmocka_unit_test(test_silence),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
