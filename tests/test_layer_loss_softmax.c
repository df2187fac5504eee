/* Softmax and SoftmaxWithLoss against naive double references, gradients,
 * normalisation modes, ignore_label, and bad shapes and labels. */
#include "losstest.h"

/* ---------------------------------------------------------------- Softmax */

static const struct {
  const char *shape;
  int axis;
  size_t outer, inner;
  int C;
} k_softmax_cases[] = {
    {"2,10,2,3", 1, 2, 6, 10},
    {"3,4", -1, 3, 1, 4},
    {"2,3,4", 2, 6, 1, 4},
    {"3,2,4,5", 0, 1, 40, 3},
};

static void softmax_param(lt_param *lp, int axis) {
  lt_param_init(lp, "softmax", "Softmax");
  if (axis != 1) {
    lp->softmax.has_axis = 1;
    lp->softmax.axis = axis;
    lp->p.softmax_param = &lp->softmax;
  }
}

static void test_softmax_forward(void **state) {
  for (size_t t = 0; t < sizeof k_softmax_cases / sizeof k_softmax_cases[0]; t++) {
    lt_param lp;
    softmax_param(&lp, k_softmax_cases[t].axis);
    tu_layer_case c;
    tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, k_softmax_cases[t].shape, 1);
    tu_fill(c.bottom[0], -4.0f, 4.0f, 7 + t);
    tu_forward(&c);
    assert_true(ct_tensor_same_shape(c.top[0], c.bottom[0]));
    float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]);
    size_t n = c.bottom[0]->count;
    double *ref = malloc(n * sizeof *ref);
    lt_softmax_ref(x, k_softmax_cases[t].outer, k_softmax_cases[t].C, k_softmax_cases[t].inner, ref);
    for (size_t i = 0; i < n; i++) lt_assert_close(y[i], ref[i], 1e-6, "softmax value");
    free(ref);
    free(x);
    free(y);
    tu_layer_case_free(&c);
  }
}

/* Large inputs must not overflow: the max is subtracted first. */
static void test_softmax_stable(void **state) {
  lt_param lp;
  softmax_param(&lp, 1);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "1,3", 1);
  tu_set_values(c.bottom[0], (float[]){1000.0f, 999.0f, -1000.0f});
  tu_forward(&c);
  float *y = tu_values(c.top[0]);
  double e = exp(-1.0);
  lt_assert_close(y[0], 1.0 / (1.0 + e), 1e-6, "p0");
  lt_assert_close(y[1], e / (1.0 + e), 1e-6, "p1");
  assert_true(y[2] == 0.0f);
  free(y);
  tu_layer_case_free(&c);
}

static void test_softmax_gradient(void **state) {
  for (size_t t = 0; t < sizeof k_softmax_cases / sizeof k_softmax_cases[0]; t++) {
    lt_param lp;
    softmax_param(&lp, k_softmax_cases[t].axis);
    tu_layer_case c;
    tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, k_softmax_cases[t].shape, 1);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
  }
}

/* In place (top == bottom) gives the same values and gradients. */
static void test_softmax_in_place(void **state) {
  lt_param lp;
  softmax_param(&lp, 1);
  tu_layer_case ref;
  tu_layer_case_init(&ref, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,5,3", 1);
  float dy[30];
  tu_fill_uniform(dy, 30, -1.0f, 1.0f, 5);
  float *x = tu_values(ref.bottom[0]);
  tu_forward(&ref);
  ct_tensor_upload_diff(ref.top[0], dy);
  ct_layer_backward(ref.l, ref.top, (bool[]){true}, ref.bottom);

  ct_context ctx;
  ct_error err;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, &err), CT_OK);
  ct_tensor *blob = ct_tensor_new_shape(CT_DEVICE_CPU, "blob", 3, (int[]){2, 5, 3}, true);
  ct_tensor_upload(blob, x);
  ct_layer *l;
  assert_int_equal(ct_layer_create(&lp.p, CT_PHASE_TRAIN, &ctx, 1, 1, &l, &err), CT_OK);
  assert_int_equal(ct_layer_setup(l, &blob, &blob, &err), CT_OK);
  assert_int_equal(ct_layer_forward(l, &blob, &blob, NULL, &err), CT_OK);
  ct_tensor_upload_diff(blob, dy);
  ct_layer_backward(l, &blob, (bool[]){true}, &blob);
  float y_in[30], dx_in[30], y_ref[30], dx_ref[30];
  ct_tensor_download(blob, y_in);
  ct_tensor_download_diff(blob, dx_in);
  ct_tensor_download(ref.top[0], y_ref);
  ct_tensor_download_diff(ref.bottom[0], dx_ref);
  for (int i = 0; i < 30; i++) {
    assert_float_equal(y_in[i], y_ref[i], 0);
    assert_float_equal(dx_in[i], dx_ref[i], 0);
  }
  ct_layer_free(l);
  ct_tensor_free(blob);
  ct_context_free(&ctx);
  free(x);
  tu_layer_case_free(&ref);
}

static void test_softmax_bad_axis(void **state) {
  lt_param lp;
  softmax_param(&lp, 4);
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,5", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "layer 'softmax' (Softmax): softmax_param.axis: axis 4 out of range for a "
                      "4-axis blob bottom0");
  tu_layer_case_free(&c);
}

/* ---------------------------------------------------------------- SoftmaxWithLoss */

enum { NORM_UNSET = -1 };

/* normalization: NORM_UNSET or a mode; normalize: -1 unset, 0 or 1. */
static void swl_param(lt_param *lp, int axis, bool ignore, int ignore_label, int normalization,
                      int normalize) {
  lt_param_init(lp, "loss", "SoftmaxWithLoss");
  if (axis != 1) {
    lp->softmax.has_axis = 1;
    lp->softmax.axis = axis;
    lp->p.softmax_param = &lp->softmax;
  }
  if (ignore || normalization != NORM_UNSET || normalize >= 0) lp->p.loss_param = &lp->loss;
  lp->loss.has_ignore_label = ignore;
  lp->loss.ignore_label = ignore_label;
  if (normalization != NORM_UNSET) {
    lp->loss.has_normalization = 1;
    lp->loss.normalization = normalization;
  }
  if (normalize >= 0) {
    lp->loss.has_normalize = 1;
    lp->loss.normalize = normalize;
  }
}

/* The loss a naive double computation gives, divided by the normaliser. */
static double swl_ref(const float *x, const float *label, size_t outer, int C, size_t inner,
                      bool ignore, int ignore_label, int mode) {
  double *p = malloc(outer * C * inner * sizeof *p);
  lt_softmax_ref(x, outer, C, inner, p);
  double loss = 0;
  long valid = 0;
  for (size_t i = 0; i < outer; i++)
    for (size_t k = 0; k < inner; k++) {
      int y = (int)label[i * inner + k];
      if (ignore && y == ignore_label) continue;
      loss -= log(p[(i * C + y) * inner + k]);
      valid++;
    }
  free(p);
  double n = mode == 0 ? (double)(outer * inner) : mode == 1 ? (double)valid : mode == 2 ? (double)outer : 1.0;
  return loss / (n < 1 ? 1 : n);
}

static void swl_check(int axis, const char *shape, size_t outer, int C, size_t inner, bool ignore,
                      int normalization, int normalize, int expect_mode, int ntop) {
  lt_param lp;
  swl_param(&lp, axis, ignore, 1, normalization, normalize);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, ntop);
  tu_fill(c.bottom[0], -3.0f, 3.0f, 21);
  float *label = lt_set_labels(c.bottom[1], C, 33);
  tu_forward(&c);
  assert_int_equal(c.top[0]->ndim, 0);
  float *x = tu_values(c.bottom[0]);
  char what[128];
  snprintf(what, sizeof what, "SoftmaxWithLoss %s axis %d ignore %d normalization %d normalize %d",
           shape, axis, ignore, normalization, normalize);
  lt_assert_close(lt_top0(&c), swl_ref(x, label, outer, C, inner, ignore, 1, expect_mode), 1e-5, what);
  if (ntop == 2) {
    double *p = malloc(c.bottom[0]->count * sizeof *p);
    lt_softmax_ref(x, outer, C, inner, p);
    float *prob = tu_values(c.top[1]);
    assert_true(ct_tensor_same_shape(c.top[1], c.bottom[0]));
    for (size_t i = 0; i < c.bottom[0]->count; i++) lt_assert_close(prob[i], p[i], 1e-6, "prob top");
    free(prob);
    free(p);
  }
  free(x);
  free(label);
  tu_layer_case_free(&c);
}

static void test_swl_forward(void **state) {
  /* FULL 0, VALID 1, BATCH_SIZE 2, NONE 3 */
  swl_check(1, "2,5,2,3; 2,1,2,3", 2, 5, 6, false, NORM_UNSET, -1, 1, 1);
  swl_check(1, "2,5,2,3; 2,2,3", 2, 5, 6, false, NORM_UNSET, -1, 1, 2);
  swl_check(2, "2,3,4; 2,3", 6, 4, 1, false, NORM_UNSET, -1, 1, 2);
  swl_check(1, "6,4; 6", 6, 4, 1, false, NORM_UNSET, -1, 1, 1);
  /* ignore_label 1 with every normalisation */
  for (int mode = 0; mode <= 3; mode++) swl_check(1, "2,5,2,3; 2,6", 2, 5, 6, true, mode, -1, mode, 1);
  swl_check(1, "2,5,2,3; 2,6", 2, 5, 6, true, NORM_UNSET, -1, 1, 1);
  /* legacy normalize: false is BATCH_SIZE, true VALID; normalization wins when both are set */
  swl_check(1, "2,5,2,3; 2,6", 2, 5, 6, true, NORM_UNSET, 0, 2, 1);
  swl_check(1, "2,5,2,3; 2,6", 2, 5, 6, true, NORM_UNSET, 1, 1, 1);
  swl_check(1, "2,5,2,3; 2,6", 2, 5, 6, true, 3, 0, 3, 1);
}

/* Every label ignored: the divisor is kept at 1 and the loss is 0. */
static void test_swl_all_ignored(void **state) {
  lt_param lp;
  swl_param(&lp, 1, true, 2, NORM_UNSET, -1);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3,4; 3", 1);
  tu_set_values(c.bottom[1], (float[]){2, 2, 2});
  tu_forward(&c);
  assert_true(lt_top0(&c) == 0.0);
  ct_tensor_need_diff(c.bottom[0]);
  ct_layer_backward(c.l, c.top, (bool[]){true, false}, c.bottom);
  float dx[12];
  ct_tensor_download_diff(c.bottom[0], dx);
  for (int i = 0; i < 12; i++) assert_true(dx[i] == 0.0f);
  tu_layer_case_free(&c);
}

static void swl_gradient(int axis, const char *shape, int C, bool ignore, int normalize) {
  lt_param lp;
  swl_param(&lp, axis, ignore, 1, NORM_UNSET, normalize);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, 1);
  free(lt_set_labels(c.bottom[1], C, 44));
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.threshold = 1e-2f; /* Caffe's SoftmaxWithLoss test */
  o.skip_bottom[1] = true;
  tu_check_gradient(&c, &o);
  tu_layer_case_free(&c);
}

static void test_swl_gradient(void **state) {
  swl_gradient(1, "2,5,2,3; 2,1,2,3", 5, false, -1);
  swl_gradient(1, "2,5,2,3; 2,1,2,3", 5, true, -1);
  swl_gradient(1, "2,5,2,3; 2,1,2,3", 5, false, 0);
  swl_gradient(-1, "3,2,4; 3,2", 4, false, -1);
}

static void swl_expect_error(const char *shape, const float *labels, bool ignore, int ignore_label,
                             const char *msg, bool in_setup) {
  lt_param lp;
  swl_param(&lp, 1, ignore, ignore_label, NORM_UNSET, -1);
  tu_layer_case c;
  ct_error err;
  ct_status s = tu_layer_case_try(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shape, 1, &err);
  if (!in_setup) {
    assert_int_equal(s, CT_OK);
    tu_set_values(c.bottom[1], labels);
    s = ct_layer_forward(c.l, c.bottom, c.top, NULL, &err);
  }
  assert_int_equal(s, CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

static void test_swl_bad_labels(void **state) {
  swl_expect_error("4,5; 4", (float[]){0, 4, 1, 5}, false, 0,
                   "layer 'loss' (SoftmaxWithLoss): label 5 at index 3 is out of range [0, 5)", false);
  swl_expect_error("4,5; 4", (float[]){0, -1, 1, 2}, false, 0,
                   "layer 'loss' (SoftmaxWithLoss): label -1 at index 1 is out of range [0, 5)", false);
  swl_expect_error("4,5; 4", (float[]){0, NAN, 1, 2}, false, 0,
                   "layer 'loss' (SoftmaxWithLoss): label nan at index 1 is out of range [0, 5)",
                   false);
  /* An ignored label may lie outside the classes. */
  lt_param lp;
  swl_param(&lp, 1, true, 255, NORM_UNSET, -1);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,5; 4", 1);
  tu_set_values(c.bottom[1], (float[]){0, 255, 1, 255});
  tu_forward(&c);
  tu_layer_case_free(&c);
}

static void test_swl_bad_shapes(void **state) {
  swl_expect_error("2,5,3; 2,4", NULL, false, 0,
                   "layer 'loss' (SoftmaxWithLoss): number of labels must match number of "
                   "predictions: outer*inner = 2*3 = 6 positions for prediction shape 2 5 3 (30) "
                   "with class axis 1, but the label blob has 8 values",
                   true);
  swl_expect_error("2,5; 3", NULL, false, 0,
                   "layer 'loss' (SoftmaxWithLoss): the data and label blobs must have the same "
                   "first dimension, got shapes 2 5 (10) and 3 (3)",
                   true);
}

/* The flags the net relies on. */
static void test_swl_flags(void **state) {
  const ct_layer_ops *ops = ct_layer_find("SoftmaxWithLoss");
  assert_non_null(ops);
  assert_true(ops->flags & CT_LAYER_LOSS);
  assert_true(ops->flags & CT_LAYER_AUTO_TOPS);
  assert_int_equal(ops->no_force_backward_bottoms, 2);
  assert_int_equal(ops->max_tops, 2);
  lt_param lp;
  swl_param(&lp, 1, false, 0, NORM_UNSET, -1);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3; 2", 2);
  assert_true(c.l->loss_weight[0] == 1.0f);
  assert_true(c.l->loss_weight[1] == 0.0f);
  tu_layer_case_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_softmax_forward),   cmocka_unit_test(test_softmax_stable),
      cmocka_unit_test(test_softmax_gradient),  cmocka_unit_test(test_softmax_in_place),
      cmocka_unit_test(test_softmax_bad_axis),  cmocka_unit_test(test_swl_forward),
      cmocka_unit_test(test_swl_all_ignored),   cmocka_unit_test(test_swl_gradient),
      cmocka_unit_test(test_swl_bad_labels),    cmocka_unit_test(test_swl_bad_shapes),
      cmocka_unit_test(test_swl_flags),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
