#include "layertest.h"
#include "testutil.h"

static Caffe__LayerParameter relu_param(float slope, Caffe__ReLUParameter *rp) {
  Caffe__LayerParameter p = CAFFE__LAYER_PARAMETER__INIT;
  caffe__re_luparameter__init(rp);
  p.name = "relu";
  p.type = "ReLU";
  if (slope != 0.0f) {
    rp->has_negative_slope = 1;
    rp->negative_slope = slope;
    p.relu_param = rp;
  }
  return p;
}

static void test_relu_forward(void **state) {
  Caffe__ReLUParameter rp;
  for (int k = 0; k < 2; k++) {
    float slope = k ? 0.1f : 0.0f;
    Caffe__LayerParameter p = relu_param(slope, &rp);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
    tu_forward(&c);
    float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]);
    assert_int_equal(c.top[0]->count, 120);
    for (int i = 0; i < 120; i++) assert_float_equal(y[i], x[i] > 0 ? x[i] : slope * x[i], 0);
    free(x);
    free(y);
    tu_layer_case_free(&c);
  }
}

static void test_relu_gradient(void **state) {
  Caffe__ReLUParameter rp;
  for (int k = 0; k < 2; k++) {
    Caffe__LayerParameter p = relu_param(k ? 0.01f : 0.0f, &rp);
    tu_layer_case c;
    tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.kink = 0.0f;
    o.kink_range = 0.011f;
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
  }
}

static void test_relu_bad_counts(void **state) {
  Caffe__ReLUParameter rp;
  Caffe__LayerParameter p = relu_param(0, &rp);
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3;2,3", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'relu' (ReLU) takes 1 bottom blob, got 2");
  tu_layer_case_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_relu_forward),
                                     cmocka_unit_test(test_relu_gradient),
                                     cmocka_unit_test(test_relu_bad_counts)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
