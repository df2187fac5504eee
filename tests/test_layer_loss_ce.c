/* SigmoidCrossEntropyLoss, MultinomialLogisticLoss and InfogainLoss against
 * naive double references, gradients, normalisation and bad input. */
#include "losstest.h"

enum { NORM_UNSET = -1 };

static double norm_divisor(int mode, size_t outer, size_t inner, long valid) {
  double n = mode == 0 ? (double)(outer * inner) : mode == 1 ? (double)valid
           : mode == 2 ? (double)outer : 1.0;
  return n < 1 ? 1 : n;
}

static void set_loss_param(lt_param *lp, bool ignore, int ignore_label, int normalization,
                           int normalize) {
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

/* ---------------------------------------------------------------- SigmoidCrossEntropyLoss */

/* Targets in [0, 1), every third one set to -1 (the ignore label in these tests). */
static float *sce_targets(ct_tensor *t) {
  float *v = malloc(t->count * sizeof(float));
  tu_fill_uniform(v, t->count, 0.0f, 1.0f, 61);
  for (size_t i = 0; i < t->count; i += 3) v[i] = -1.0f;
  tu_set_values(t, v);
  return v;
}

static void sce_check(bool ignore, int normalization, int normalize, int expect_mode) {
  lt_param lp;
  lt_param_init(&lp, "sce", "SigmoidCrossEntropyLoss");
  set_loss_param(&lp, ignore, -1, normalization, normalize);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,3,2; 4,6", 1);
  tu_fill(c.bottom[0], -5.0f, 5.0f, 3);
  float *x = tu_values(c.bottom[0]), *t = sce_targets(c.bottom[1]);
  tu_forward(&c);
  double loss = 0;
  long valid = 0;
  for (int i = 0; i < 24; i++) {
    if (ignore && t[i] == -1.0f) continue;
    double p = 1.0 / (1.0 + exp(-(double)x[i]));
    loss -= t[i] * log(p) + (1 - t[i]) * log(1 - p);
    valid++;
  }
  char what[96];
  snprintf(what, sizeof what, "SigmoidCrossEntropyLoss ignore %d normalization %d normalize %d",
           ignore, normalization, normalize);
  lt_assert_close(lt_top0(&c), loss / norm_divisor(expect_mode, 4, 6, valid), 1e-5, what);
  free(x);
  free(t);
  tu_layer_case_free(&c);
}

static void test_sce_forward(void **state) {
  sce_check(false, NORM_UNSET, -1, 2); /* Caffe's default here: BATCH_SIZE */
  for (int mode = 0; mode <= 3; mode++) sce_check(true, mode, -1, mode);
  sce_check(true, NORM_UNSET, 1, 1);
  sce_check(true, NORM_UNSET, 0, 2);
  sce_check(true, 0, 1, 0); /* normalization wins over normalize */
}

static void test_sce_gradient(void **state) {
  for (int k = 0; k < 3; k++) {
    lt_param lp;
    lt_param_init(&lp, "sce", "SigmoidCrossEntropyLoss");
    if (k == 1) set_loss_param(&lp, true, -1, 1, -1);
    if (k == 2) set_loss_param(&lp, false, 0, 0, -1);
    tu_layer_case c;
    tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,3,2; 4,6", 1);
    tu_fill(c.bottom[0], -3.0f, 3.0f, 4);
    free(sce_targets(c.bottom[1]));
    if (k != 1) tu_fill(c.bottom[1], 0.0f, 1.0f, 5);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.threshold = 1e-2f; /* Caffe's test */
    o.skip_bottom[1] = true;
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
  }
}

static void test_sce_bad_count(void **state) {
  lt_param lp;
  lt_param_init(&lp, "sce", "SigmoidCrossEntropyLoss");
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,3; 4,2", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "layer 'sce' (SigmoidCrossEntropyLoss): the predictions and targets must "
                      "have the same count, got 12 and 8");
  tu_layer_case_free(&c);
}

/* ---------------------------------------------------------------- MultinomialLogisticLoss */

/* Rows of positive probabilities summing to 1. */
static float *mll_probs(ct_tensor *t, int num, int dim) {
  float *v = malloc(t->count * sizeof(float));
  tu_fill_uniform(v, t->count, 0.1f, 1.0f, 71);
  for (int n = 0; n < num; n++) {
    float s = 0;
    for (int k = 0; k < dim; k++) s += v[n * dim + k];
    for (int k = 0; k < dim; k++) v[n * dim + k] /= s;
  }
  tu_set_values(t, v);
  return v;
}

static void test_mll_forward(void **state) {
  lt_param lp;
  lt_param_init(&lp, "mll", "MultinomialLogisticLoss");
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "5,2,2; 5,1,1,1", 1);
  float *p = mll_probs(c.bottom[0], 5, 4);
  p[4 * 4 + 3] = 0.0f; /* item 4's label gets probability 0: clamped to 1e-20 */
  tu_set_values(c.bottom[0], p);
  float label[5] = {0, 3, 2, 1, 3};
  tu_set_values(c.bottom[1], label);
  tu_forward(&c);
  double loss = 0;
  for (int n = 0; n < 5; n++) loss -= log(fmax(p[n * 4 + (int)label[n]], 1e-20f));
  lt_assert_close(lt_top0(&c), loss / 5, 1e-6, "MultinomialLogisticLoss");
  free(p);
  tu_layer_case_free(&c);
}

static void test_mll_gradient(void **state) {
  lt_param lp;
  lt_param_init(&lp, "mll", "MultinomialLogisticLoss");
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "6,5; 6", 1);
  free(mll_probs(c.bottom[0], 6, 5));
  free(lt_set_labels(c.bottom[1], 5, 8));
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.threshold = 2e-2f; /* Caffe's test: kink at 0 */
  o.kink = 0.0f;
  o.kink_range = 0.05f;
  o.skip_bottom[1] = true;
  tu_check_gradient(&c, &o);
  tu_layer_case_free(&c);
}

static void test_mll_bad_input(void **state) {
  lt_param lp;
  lt_param_init(&lp, "mll", "MultinomialLogisticLoss");
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,5; 4,2", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "layer 'mll' (MultinomialLogisticLoss): the label blob must be N x 1 x 1 x 1, "
                      "got shape 4 2 (8)");
  tu_layer_case_free(&c);
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3,5; 3", 1);
  tu_set_values(c.bottom[1], (float[]){1, 2, 7});
  assert_int_equal(ct_layer_forward(c.l, c.bottom, c.top, NULL, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "layer 'mll' (MultinomialLogisticLoss): label 7 at index 2 is out of range "
                      "[0, 5)");
  tu_layer_case_free(&c);
}

/* ---------------------------------------------------------------- InfogainLoss */

/* Caffe's test layout: data 4x2x5x2 with the classes on axis 2, labels 4x2x1x2. */
#define IG_SHAPES "4,2,5,2; 4,2,1,2; 1,1,5,5"

static double infogain_ref(const float *x, const float *label, const float *h, bool ignore,
                           int ignore_label, int mode) {
  const size_t outer = 8, inner = 2;
  const int L = 5;
  double p[80];
  lt_softmax_ref(x, outer, L, inner, p);
  double loss = 0;
  long valid = 0;
  for (size_t i = 0; i < outer; i++)
    for (size_t k = 0; k < inner; k++) {
      int y = (int)label[i * inner + k];
      if (ignore && y == ignore_label) continue;
      for (int c = 0; c < L; c++) loss -= h[y * L + c] * log(p[(i * L + c) * inner + k]);
      valid++;
    }
  return loss / norm_divisor(mode, outer, inner, valid);
}

static void ig_param(lt_param *lp, const char *source) {
  lt_param_init(lp, "infogain", "InfogainLoss");
  lp->infogain.has_axis = 1;
  lp->infogain.axis = 2;
  lp->infogain.source = (char *)source;
  lp->p.infogain_loss_param = &lp->infogain;
}

static void ig_fill(tu_layer_case *c, float **x, float **label, float **h) {
  tu_fill(c->bottom[0], -0.5f, 2.0f, 81);
  *x = tu_values(c->bottom[0]);
  *label = lt_set_labels(c->bottom[1], 5, 82);
  *h = malloc(25 * sizeof(float));
  tu_fill_uniform(*h, 25, 0.1f, 2.0f, 83);
  if (c->nb > 2) tu_set_values(c->bottom[2], *h);
}

static void test_infogain_forward(void **state) {
  for (int mode = -1; mode <= 3; mode++) {
    lt_param lp;
    ig_param(&lp, NULL);
    bool ignore = mode >= 0;
    if (ignore) set_loss_param(&lp, true, 3, mode, -1);
    tu_layer_case c;
    tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, IG_SHAPES, 2);
    float *x, *label, *h;
    ig_fill(&c, &x, &label, &h);
    tu_forward(&c);
    char what[64];
    snprintf(what, sizeof what, "InfogainLoss normalization %d", mode);
    lt_assert_close(lt_top0(&c), infogain_ref(x, label, h, ignore, 3, ignore ? mode : 1), 1e-5, what);
    double p[80];
    lt_softmax_ref(x, 8, 5, 2, p);
    float *prob = tu_values(c.top[1]);
    for (int i = 0; i < 80; i++) lt_assert_close(prob[i], p[i], 1e-6, "InfogainLoss prob top");
    free(prob);
    free(x);
    free(label);
    free(h);
    tu_layer_case_free(&c);
  }
}

/* H from a BlobProto file gives the same loss as H from a bottom. */
static void test_infogain_source(void **state) {
  float h[25];
  tu_fill_uniform(h, 25, 0.1f, 2.0f, 83);
  Caffe__BlobProto bp = CAFFE__BLOB_PROTO__INIT;
  Caffe__BlobShape shape = CAFFE__BLOB_SHAPE__INIT;
  int64_t dims[4] = {1, 1, 5, 5};
  shape.n_dim = 4;
  shape.dim = dims;
  bp.shape = &shape;
  bp.n_data = 25;
  bp.data = h;
  size_t len = caffe__blob_proto__get_packed_size(&bp);
  uint8_t *buf = malloc(len);
  caffe__blob_proto__pack(&bp, buf);
  char path[4200];
  snprintf(path, sizeof path, "%s/H.binaryproto", tu_tmpdir("infogain_source"));
  tu_write_file(path, (const char *)buf, len);
  free(buf);

  lt_param lp;
  ig_param(&lp, path);
  tu_layer_case c;
  tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,2,5,2; 4,2,1,2", 1);
  float *x, *label, *hh;
  ig_fill(&c, &x, &label, &hh);
  tu_forward(&c);
  lt_assert_close(lt_top0(&c), infogain_ref(x, label, h, false, 0, 1), 1e-5, "InfogainLoss source");
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.step = 1e-3f;
  o.threshold = 2e-2f;
  o.skip_bottom[1] = true;
  tu_check_gradient(&c, &o);
  free(x);
  free(label);
  free(hh);
  tu_layer_case_free(&c);
}

static void test_infogain_gradient(void **state) {
  for (int k = 0; k < 2; k++) {
    lt_param lp;
    ig_param(&lp, NULL);
    if (k) set_loss_param(&lp, true, 3, 2, -1);
    tu_layer_case c;
    tu_layer_case_init(&c, &lp.p, CT_DEVICE_CPU, CT_PHASE_TRAIN, IG_SHAPES, 1);
    float *x, *label, *h;
    ig_fill(&c, &x, &label, &h);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.step = 1e-3f;       /* Caffe uses 1e-4 in double; float needs a wider step */
    o.threshold = 2e-2f;  /* Caffe's test */
    o.check_bottom = 0;   /* no gradient for the labels or H */
    tu_check_gradient(&c, &o);
    free(x);
    free(label);
    free(h);
    tu_layer_case_free(&c);
  }
}

static void ig_expect_error(lt_param *lp, const char *shapes, ct_status code, const char *msg) {
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &lp->p, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes, 1, &err), code);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

static void test_infogain_bad_input(void **state) {
  lt_param lp;
  ig_param(&lp, NULL);
  ig_expect_error(&lp, "4,2,5,2; 4,2,1,2", CT_ERR_INVALID,
                  "layer 'infogain' (InfogainLoss): infogain_loss_param.source must name the "
                  "infogain matrix file when there is no third bottom");
  ig_expect_error(&lp, "4,2,5,2; 4,2,1,2; 4,4", CT_ERR_INVALID,
                  "layer 'infogain' (InfogainLoss): the infogain matrix H must have 5 x 5 = 25 "
                  "values for 5 classes, got shape 4 4 (16) in bottom 2");
  ig_expect_error(&lp, "4,2,5,2; 4,2,1; 5,5", CT_ERR_INVALID,
                  "layer 'infogain' (InfogainLoss): number of labels must match number of "
                  "predictions: outer*inner = 8*2 = 16 positions for prediction shape 4 2 5 2 (80) "
                  "with class axis 2, but the label blob has 8 values");
  set_loss_param(&lp, false, 0, NORM_UNSET, 1);
  ig_expect_error(&lp, IG_SHAPES, CT_ERR_INVALID,
                  "layer 'infogain' (InfogainLoss): loss_param.normalize is deprecated for "
                  "InfogainLoss; use loss_param.normalization");
  ig_param(&lp, "/nonexistent/H.binaryproto");
  ig_expect_error(&lp, "4,2,5,2; 4,2,1,2", CT_ERR_IO,
                  "layer 'infogain' (InfogainLoss): infogain_loss_param.source: "
                  "/nonexistent/H.binaryproto: No such file or directory");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sce_forward),       cmocka_unit_test(test_sce_gradient),
      cmocka_unit_test(test_sce_bad_count),     cmocka_unit_test(test_mll_forward),
      cmocka_unit_test(test_mll_gradient),      cmocka_unit_test(test_mll_bad_input),
      cmocka_unit_test(test_infogain_forward),  cmocka_unit_test(test_infogain_source),
      cmocka_unit_test(test_infogain_gradient), cmocka_unit_test(test_infogain_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
