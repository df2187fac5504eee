/* Accuracy and ArgMax against naive references, ties, output shapes, and
 * bad parameters. */
#include "losstest.h"

static void expect_error(lt_param *lp, const char *shapes, int ntop, const char *msg) {
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &lp->p, CT_DEVICE_CPU, CT_PHASE_TEST, shapes, ntop, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

/* ---------------------------------------------------------------- Accuracy */

static void acc_param(lt_param *lp, unsigned top_k, int axis, bool ignore, int ignore_label) {
  lt_param_init(lp, "acc", "Accuracy");
  lp->p.accuracy_param = &lp->accuracy;
  lp->accuracy.has_top_k = 1;
  lp->accuracy.top_k = top_k;
  lp->accuracy.has_axis = 1;
  lp->accuracy.axis = axis;
  lp->accuracy.has_ignore_label = ignore;
  lp->accuracy.ignore_label = ignore_label;
}

/* Overall and per-class accuracy the naive way. */
static double acc_ref(const float *x, const float *label, size_t outer, int C, size_t inner,
                      unsigned top_k, bool ignore, int ignore_label, double *per_class) {
  long hits = 0, valid = 0, nhit[16] = {0}, nall[16] = {0};
  for (size_t i = 0; i < outer; i++)
    for (size_t k = 0; k < inner; k++) {
      int y = (int)label[i * inner + k];
      if (ignore && y == ignore_label) continue;
      float truth = x[(i * C + y) * inner + k];
      unsigned at_least = 0;
      for (int c = 0; c < C; c++) at_least += x[(i * C + c) * inner + k] >= truth;
      bool hit = at_least <= top_k;
      hits += hit;
      valid++;
      nall[y]++;
      nhit[y] += hit;
    }
  for (int c = 0; c < C; c++) per_class[c] = nall[c] ? (double)nhit[c] / nall[c] : 0;
  return valid ? (double)hits / valid : 0;
}

static void acc_check(const char *shapes, int axis, size_t outer, int C, size_t inner,
                      unsigned top_k, bool ignore) {
  lt_param lp;
  acc_param(&lp, top_k, axis, ignore, 2);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TEST, shapes, 2);
  float *x = tu_values(c.bottom[0]), *label = lt_set_labels(c.bottom[1], C, 111);
  tu_forward(&c);
  double per_class[16];
  double want = acc_ref(x, label, outer, C, inner, top_k, ignore, 2, per_class);
  char what[96];
  snprintf(what, sizeof what, "Accuracy %s axis %d top_k %u ignore %d", shapes, axis, top_k, ignore);
  lt_assert_close(lt_top0(&c), want, 1e-6, what);
  assert_int_equal(c.top[1]->ndim, 1);
  assert_int_equal(c.top[1]->shape[0], C);
  float *pc = tu_values(c.top[1]);
  for (int k = 0; k < C; k++) lt_assert_close(pc[k], per_class[k], 1e-6, what);
  free(pc);
  free(x);
  free(label);
  tu_layer_case_free(&c);
}

static void test_accuracy_forward(void **state) {
  for (unsigned k = 1; k <= 3; k++) acc_check("12,6; 12", 1, 12, 6, 1, k, false);
  acc_check("12,6; 12", 1, 12, 6, 1, 1, true);
  acc_check("3,4,2,2; 3,2,2", 1, 3, 4, 4, 1, false);
  acc_check("3,4,2,2; 3,2,2", 1, 3, 4, 4, 2, true);
  acc_check("2,3,5; 2,3", -1, 6, 5, 1, 2, false);
}

/* A class scoring the same as the label counts as better (Caffe's >=). */
static void test_accuracy_ties(void **state) {
  lt_param lp;
  acc_param(&lp, 1, 1, false, 0);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TEST, "3,3; 3", 1);
  tu_set_values(c.bottom[0], (float[]){1, 1, 0, /**/ 0, 2, 1, /**/ 5, 4, 4});
  tu_set_values(c.bottom[1], (float[]){0, 1, 1});
  tu_forward(&c);
  lt_assert_close(lt_top0(&c), 1.0 / 3.0, 1e-7, "ties");
  tu_layer_case_free(&c);
  acc_param(&lp, 2, 1, false, 0);
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TEST, "3,3; 3", 1);
  tu_set_values(c.bottom[0], (float[]){1, 1, 0, /**/ 0, 2, 1, /**/ 5, 4, 4});
  tu_set_values(c.bottom[1], (float[]){0, 1, 1});
  tu_forward(&c);
  lt_assert_close(lt_top0(&c), 2.0 / 3.0, 1e-7, "ties top 2");
  tu_layer_case_free(&c);
}

static void test_accuracy_all_ignored(void **state) {
  lt_param lp;
  acc_param(&lp, 1, 1, true, 4);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TEST, "2,5; 2", 2);
  tu_set_values(c.bottom[1], (float[]){4, 4});
  tu_forward(&c);
  assert_true(lt_top0(&c) == 0.0);
  float *pc = tu_values(c.top[1]);
  for (int k = 0; k < 5; k++) assert_true(pc[k] == 0.0f);
  free(pc);
  tu_layer_case_free(&c);
}

static void test_accuracy_bad_input(void **state) {
  lt_param lp;
  acc_param(&lp, 7, 1, false, 0);
  expect_error(&lp, "12,6; 12", 1,
               "layer 'acc' (Accuracy): accuracy_param.top_k 7 must be less than or equal to the "
               "number of classes (6)");
  acc_param(&lp, 1, 1, false, 0);
  expect_error(&lp, "3,4,2; 3",  1,
               "layer 'acc' (Accuracy): number of labels must match number of predictions: "
               "outer*inner = 3*2 = 6 positions for prediction shape 3 4 2 (24) with class axis 1, "
               "but the label blob has 3 values");
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TEST, "3,4; 3", 1);
  tu_set_values(c.bottom[1], (float[]){1, 2, 4});
  ct_error err;
  assert_int_equal(ct_layer_forward(c.l, c.bottom, c.top, NULL, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'acc' (Accuracy): label 4 at index 2 is out of range [0, 4)");
  tu_layer_case_free(&c);
  assert_true(ct_layer_find("Accuracy")->flags & CT_LAYER_NO_BACKWARD);
  assert_null(ct_layer_find("Accuracy")->backward_cpu);
}

/* ---------------------------------------------------------------- ArgMax */

static void argmax_param(lt_param *lp, unsigned top_k, bool out_max_val, bool has_axis, int axis) {
  lt_param_init(lp, "argmax", "ArgMax");
  lp->p.argmax_param = &lp->argmax;
  lp->argmax.has_top_k = 1;
  lp->argmax.top_k = top_k;
  lp->argmax.has_out_max_val = 1;
  lp->argmax.out_max_val = out_max_val;
  lp->argmax.has_axis = has_axis;
  lp->argmax.axis = axis;
}

/* The top k (value, index) of n values spaced stride apart, larger index first on ties. */
static void argmax_ref(const float *x, int n, size_t stride, int k, float *val, int *idx) {
  int order[64];
  for (int j = 0; j < n; j++) order[j] = j;
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++) {
      float va = x[order[a] * stride], vb = x[order[b] * stride];
      if (vb > va || (vb == va && order[b] > order[a])) {
        int t = order[a];
        order[a] = order[b];
        order[b] = t;
      }
    }
  for (int j = 0; j < k; j++) {
    idx[j] = order[j];
    val[j] = x[order[j] * stride];
  }
}

static void argmax_check(const char *shape, unsigned k, bool out_max_val, bool has_axis, int axis,
                         int top_ndim, const int *top_shape) {
  lt_param lp;
  argmax_param(&lp, k, out_max_val, has_axis, axis);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TEST, shape, 1);
  /* Values on a coarse grid so that ties occur. */
  float *x = tu_values(c.bottom[0]);
  for (size_t i = 0; i < c.bottom[0]->count; i++) x[i] = floorf(x[i] * 3.0f);
  tu_set_values(c.bottom[0], x);
  tu_forward(&c);
  assert_int_equal(c.top[0]->ndim, top_ndim);
  for (int i = 0; i < top_ndim; i++) assert_int_equal(c.top[0]->shape[i], top_shape[i]);
  float *y = tu_values(c.top[0]);
  const ct_tensor *b = c.bottom[0];
  int a = has_axis ? (axis < 0 ? axis + b->ndim : axis) : 1;
  int dim = has_axis ? b->shape[a] : (int)(b->count / b->shape[0]);
  size_t stride = has_axis ? ct_tensor_count_range(b, a + 1, b->ndim) : 1;
  size_t rows = b->count / dim;
  float val[64];
  int idx[64];
  for (size_t r = 0; r < rows; r++) {
    size_t o = r / stride, in = r % stride;
    argmax_ref(x + o * dim * stride + in, dim, stride, (int)k, val, idx);
    for (unsigned j = 0; j < k; j++) {
      if (!has_axis && out_max_val) {
        assert_float_equal(y[2 * r * k + j], idx[j], 0);
        assert_float_equal(y[2 * r * k + k + j], val[j], 0);
      } else {
        assert_float_equal(y[(o * k + j) * stride + in], out_max_val ? val[j] : idx[j], 0);
      }
    }
  }
  free(x);
  free(y);
  tu_layer_case_free(&c);
}

static void test_argmax_forward(void **state) {
  argmax_check("4,10", 1, false, false, 0, 3, (int[]){4, 1, 1});
  argmax_check("4,10", 3, false, false, 0, 3, (int[]){4, 1, 3});
  argmax_check("4,10", 3, true, false, 0, 3, (int[]){4, 2, 3});
  argmax_check("2,3,2,2", 2, true, false, 0, 4, (int[]){2, 2, 2, 1});
  argmax_check("2,5,3", 2, false, true, 1, 3, (int[]){2, 2, 3});
  argmax_check("2,5,3", 2, true, true, 1, 3, (int[]){2, 2, 3});
  argmax_check("2,5,3", 3, false, true, -1, 3, (int[]){2, 5, 3});
  argmax_check("6,4", 4, true, true, 0, 2, (int[]){4, 4});
}

/* Equal values: the larger index comes first. */
static void test_argmax_ties(void **state) {
  lt_param lp;
  argmax_param(&lp, 3, true, false, 0);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TEST, "1,4", 1);
  tu_set_values(c.bottom[0], (float[]){3, 5, 5, 1});
  tu_forward(&c);
  float y[6];
  ct_tensor_download(c.top[0], y);
  const float want[6] = {2, 1, 0, 5, 5, 3};
  for (int i = 0; i < 6; i++) assert_float_equal(y[i], want[i], 0);
  tu_layer_case_free(&c);
}

static void test_argmax_bad_params(void **state) {
  lt_param lp;
  argmax_param(&lp, 0, false, false, 0);
  expect_error(&lp, "4,10", 1, "layer 'argmax' (ArgMax): argmax_param.top_k must be at least 1");
  argmax_param(&lp, 11, false, false, 0);
  expect_error(&lp, "4,10", 1,
               "layer 'argmax' (ArgMax): argmax_param.top_k 11 must be less than or equal to the "
               "number of values per item (10)");
  argmax_param(&lp, 4, false, true, 2);
  expect_error(&lp, "4,10,3", 1,
               "layer 'argmax' (ArgMax): argmax_param.top_k 4 must be less than or equal to the "
               "size of axis 2 (3)");
  argmax_param(&lp, 1, false, true, 3);
  expect_error(&lp, "4,10,3", 1,
               "layer 'argmax' (ArgMax): argmax_param.axis: axis 3 out of range for a 3-axis blob "
               "bottom0");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accuracy_forward),   cmocka_unit_test(test_accuracy_ties),
      cmocka_unit_test(test_accuracy_all_ignored), cmocka_unit_test(test_accuracy_bad_input),
      cmocka_unit_test(test_argmax_forward),     cmocka_unit_test(test_argmax_ties),
      cmocka_unit_test(test_argmax_bad_params),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
