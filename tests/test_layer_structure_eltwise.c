/* Eltwise and Reduction against naive double-precision references. */
#include <math.h>
#include <stdio.h>

#include "layers/layer.h"
#include "layertest.h"
#include "testutil.h"

static Caffe__LayerParameter layer(const char *name, const char *type) {
  Caffe__LayerParameter p = CAFFE__LAYER_PARAMETER__INIT;
  p.name = (char *)name;
  p.type = (char *)type;
  return p;
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

static void assert_close(double got, double want, double rel) {
  if (!(fabs(got - want) <= rel * fmax(1.0, fabs(want))))
    fail_msg("got %.9g, want %.9g", got, want);
}

/* ---------------------------------------------------------------- Eltwise */

typedef enum { OP_PROD = 0, OP_SUM = 1, OP_MAX = 2 } op_t;

/* The reference value of element i, and the index of the bottom MAX picks
 * (Caffe's ties: bottom 1 over bottom 0, then the earlier bottom). */
static double eltwise_ref(op_t op, float **x, int nb, const float *coeff, size_t i, int *arg) {
  double v = op == OP_PROD ? 1.0 : 0.0;
  *arg = -1;
  if (op == OP_MAX) {
    *arg = x[0][i] > x[1][i] ? 0 : 1;
    v = x[*arg][i];
    for (int b = 2; b < nb; b++)
      if (x[b][i] > v) v = x[b][i], *arg = b;
    return v;
  }
  for (int b = 0; b < nb; b++)
    v = op == OP_PROD ? v * x[b][i] : v + (double)(coeff ? coeff[b] : 1.0f) * x[b][i];
  return v;
}

static void run_eltwise(op_t op, float *coeff, size_t ncoeff, bool stable) {
  Caffe__EltwiseParameter ep = CAFFE__ELTWISE_PARAMETER__INIT;
  ep.has_operation = 1, ep.operation = (Caffe__EltwiseParameter__EltwiseOp)op;
  ep.coeff = coeff, ep.n_coeff = ncoeff;
  ep.has_stable_prod_grad = 1, ep.stable_prod_grad = stable;
  Caffe__LayerParameter p = layer("elt", "Eltwise");
  p.eltwise_param = &ep;
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5; 2,3,4,5; 2,3,4,5", 1);
  tu_forward(&c);
  float *x[3], *y = tu_values(c.top[0]), dy[120], dx[3][120];
  for (int b = 0; b < 3; b++) x[b] = tu_values(c.bottom[b]);
  tu_fill_uniform(dy, 120, -1, 1, 7);
  ct_tensor_upload_diff(c.top[0], dy);
  bool prop[3] = {true, true, true};
  ct_layer_backward(c.l, c.top, prop, c.bottom);
  for (int b = 0; b < 3; b++) ct_tensor_download_diff(c.bottom[b], dx[b]);
  for (size_t i = 0; i < 120; i++) {
    int arg;
    assert_close(y[i], eltwise_ref(op, x, 3, coeff, i, &arg), 1e-6);
    for (int b = 0; b < 3; b++) {
      double g;
      if (op == OP_SUM) g = (coeff ? coeff[b] : 1.0) * dy[i];
      else if (op == OP_MAX) g = arg == b ? dy[i] : 0.0;
      else g = dy[i] * (double)x[(b + 1) % 3][i] * x[(b + 2) % 3][i];
      assert_close(dx[b][i], g, 1e-5);
    }
  }
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  if (op == OP_MAX) o.step = 1e-4f, o.threshold = 1e-2f; /* Caffe's choice for MAX */
  tu_check_gradient(&c, &o);
  for (int b = 0; b < 3; b++) free(x[b]);
  free(y);
  tu_layer_case_free(&c);
}

static void test_eltwise_sum(void **state) {
  run_eltwise(OP_SUM, NULL, 0, true);
  float coeff[3] = {1.0f, -0.5f, 2.0f};
  run_eltwise(OP_SUM, coeff, 3, true);
}

static void test_eltwise_prod(void **state) {
  run_eltwise(OP_PROD, NULL, 0, true);
  run_eltwise(OP_PROD, NULL, 0, false);
}

static void test_eltwise_max(void **state) { run_eltwise(OP_MAX, NULL, 0, true); }

/* Ties: bottom 1 wins over bottom 0; a later bottom equal to the max loses. */
static void test_eltwise_max_ties(void **state) {
  Caffe__EltwiseParameter ep = CAFFE__ELTWISE_PARAMETER__INIT;
  ep.has_operation = 1, ep.operation = CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__MAX;
  Caffe__LayerParameter p = layer("elt", "Eltwise");
  p.eltwise_param = &ep;
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2; 2; 2", 1);
  float a[2] = {1, 0}, b[2] = {1, 3}, d[2] = {0, 3}, ones[2] = {1, 1}, g[3][2];
  tu_set_values(c.bottom[0], a);
  tu_set_values(c.bottom[1], b);
  tu_set_values(c.bottom[2], d);
  tu_forward(&c);
  ct_tensor_upload_diff(c.top[0], ones);
  bool prop[3] = {true, true, true};
  ct_layer_backward(c.l, c.top, prop, c.bottom);
  for (int i = 0; i < 3; i++) ct_tensor_download_diff(c.bottom[i], g[i]);
  assert_float_equal(g[0][0], 0, 0);
  assert_float_equal(g[1][0], 1, 0);
  assert_float_equal(g[2][0], 0, 0);
  assert_float_equal(g[1][1], 1, 0);
  assert_float_equal(g[2][1], 0, 0);
  tu_layer_case_free(&c);
}

static void test_eltwise_bad(void **state) {
  float coeff[2] = {1, 2};
  Caffe__EltwiseParameter ep = CAFFE__ELTWISE_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("elt", "Eltwise");
  p.eltwise_param = &ep;
  ep.coeff = coeff, ep.n_coeff = 2;
  expect_error(&p, "2,3; 2,3; 2,3", 1,
               "layer 'elt' (Eltwise): eltwise_param: 2 coeff values for 3 bottoms (give one per "
               "bottom)");
  ep.has_operation = 1, ep.operation = CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__PROD;
  expect_error(&p, "2,3; 2,3", 1,
               "layer 'elt' (Eltwise): eltwise_param: coeff is for operation SUM, not PROD");
  ep.n_coeff = 0;
  expect_error(&p, "2,3; 3,2", 1,
               "layer 'elt' (Eltwise): bottom 1 has shape 3 2 (6) but bottom 0 has 2 3 (6)");
  expect_error(&p, "2,3", 1, "layer 'elt' (Eltwise) takes at least 2 bottom blobs, got 1");
}

/* ---------------------------------------------------------------- Reduction */

typedef enum { R_SUM = 1, R_ASUM = 2, R_SUMSQ = 3, R_MEAN = 4 } rop_t;

static void run_reduction(rop_t op, int axis, float coeff) {
  Caffe__ReductionParameter rp = CAFFE__REDUCTION_PARAMETER__INIT;
  rp.has_operation = 1, rp.operation = (Caffe__ReductionParameter__ReductionOp)op;
  rp.has_axis = 1, rp.axis = axis;
  rp.has_coeff = 1, rp.coeff = coeff;
  Caffe__LayerParameter p = layer("red", "Reduction");
  p.reduction_param = &rp;
  tu_layer_case c;
  tu_layer_case_init(&c, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4", 1);
  int a = axis < 0 ? axis + 3 : axis;
  assert_int_equal(c.top[0]->ndim, a);
  for (int k = 0; k < a; k++) assert_int_equal(c.top[0]->shape[k], c.bottom[0]->shape[k]);
  tu_forward(&c);
  size_t num = c.top[0]->count, dim = 24 / num;
  float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]), dy[24], dx[24];
  tu_fill_uniform(dy, num, -1, 1, 11);
  ct_tensor_upload_diff(c.top[0], dy);
  bool prop[1] = {true};
  ct_layer_backward(c.l, c.top, prop, c.bottom);
  ct_tensor_download_diff(c.bottom[0], dx);
  for (size_t i = 0; i < num; i++) {
    double s = 0;
    for (size_t k = 0; k < dim; k++) {
      double v = x[i * dim + k];
      s += op == R_ASUM ? fabs(v) : (op == R_SUMSQ ? v * v : v);
    }
    if (op == R_MEAN) s /= (double)dim;
    assert_close(y[i], coeff * s, 1e-5);
    for (size_t k = 0; k < dim; k++) {
      double v = x[i * dim + k], g = coeff * dy[i];
      if (op == R_MEAN) g /= (double)dim;
      if (op == R_ASUM) g *= v > 0 ? 1 : (v < 0 ? -1 : 0);
      if (op == R_SUMSQ) g *= 2 * v;
      assert_close(dx[i * dim + k], g, 1e-5);
    }
  }
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  if (op == R_ASUM) o.kink = 0.0f, o.kink_range = 0.011f;
  tu_check_gradient(&c, &o);
  free(x);
  free(y);
  tu_layer_case_free(&c);
}

static void test_reduction(void **state) {
  const rop_t ops[4] = {R_SUM, R_ASUM, R_SUMSQ, R_MEAN};
  const int axes[3] = {0, 1, -1};
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) {
      run_reduction(ops[i], axes[j], 1.0f);
      run_reduction(ops[i], axes[j], -0.5f);
    }
}

static void test_reduction_bad(void **state) {
  Caffe__ReductionParameter rp = CAFFE__REDUCTION_PARAMETER__INIT;
  Caffe__LayerParameter p = layer("red", "Reduction");
  p.reduction_param = &rp;
  rp.has_axis = 1, rp.axis = 3;
  expect_error(&p, "2,3,4", 1, "layer 'red' (Reduction): axis 3 out of range for a 3-axis bottom");
  rp.axis = 0, rp.has_operation = 1, rp.operation = (Caffe__ReductionParameter__ReductionOp)9;
  expect_error(&p, "2,3,4", 1, "layer 'red' (Reduction): reduction_param: unknown operation 9");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_eltwise_sum),      cmocka_unit_test(test_eltwise_prod),
      cmocka_unit_test(test_eltwise_max),      cmocka_unit_test(test_eltwise_max_ties),
      cmocka_unit_test(test_eltwise_bad),      cmocka_unit_test(test_reduction),
      cmocka_unit_test(test_reduction_bad),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
