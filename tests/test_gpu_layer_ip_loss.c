/* The GPU paths of a classifier's tail on GPU 0, against the CPU layers:
 *  - InnerProduct through cuBLASLt plans (forward GEMM + bias epilogue,
 *    weight and bottom gradients): strict FP32 within 1e-5 of the CPU, with
 *    and without bias, transposed weights, other axes, weight and bias
 *    gradients accumulated over two backward passes; TF32 within 1e-2; a
 *    math change after planning falling back to cuBLAS; the gradient
 *    checker on the device;
 *  - SoftmaxWithLoss's one-kernel forward: every normalisation mode, the
 *    ignore label, a loss weight, the probability top, labels all ignored,
 *    against the CPU and against the three-kernel path, the same bits on
 *    two runs, a bad label, and the gradient checker.
 * Errors are relative to the largest reference value.  Skipped (77)
 * without a GPU. */
#include <string.h>

#include "cudnntest.h"
#include "losstest.h"
#include "vision_cases.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/inner_product.h"
#include "layers/softmax_loss.h"
#endif

/* Strict FP32: different summation orders of at most ~1000 terms. */
#define FP32_TOL 1e-5
/* TF32 rounds the GEMM inputs to 10-bit mantissas. */
#define TF32_TOL 1e-2

/* Forward, then `passes` backward passes into zeroed parameter diffs, of
 * the GPU case g and the CPU case c on the same bottoms, parameters and
 * top diffs (loss tops keep their loss weight); tops, bottom diffs and
 * parameter diffs must agree within tol. */
static void run_and_compare(const char *name, tu_layer_case *g, tu_layer_case *c, int passes,
                            double tol) {
  for (int i = 0; i < c->nb; i++) ct_tensor_copy_data(g->bottom[i], c->bottom[i]);
  for (int i = 0; i < c->l->nparams; i++) ct_tensor_copy_data(g->l->params[i], c->l->params[i]);
  tu_forward(c);
  tu_forward(g);
  char what[160];
  for (int i = 0; i < c->nt; i++) {
    snprintf(what, sizeof what, "%s: top %d", name, i);
    cd_expect_close(what, g->top[i], c->top[i], false, tol);
    if (c->l->loss_weight[i] != 0.0f) continue;
    float *h = malloc(c->top[i]->count * sizeof(float) + 1);
    tu_fill_uniform(h, c->top[i]->count, -1.0f, 1.0f, 900 + (uint64_t)i);
    ct_tensor_upload_diff(c->top[i], h);
    ct_tensor_upload_diff(g->top[i], h);
    free(h);
  }
  bool prop[TU_MAX_BLOBS];
  for (int i = 0; i < c->nb; i++) prop[i] = !(c->l->ops->no_force_backward_bottoms & (1u << i));
  for (int i = 0; i < c->l->nparams; i++) {
    ct_tensor_zero_diff(c->l->params[i]);
    ct_tensor_zero_diff(g->l->params[i]);
  }
  for (int k = 0; k < passes; k++) {
    ct_layer_backward(c->l, c->top, prop, c->bottom);
    ct_layer_backward(g->l, g->top, prop, g->bottom);
  }
  for (int i = 0; i < c->nb; i++) {
    if (!prop[i]) continue;
    snprintf(what, sizeof what, "%s: bottom %d diff", name, i);
    cd_expect_close(what, g->bottom[i], c->bottom[i], true, tol);
  }
  for (int i = 0; i < c->l->nparams; i++) {
    snprintf(what, sizeof what, "%s: param %d diff after %d passes", name, i, passes);
    cd_expect_close(what, g->l->params[i], c->l->params[i], true, tol);
  }
}

/* ---------------------------------------------------------------- InnerProduct */
typedef struct {
  const char *name;
  ip_cfg cfg;
  int lt; /* GEMMs that must run through cuBLASLt, or -1 (not checked) */
} ip_case;

static const ip_case k_ip_cases[] = {
    /* forward (100x64x1024) in one kernel (math/gemm_short.h); both gradients */
    {"cifar ip1", {"100,64,4,4", 1, 64, true, false, 100, 1024}, 2},
    {"cifar ip2", {"100,64", 1, 10, true, false, 100, 64}, -1},
    {"transposed, no bias", {"100,64", 1, 10, false, true, 100, 64}, -1},
    {"transposed", {"7,3,4,5", 1, 6, true, true, 7, 60}, -1},
    {"axis 2, no bias", {"2,3,4,5", 2, 4, false, false, 6, 20}, -1},
    {"axis -1, transposed", {"2,3,4,5", -1, 3, true, true, 24, 5}, -1},
    {"1200 rows", {"1200,16", 1, 8, true, false, 1200, 16}, -1},
    /* the same kernel with a reduction no multiple of 4 (one value at a time)
     * and rows and columns that fill no 4 x 4 block, no bias */
    {"short, odd", {"13,1030", 1, 7, false, false, 13, 1030}, -1},
};

/* GPU against CPU with the math given; the cuBLASLt products in use are
 * counted after backward (so a refused run shows). */
static void ip_compare(const ip_case *t, bool tf32, double tol) {
  ip_param st;
  make_ip(&st, &t->cfg);
  tu_layer_case c, g;
  tu_layer_case_init(&c, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, t->cfg.shape, 1);
  cd_gpu_case(&g, &st.lp, CT_PHASE_TRAIN, t->cfg.shape, 1, tf32, false);
  char name[160];
  snprintf(name, sizeof name, "%s (%s)", t->name, tf32 ? "TF32" : "FP32");
  run_and_compare(name, &g, &c, 2, tol);
#ifdef CORTADO_HAVE_CUDA
  int lt = ct_ip_gpu_lt_products(g.l);
  print_message("%s: %d of 3 products through cuBLASLt\n", name, lt);
  if (t->lt >= 0) assert_int_equal(lt, t->lt);
#endif
  tu_layer_case_free(&c);
  tu_layer_case_free(&g);
}

static void test_ip_fp32(void **state) {
  for (size_t i = 0; i < sizeof k_ip_cases / sizeof k_ip_cases[0]; i++)
    ip_compare(&k_ip_cases[i], false, FP32_TOL);
}

static void test_ip_tf32(void **state) {
  ip_compare(&k_ip_cases[0], true, TF32_TOL);
  ip_compare(&k_ip_cases[3], true, TF32_TOL);
}

/* Plans made for TF32, then the context switched to FP32 without a
 * reshape: the layer must notice and run cuBLAS in strict FP32. */
static void test_ip_math_change(void **state) {
  const ip_case *t = &k_ip_cases[0];
  ip_param st;
  make_ip(&st, &t->cfg);
  tu_layer_case c, g;
  tu_layer_case_init(&c, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, t->cfg.shape, 1);
  cd_gpu_case(&g, &st.lp, CT_PHASE_TRAIN, t->cfg.shape, 1, true, false);
  ct_context_set_tf32(&g.ctx, false);
  run_and_compare("TF32 plans, FP32 context", &g, &c, 1, FP32_TOL);
  tu_layer_case_free(&c);
  tu_layer_case_free(&g);
}

static void test_ip_gradient(void **state) {
  const int which[] = {3, 4, 5};
  for (size_t i = 0; i < sizeof which / sizeof which[0]; i++) {
    const ip_case *t = &k_ip_cases[which[i]];
    ip_param st;
    make_ip(&st, &t->cfg);
    tu_layer_case g;
    cd_gpu_case(&g, &st.lp, CT_PHASE_TRAIN, t->cfg.shape, 1, false, false);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    tu_check_gradient(&g, &o);
    tu_layer_case_free(&g);
  }
}

/* ---------------------------------------------------------------- SoftmaxWithLoss */
static int g_nclass;
static float g_ignore_every; /* every n-th label set to the ignore label (1); 0: none */

static void prep_labels(tu_layer_case *c) {
  float *v = lt_set_labels(c->bottom[1], g_nclass, 47);
  if (g_ignore_every > 0)
    for (size_t i = 0; i < c->bottom[1]->count; i += (size_t)g_ignore_every) v[i] = 1.0f;
  tu_set_values(c->bottom[1], v);
  free(v);
}

static void prep_all_ignored(tu_layer_case *c) {
  float *v = malloc(c->bottom[1]->count * sizeof(float) + 1);
  for (size_t i = 0; i < c->bottom[1]->count; i++) v[i] = 1.0f;
  tu_set_values(c->bottom[1], v);
  free(v);
}

typedef struct {
  const char *shapes;
  int axis, nclass;
  size_t outer, inner;
} swl_shape;

static const swl_shape k_swl[] = {
    {"100,10; 100", INT32_MIN, 10, 100, 1},         /* cifar10_quick */
    {"2,5,2,3; 2,1,2,3", INT32_MIN, 5, 2, 6},        /* positions inside the blob */
    {"3,4; 3", INT32_MIN, 4, 3, 1},
    {"2,3,4; 2,3", 2, 4, 6, 1},                      /* class axis 2 */
    {"4,37,3; 4,3", 1, 37, 4, 3},                    /* more classes than a warp */
    {"700,3; 700", INT32_MIN, 3, 700, 1},            /* one lane per position */
};

static void swl_compare(const lt_param *lp, const swl_shape *s, int ntop, const char *name,
                        void (*prepare)(tu_layer_case *)) {
  tu_layer_case c, g;
  g_nclass = s->nclass;
  tu_layer_case_init(&c, &lp->p, CT_DEVICE_CPU, CT_PHASE_TRAIN, s->shapes, ntop);
  tu_layer_case_init(&g, &lp->p, 0, CT_PHASE_TRAIN, s->shapes, ntop);
  prepare(&c);
  run_and_compare(name, &g, &c, 1, FP32_TOL);
  tu_layer_case_free(&c);
  tu_layer_case_free(&g);
}

static void test_swl_fused_against_cpu(void **state) {
  for (size_t i = 0; i < sizeof k_swl / sizeof k_swl[0]; i++) {
    const swl_shape *s = &k_swl[i];
#ifdef CORTADO_HAVE_CUDA
    assert_true(ct_softmax_loss_fused_fits(s->outer, s->nclass, s->inner));
#endif
    for (int mode = -1; mode <= 3; mode++)
      for (int variant = 0; variant < 2; variant++) {
        const bool ignore = variant == 1, weighted = variant == 1;
        const int ntop = variant == 1 ? 2 : 1;
        lt_param lp;
        lt_softmax_loss_param(&lp, s->axis, ignore, mode, weighted, ntop);
        g_ignore_every = ignore ? 3.0f : 0.0f;
        char name[160];
        snprintf(name, sizeof name, "%s, normalization %d%s", s->shapes, mode,
                 ignore ? ", ignore label, loss weight 2.5, prob top" : "");
        swl_compare(&lp, s, ntop, name, prep_labels);
      }
  }
  g_ignore_every = 0;
}

static void test_swl_all_ignored(void **state) {
  for (int mode = 0; mode <= 3; mode++) {
    lt_param lp;
    lt_softmax_loss_param(&lp, INT32_MIN, true, mode, false, 1);
    swl_compare(&lp, &k_swl[0], 1, "every label ignored", prep_all_ignored);
  }
}

/* The general path still runs past the one kernel's limit. */
static void test_swl_large(void **state) {
  const swl_shape big = {"2,10,64,64; 2,1,64,64", INT32_MIN, 10, 2, 4096};
#ifdef CORTADO_HAVE_CUDA
  assert_false(ct_softmax_loss_fused_fits(big.outer, big.nclass, big.inner));
#endif
  lt_param lp;
  lt_softmax_loss_param(&lp, INT32_MIN, true, -1, true, 2);
  g_ignore_every = 5;
  swl_compare(&lp, &big, 2, "81920 values (three kernels)", prep_labels);
  g_ignore_every = 0;
}

#ifdef CORTADO_HAVE_CUDA
/* Values of a case's top t (data) or bottom 0's diff. */
static float *case_values(tu_layer_case *c, int t, bool bottom_diff) {
  if (!bottom_diff) return tu_values(c->top[t]);
  float *h = malloc(c->bottom[0]->count * sizeof(float) + 1);
  ct_tensor_download_diff(c->bottom[0], h);
  return h;
}
#endif

/* One kernel against three on the same GPU, and two runs of the one
 * kernel bit for bit. */
static void test_swl_fused_against_general(void **state) {
#ifdef CORTADO_HAVE_CUDA
  const swl_shape *s = &k_swl[1];
  lt_param lp;
  lt_softmax_loss_param(&lp, s->axis, true, CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__VALID, true,
                        2);
  g_nclass = s->nclass;
  g_ignore_every = 4;
  float *out[3][3];
  const bool prop[2] = {true, false};
  for (int run = 0; run < 3; run++) {
    ct_softmax_loss_set_fused_max(run == 2 ? 0 : CT_SOFTMAX_LOSS_FUSED_MAX);
    tu_layer_case g;
    tu_layer_case_init(&g, &lp.p, 0, CT_PHASE_TRAIN, s->shapes, 2);
    prep_labels(&g);
    tu_forward(&g);
    ct_layer_backward(g.l, g.top, prop, g.bottom);
    for (int k = 0; k < 3; k++) out[run][k] = case_values(&g, k < 2 ? k : 0, k == 2);
    tu_layer_case_free(&g);
  }
  ct_softmax_loss_set_fused_max(CT_SOFTMAX_LOSS_FUSED_MAX);
  g_ignore_every = 0;
  const size_t n[3] = {1, 2 * 5 * 6, 2 * 5 * 6};
  const char *what[3] = {"loss", "probabilities", "bottom diff"};
  for (int k = 0; k < 3; k++) {
    if (memcmp(out[0][k], out[1][k], n[k] * sizeof(float)) != 0)
      fail_msg("one kernel, two runs: the %s differ", what[k]);
    double e = cd_err(out[0][k], out[2][k], n[k]);
    if (!(e <= 1e-6)) fail_msg("one kernel against three: %s apart by %g", what[k], e);
    for (int run = 0; run < 3; run++) free(out[run][k]);
  }
#endif
}

/* A bad label through either path gives the CPU's message. */
static void test_swl_bad_label(void **state) {
#ifdef CORTADO_HAVE_CUDA
  const float labels[4] = {0, 4, 1, 5};
  for (int general = 0; general < 2; general++) {
    ct_softmax_loss_set_fused_max(general ? 0 : CT_SOFTMAX_LOSS_FUSED_MAX);
    lt_param lp;
    lt_softmax_loss_param(&lp, INT32_MIN, true, -1, false, 1);
    tu_layer_case c;
    tu_layer_case_init(&c, &lp.p, 0, CT_PHASE_TRAIN, "4,5; 4", 1);
    tu_set_values(c.bottom[1], labels);
    ct_error err;
    assert_int_equal(ct_layer_forward(c.l, c.bottom, c.top, NULL, &err), CT_ERR_INVALID);
    assert_string_equal(err.msg,
                        "layer 'loss' (SoftmaxWithLoss): label 5 at index 3 is out of range [0, 5)");
    tu_layer_case_free(&c);
  }
  ct_softmax_loss_set_fused_max(CT_SOFTMAX_LOSS_FUSED_MAX);
#endif
}

static void test_swl_gradient(void **state) {
  const int modes[] = {CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__VALID,
                       CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__BATCH_SIZE};
  for (int m = 0; m < 2; m++) {
    lt_param lp;
    lt_softmax_loss_param(&lp, INT32_MIN, true, modes[m], true, 1);
    g_nclass = 10;
    g_ignore_every = 3;
    tu_layer_case g;
    tu_layer_case_init(&g, &lp.p, 0, CT_PHASE_TRAIN, "8,10; 8", 1);
    prep_labels(&g);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.threshold = 1e-2f;
    o.skip_bottom[1] = true;
    tu_check_gradient(&g, &o);
    tu_layer_case_free(&g);
  }
  g_ignore_every = 0;
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ip_fp32),
      cmocka_unit_test(test_ip_tf32),
      cmocka_unit_test(test_ip_math_change),
      cmocka_unit_test(test_ip_gradient),
      cmocka_unit_test(test_swl_fused_against_cpu),
      cmocka_unit_test(test_swl_all_ignored),
      cmocka_unit_test(test_swl_large),
      cmocka_unit_test(test_swl_fused_against_general),
      cmocka_unit_test(test_swl_bad_label),
      cmocka_unit_test(test_swl_gradient),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
