/* EuclideanLoss, ContrastiveLoss and HingeLoss against naive double
 * references, gradients (with Caffe's checker settings) and bad input. */
#include "losstest.h"

static void expect_setup_error(lt_param *lp, const char *shapes, const char *msg) {
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &lp->p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes, 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

/* ---------------------------------------------------------------- EuclideanLoss */

static void test_euclidean_forward(void **state) {
  const char *shapes[] = {"4,5; 4,5", "3,2,2; 3,4", "2,3,1,2; 2,6"};
  for (int t = 0; t < 3; t++) {
    lt_param lp;
    lt_param_init(&lp, "euclid", "EuclideanLoss");
    tu_layer_case c;
    tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes[t], 1);
    tu_forward(&c);
    float *a = tu_values(c.bottom[0]), *b = tu_values(c.bottom[1]);
    double s = 0;
    for (size_t i = 0; i < c.bottom[0]->count; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    lt_assert_close(lt_top0(&c), s / c.bottom[0]->shape[0] / 2, 1e-6, shapes[t]);
    free(a);
    free(b);
    tu_layer_case_free(&c);
  }
}

/* With loss_weight 3.7 the net's loss is 3.7 times the top and the
 * gradients are scaled by 3.7 (the weight is read from top[0]'s diff). */
static void test_euclidean_loss_weight(void **state) {
  lt_param lp;
  lt_param_init(&lp, "euclid", "EuclideanLoss");
  lp.loss_weight[0] = 3.7f;
  lp.p.n_loss_weight = 1;
  lp.p.loss_weight = lp.loss_weight;
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,5; 4,5", 1);
  double loss = 0;
  ct_error err;
  assert_int_equal(ct_layer_forward(c.l, c.bottom, c.top, &loss, &err), CT_OK);
  lt_assert_close(loss, 3.7 * lt_top0(&c), 1e-6, "weighted loss");
  ct_layer_backward(c.l, c.top, (bool[]){true, true}, c.bottom);
  float *a = tu_values(c.bottom[0]), *b = tu_values(c.bottom[1]), da[20], db[20];
  ct_tensor_download_diff(c.bottom[0], da);
  ct_tensor_download_diff(c.bottom[1], db);
  for (int i = 0; i < 20; i++) {
    lt_assert_close(da[i], 3.7 * ((double)a[i] - b[i]) / 4, 1e-6, "d loss / d a");
    lt_assert_close(db[i], -3.7 * ((double)a[i] - b[i]) / 4, 1e-6, "d loss / d b");
  }
  free(a);
  free(b);
  tu_layer_case_free(&c);
}

static void test_euclidean_gradient(void **state) {
  lt_param lp;
  lt_param_init(&lp, "euclid", "EuclideanLoss");
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,5; 4,5", 1);
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.threshold = 1e-2f; /* Caffe's test; both bottoms */
  tu_check_gradient(&c, &o);
  tu_layer_case_free(&c);
  assert_int_equal(ct_layer_find("EuclideanLoss")->no_force_backward_bottoms, 0);
}

static void test_euclidean_bad_shape(void **state) {
  lt_param lp;
  lt_param_init(&lp, "euclid", "EuclideanLoss");
  expect_setup_error(&lp, "4,5; 4,6",
                     "layer 'euclid' (EuclideanLoss): inputs must have the same dimension: 5 values "
                     "per item in bottom 0, 6 in bottom 1");
}

/* ---------------------------------------------------------------- ContrastiveLoss */

#define CL_N 8
#define CL_C 5

static void cl_param(lt_param *lp, float margin, bool legacy) {
  lt_param_init(lp, "contrastive", "ContrastiveLoss");
  lp->contrastive.has_margin = 1;
  lp->contrastive.margin = margin;
  lp->contrastive.has_legacy_version = 1;
  lp->contrastive.legacy_version = legacy;
  lp->p.contrastive_loss_param = &lp->contrastive;
}

static const float k_similar[CL_N] = {1, 0, 0, 1, 0, 1, 0, 0};

static void cl_init(tu_layer_case *c, lt_param *lp) {
  tu_layer_case_init(c, &lp->p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "8,5,1,1; 8,5,1,1; 8,1,1,1", 1);
  tu_fill(c->bottom[0], -0.5f, 0.5f, 91);
  tu_fill(c->bottom[1], -0.5f, 0.5f, 92);
  tu_set_values(c->bottom[2], k_similar);
}

static double cl_ref(const float *a, const float *b, float margin, bool legacy) {
  double loss = 0;
  for (int n = 0; n < CL_N; n++) {
    double d2 = 0;
    for (int k = 0; k < CL_C; k++) d2 += ((double)a[n * CL_C + k] - b[n * CL_C + k]) * (a[n * CL_C + k] - b[n * CL_C + k]);
    if (k_similar[n] != 0) loss += d2;
    else if (legacy) loss += fmax(margin - d2, 0);
    else loss += pow(fmax(margin - sqrt(d2), 0), 2);
  }
  return loss / CL_N / 2;
}

static void test_contrastive_forward(void **state) {
  for (int legacy = 0; legacy < 2; legacy++) {
    for (int m = 0; m < 2; m++) {
      float margin = m ? 0.5f : 1.0f;
      lt_param lp;
      cl_param(&lp, margin, legacy);
      tu_layer_case c;
      cl_init(&c, &lp);
      tu_forward(&c);
      float *a = tu_values(c.bottom[0]), *b = tu_values(c.bottom[1]);
      lt_assert_close(lt_top0(&c), cl_ref(a, b, margin, legacy), 1e-6, "ContrastiveLoss");
      free(a);
      free(b);
      tu_layer_case_free(&c);
    }
  }
}

static void test_contrastive_gradient(void **state) {
  for (int legacy = 0; legacy < 2; legacy++) {
    lt_param lp;
    cl_param(&lp, 1.0f, legacy);
    tu_layer_case c;
    cl_init(&c, &lp);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.threshold = 1e-2f; /* Caffe's test */
    o.skip_bottom[2] = true;
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
  }
}

static void test_contrastive_bad_shapes(void **state) {
  lt_param lp;
  cl_param(&lp, 1.0f, false);
  expect_setup_error(&lp, "4,5,2; 4,5,2; 4",
                     "layer 'contrastive' (ContrastiveLoss): bottom 0 must be N x C x 1 x 1, got "
                     "shape 4 5 2 (40)");
  expect_setup_error(&lp, "4,5; 4,6; 4",
                     "layer 'contrastive' (ContrastiveLoss): bottom 1 must be N x 5 x 1 x 1 like "
                     "bottom 0, got shape 4 6 (24)");
  expect_setup_error(&lp, "4,5; 4,5; 3",
                     "layer 'contrastive' (ContrastiveLoss): the similarity bottom 2 must be N x 1 x "
                     "1 x 1 with N = 4, got shape 3 (3)");
}

/* ---------------------------------------------------------------- HingeLoss */

static void hinge_param(lt_param *lp, int norm) {
  lt_param_init(lp, "hinge", "HingeLoss");
  if (norm) {
    lp->hinge.has_norm = 1;
    lp->hinge.norm = norm;
    lp->p.hinge_loss_param = &lp->hinge;
  }
}

/* Scores in [-3, 3) kept 0.05 away from the kinks at +-1. */
static float *hinge_scores(ct_tensor *t) {
  float *v = malloc(t->count * sizeof(float));
  tu_fill_uniform(v, t->count, -3.0f, 3.0f, 101);
  for (size_t i = 0; i < t->count; i++)
    if (fabsf(fabsf(v[i]) - 1.0f) < 0.05f) v[i] += v[i] > 0 ? 0.1f : -0.1f;
  tu_set_values(t, v);
  return v;
}

static void test_hinge_forward(void **state) {
  for (int norm = 0; norm <= 2; norm++) { /* 0: unset, L1 by default */
    lt_param lp;
    hinge_param(&lp, norm);
    tu_layer_case c;
    tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "6,5; 6", 1);
    float *x = hinge_scores(c.bottom[0]), *label = lt_set_labels(c.bottom[1], 5, 102);
    tu_forward(&c);
    double loss = 0;
    for (int n = 0; n < 6; n++)
      for (int k = 0; k < 5; k++) {
        double t = fmax(0, 1 + (k == (int)label[n] ? -1 : 1) * (double)x[n * 5 + k]);
        loss += norm == 2 ? t * t : t;
      }
    lt_assert_close(lt_top0(&c), loss / 6, 1e-6, "HingeLoss");
    free(x);
    free(label);
    tu_layer_case_free(&c);
  }
}

static void test_hinge_gradient(void **state) {
  for (int norm = 1; norm <= 2; norm++) {
    lt_param lp;
    hinge_param(&lp, norm);
    tu_layer_case c;
    tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "6,5; 6", 1);
    free(hinge_scores(c.bottom[0]));
    free(lt_set_labels(c.bottom[1], 5, 103));
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    /* Caffe's test: L1 threshold 2e-3 with a kink at 1, L2 1e-2 with a kink at 0 */
    o.threshold = norm == 1 ? 2e-3f : 1e-2f;
    o.kink = norm == 1 ? 1.0f : 0.0f;
    o.kink_range = 0.01f;
    o.skip_bottom[1] = true;
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
  }
}

static void test_hinge_bad_input(void **state) {
  lt_param lp;
  hinge_param(&lp, 3);
  expect_setup_error(&lp, "6,5; 6",
                     "layer 'hinge' (HingeLoss): hinge_loss_param.norm 3 is neither L1 (1) nor L2 (2)");
  hinge_param(&lp, 0);
  expect_setup_error(&lp, "6,5; 6,2",
                     "layer 'hinge' (HingeLoss): number of labels must match the batch size: 6 "
                     "items in bottom 0, 12 labels in bottom 1");
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3,5; 3", 1);
  tu_set_values(c.bottom[1], (float[]){1, 5, 2});
  ct_error err;
  assert_int_equal(ct_layer_forward(c.l, c.bottom, c.top, NULL, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'hinge' (HingeLoss): label 5 at index 1 is out of range [0, 5)");
  tu_layer_case_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_euclidean_forward),     cmocka_unit_test(test_euclidean_loss_weight),
      cmocka_unit_test(test_euclidean_gradient),    cmocka_unit_test(test_euclidean_bad_shape),
      cmocka_unit_test(test_contrastive_forward),   cmocka_unit_test(test_contrastive_gradient),
      cmocka_unit_test(test_contrastive_bad_shapes), cmocka_unit_test(test_hinge_forward),
      cmocka_unit_test(test_hinge_gradient),        cmocka_unit_test(test_hinge_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
