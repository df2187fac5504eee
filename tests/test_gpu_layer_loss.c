/* The loss group on GPU 0: forward and backward against the CPU for each
 * layer and setting, finite-difference gradients on the GPU, and the
 * bad-label errors of the GPU forwards.  Skipped (77) without a GPU. */
#include "losstest.h"

/* What the prepare callbacks put in the special bottoms. */
static int g_nclass;

static void prep_labels(tu_layer_case *c) { free(lt_set_labels(c->bottom[1], g_nclass, 44)); }

/* Labels with every third one set to the ignore label used here (1). */
static void prep_labels_some_ignored(tu_layer_case *c) {
  float *v = lt_set_labels(c->bottom[1], g_nclass, 45);
  for (size_t i = 0; i < c->bottom[1]->count; i += 3) v[i] = 1.0f;
  tu_set_values(c->bottom[1], v);
  free(v);
}

static void prep_targets(tu_layer_case *c) {
  float *v = malloc(c->bottom[1]->count * sizeof(float));
  tu_fill_uniform(v, c->bottom[1]->count, 0.0f, 1.0f, 46);
  for (size_t i = 0; i < c->bottom[1]->count; i += 4) v[i] = -1.0f; /* the ignore label */
  tu_set_values(c->bottom[1], v);
  free(v);
}

static void prep_similarity(tu_layer_case *c) {
  float v[8] = {1, 0, 0, 1, 0, 1, 0, 0};
  tu_fill(c->bottom[0], -0.5f, 0.5f, 91);
  tu_fill(c->bottom[1], -0.5f, 0.5f, 92);
  tu_set_values(c->bottom[2], v);
}

/* Scores away from the hinge's kinks at +-1, and labels. */
static void prep_hinge(tu_layer_case *c) {
  float *v = malloc(c->bottom[0]->count * sizeof(float));
  tu_fill_uniform(v, c->bottom[0]->count, -3.0f, 3.0f, 101);
  for (size_t i = 0; i < c->bottom[0]->count; i++)
    if (fabsf(fabsf(v[i]) - 1.0f) < 0.05f) v[i] += v[i] > 0 ? 0.1f : -0.1f;
  tu_set_values(c->bottom[0], v);
  free(v);
  prep_labels(c);
}

/* Rows of positive probabilities (6 x 5), and labels. */
static void prep_probs(tu_layer_case *c) {
  float v[30];
  tu_fill_uniform(v, 30, 0.1f, 1.0f, 71);
  for (int n = 0; n < 6; n++) {
    float s = 0;
    for (int k = 0; k < 5; k++) s += v[n * 5 + k];
    for (int k = 0; k < 5; k++) v[n * 5 + k] /= s;
  }
  tu_set_values(c->bottom[0], v);
  prep_labels(c);
}

static void prep_infogain(tu_layer_case *c) {
  prep_labels_some_ignored(c);
  tu_fill(c->bottom[2], 0.1f, 2.0f, 83);
}

/* CPU against GPU, then the gradient on the GPU (bottom 0, and bottom 1 when
 * it is not a label). */
static void check(const Caffe__LayerParameter *p, const char *shapes, int ntop,
                  void (*prepare)(tu_layer_case *c), float step, float threshold, float kink,
                  float kink_range) {
  tu_compare_cpu_gpu(p, CT_PHASE_TRAIN, shapes, ntop, 1e-4, prepare);
  tu_layer_case c;
  tu_layer_case_init(&c, p, 0, CT_PHASE_TRAIN, shapes, 1);
  if (prepare) prepare(&c);
  if (c.l->ops->backward_gpu) {
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.step = step;
    o.threshold = threshold;
    o.kink = kink;
    o.kink_range = kink_range;
    for (int b = 0; b < c.nb && b < 8; b++)
      o.skip_bottom[b] = (c.l->ops->no_force_backward_bottoms >> b) & 1u;
    tu_check_gradient(&c, &o);
  }
  tu_layer_case_free(&c);
}

static void test_gpu_softmax(void **state) {
  const struct { const char *shape; int axis; } cases[] = {{"2,10,2,3", 1}, {"3,4", -1}, {"3,2,4,5", 0}};
  for (int t = 0; t < 3; t++) {
    lt_param lp;
    lt_param_init(&lp, "softmax", "Softmax");
    lp.softmax.has_axis = 1;
    lp.softmax.axis = cases[t].axis;
    lp.p.softmax_param = &lp.softmax;
    check(&lp.p, cases[t].shape, 1, NULL, 1e-2f, 1e-3f, 0, -1);
  }
}

static void test_gpu_softmax_loss(void **state) {
  lt_param lp;
  g_nclass = 5;
  lt_softmax_loss_param(&lp, INT32_MIN, false, -1, false, 1);
  check(&lp.p, "2,5,2,3; 2,1,2,3", 2, prep_labels, 1e-2f, 1e-2f, 0, -1);
  for (int mode = 0; mode <= 3; mode++) {
    lt_softmax_loss_param(&lp, INT32_MIN, true, mode, false, 1);
    check(&lp.p, "2,5,2,3; 2,1,2,3", 2, prep_labels_some_ignored, 1e-2f, 1e-2f, 0, -1);
  }
  lt_softmax_loss_param(&lp, INT32_MIN, false, -1, false, 1);
  lp.softmax.has_axis = 1;
  lp.softmax.axis = 2;
  lp.p.softmax_param = &lp.softmax;
  g_nclass = 4;
  check(&lp.p, "2,3,4; 2,3", 1, prep_labels, 1e-2f, 1e-2f, 0, -1);
}

static void test_gpu_sigmoid_cross_entropy(void **state) {
  lt_param lp;
  lt_param_init(&lp, "sce", "SigmoidCrossEntropyLoss");
  check(&lp.p, "4,3,2; 4,6", 1, prep_targets, 1e-2f, 1e-2f, 0, -1);
  lp.p.loss_param = &lp.loss;
  lp.loss.has_ignore_label = 1;
  lp.loss.ignore_label = -1;
  check(&lp.p, "4,3,2; 4,6", 1, prep_targets, 1e-2f, 1e-2f, 0, -1);
}

static void test_gpu_euclidean(void **state) {
  lt_param lp;
  lt_param_init(&lp, "euclid", "EuclideanLoss");
  check(&lp.p, "4,5; 4,5", 1, NULL, 1e-2f, 1e-2f, 0, -1);
}

static void test_gpu_contrastive(void **state) {
  for (int legacy = 0; legacy < 2; legacy++) {
    lt_param lp;
    lt_param_init(&lp, "contrastive", "ContrastiveLoss");
    lp.contrastive.has_legacy_version = 1;
    lp.contrastive.legacy_version = legacy;
    lp.p.contrastive_loss_param = &lp.contrastive;
    check(&lp.p, "8,5,1,1; 8,5,1,1; 8,1,1,1", 1, prep_similarity, 1e-2f, 1e-2f, 0, -1);
  }
}

static void test_gpu_hinge(void **state) {
  g_nclass = 5;
  for (int norm = 1; norm <= 2; norm++) {
    lt_param lp;
    lt_param_init(&lp, "hinge", "HingeLoss");
    lp.hinge.has_norm = 1;
    lp.hinge.norm = norm;
    lp.p.hinge_loss_param = &lp.hinge;
    check(&lp.p, "6,5; 6", 1, prep_hinge, 1e-2f, norm == 1 ? 2e-3f : 1e-2f, norm == 1 ? 1.0f : 0.0f,
          0.01f);
  }
}

static void test_gpu_infogain(void **state) {
  lt_param lp;
  lt_param_init(&lp, "infogain", "InfogainLoss");
  lp.infogain.has_axis = 1;
  lp.infogain.axis = 2;
  lp.p.infogain_loss_param = &lp.infogain;
  lp.p.loss_param = &lp.loss;
  lp.loss.has_ignore_label = 1;
  lp.loss.ignore_label = 1;
  g_nclass = 5;
  check(&lp.p, "4,2,5,2; 4,2,1,2; 1,1,5,5", 2, prep_infogain, 1e-3f, 2e-2f, 0, -1);
}

static void test_gpu_multinomial(void **state) {
  lt_param lp;
  lt_param_init(&lp, "mll", "MultinomialLogisticLoss");
  g_nclass = 5;
  check(&lp.p, "6,5; 6", 1, prep_probs, 1e-2f, 2e-2f, 0.0f, 0.05f);
}

static void test_gpu_accuracy(void **state) {
  for (unsigned k = 1; k <= 2; k++) {
    lt_param lp;
    lt_param_init(&lp, "acc", "Accuracy");
    lp.accuracy.has_top_k = 1;
    lp.accuracy.top_k = k;
    lp.accuracy.has_ignore_label = k == 2;
    lp.accuracy.ignore_label = 1;
    lp.p.accuracy_param = &lp.accuracy;
    g_nclass = 6;
    tu_compare_cpu_gpu(&lp.p, CT_PHASE_TEST, "12,6; 12", 2, 1e-4, prep_labels_some_ignored);
    g_nclass = 4;
    tu_compare_cpu_gpu(&lp.p, CT_PHASE_TEST, "3,4,2,2; 3,2,2", 2, 1e-4, prep_labels);
  }
}

static void test_gpu_argmax(void **state) {
  const struct {
    const char *shape;
    unsigned k;
    bool out_max_val, has_axis;
    int axis;
  } cases[] = {{"4,10", 1, false, false, 0}, {"4,10", 3, true, false, 0},
               {"2,5,3", 2, false, true, 1}, {"2,5,3", 2, true, true, 1},
               {"6,4", 4, true, true, 0}};
  for (int t = 0; t < 5; t++) {
    lt_param lp;
    lt_param_init(&lp, "argmax", "ArgMax");
    lp.argmax.has_top_k = 1;
    lp.argmax.top_k = cases[t].k;
    lp.argmax.has_out_max_val = 1;
    lp.argmax.out_max_val = cases[t].out_max_val;
    lp.argmax.has_axis = cases[t].has_axis;
    lp.argmax.axis = cases[t].axis;
    lp.p.argmax_param = &lp.argmax;
    tu_compare_cpu_gpu(&lp.p, CT_PHASE_TEST, cases[t].shape, 1, 1e-4, NULL);
  }
}

/* The GPU forwards flag bad labels and report them as the CPU does. */
static void expect_bad_label(lt_param *lp, const char *shapes, const float *labels,
                             const char *msg) {
  tu_layer_case c;
  tu_layer_case_init(&c, &lp->p, 0, CT_PHASE_TRAIN, shapes, 1);
  tu_set_values(c.bottom[1], labels);
  ct_error err;
  assert_int_equal(ct_layer_forward(c.l, c.bottom, c.top, NULL, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

static void test_gpu_bad_labels(void **state) {
  const float labels[4] = {0, 4, 1, 5};
  lt_param lp;
  lt_softmax_loss_param(&lp, INT32_MIN, false, -1, false, 1);
  expect_bad_label(&lp, "4,5; 4", labels,
                   "layer 'loss' (SoftmaxWithLoss): label 5 at index 3 is out of range [0, 5)");
  lt_param_init(&lp, "acc", "Accuracy");
  expect_bad_label(&lp, "4,5; 4", labels,
                   "layer 'acc' (Accuracy): label 5 at index 3 is out of range [0, 5)");
  lt_param_init(&lp, "hinge", "HingeLoss");
  expect_bad_label(&lp, "4,5; 4", labels,
                   "layer 'hinge' (HingeLoss): label 5 at index 3 is out of range [0, 5)");
  lt_param_init(&lp, "mll", "MultinomialLogisticLoss");
  expect_bad_label(&lp, "4,5; 4", labels,
                   "layer 'mll' (MultinomialLogisticLoss): label 5 at index 3 is out of range [0, 5)");
  lt_param_init(&lp, "infogain", "InfogainLoss");
  expect_bad_label(&lp, "4,5; 4; 5,5", labels,
                   "layer 'infogain' (InfogainLoss): label 5 at index 3 is out of range [0, 5)");
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_softmax),       cmocka_unit_test(test_gpu_softmax_loss),
      cmocka_unit_test(test_gpu_sigmoid_cross_entropy), cmocka_unit_test(test_gpu_euclidean),
      cmocka_unit_test(test_gpu_contrastive),   cmocka_unit_test(test_gpu_hinge),
      cmocka_unit_test(test_gpu_infogain),      cmocka_unit_test(test_gpu_multinomial),
      cmocka_unit_test(test_gpu_accuracy),      cmocka_unit_test(test_gpu_argmax),
      cmocka_unit_test(test_gpu_bad_labels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
