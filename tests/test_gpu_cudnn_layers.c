/* Pooling, LRN, Softmax, ReLU, Sigmoid, TanH and BatchNorm on cuDNN: the
 * cuDNN engine and the CAFFE engine against the CPU, which engine each
 * setting gets (cuDNN only where it computes exactly what Caffe does), the
 * gradient checker on the cuDNN engine, in place, and BatchNorm's running
 * statistics.  Exits 77 (skipped) without a GPU. */
#include <stdio.h>

#include "cudnntest.h"
#include "neurontest.h"
#include "vision_cases.h"

#define TOL 1e-5      /* pooling and ReLU: the same arithmetic as the CPU */
#define MATH_TOL 1e-4 /* exp, pow, rsqrt and float statistics in another order */

static void distinct_inputs(tu_layer_case *c) { distinct_values(c->bottom[0]); }
static void wide_inputs(tu_layer_case *c) { tu_fill(c->bottom[0], -2.0f, 2.0f, 12); }

/* ---------------------------------------------------------------- Pooling */

/* Whether cuDNN's rounded-down output size is Caffe's for this case. */
static bool pool_sizes_agree(const pool_cfg *c) {
  int n, ch, h, w;
  assert_int_equal(sscanf(c->shape, "%d,%d,%d,%d", &n, &ch, &h, &w), 4);
  int kh = c->global ? h : c->kh, kw = c->global ? w : c->kw;
  return (h + 2 * c->ph - kh) / c->sh + 1 == c->out_h &&
         (w + 2 * c->pw - kw) / c->sw + 1 == c->out_w;
}

/* Settings whose output sizes agree, as in the usual nets. */
static const pool_cfg k_cudnn_pools[] = {
    {"max 2x2 s2", "2,3,6,8", MAX, 2, 2, 2, 2, 0, 0, false, false, 3, 4},
    {"max 3x3 s1 pad 1", "2,3,5,6", MAX, 3, 3, 1, 1, 1, 1, false, false, 5, 6},
    {"max 3x3 s2 odd", "2,3,7,9", MAX, 3, 3, 2, 2, 0, 0, false, false, 3, 4},
    {"max rect floor", "2,2,7,6", MAX, 3, 2, 2, 1, 1, 0, false, true, 4, 5},
    {"ave 3x3 s1 pad 1", "2,3,5,6", AVE, 3, 3, 1, 1, 1, 1, false, false, 5, 6},
    {"ave 2x2 s2 pad 1", "2,2,6,6", AVE, 2, 2, 2, 2, 1, 1, false, false, 4, 4},
    {"ave 7x7 s1", "2,4,7,7", AVE, 7, 7, 1, 1, 0, 0, false, false, 1, 1},
};

static void check_pool(const pool_cfg *c) {
  pool_param st;
  pool_make_param(&st, c);
  const int expect = c->method != STO && pool_sizes_agree(c) ? CD_CUDNN : CD_CAFFE;
  void (*prep)(tu_layer_case *) = c->method == MAX ? distinct_inputs : NULL;
  cd_compare3(&st.lp, CT_PHASE_TRAIN, c->shape, 1, expect, false, TOL, prep);
  /* The argmax as a second top is the CAFFE engine's alone. */
  if (c->method == MAX)
    cd_compare3(&st.lp, CT_PHASE_TRAIN, c->shape, 2, CD_CAFFE, false, TOL, prep);
  ct_gradcheck_opts o = ct_gradcheck_defaults();
  o.threshold = 1e-2f;
  if (c->method == MAX) o.step = 1e-4f;
  cd_gradient(&st.lp, CT_PHASE_TRAIN, c->shape, expect, &o, prep);
}

static void test_pooling(void **state) {
  for (size_t i = 0; i < sizeof k_pool_cases / sizeof k_pool_cases[0]; i++)
    check_pool(&k_pool_cases[i]);
  for (size_t i = 0; i < sizeof k_cudnn_pools / sizeof k_cudnn_pools[0]; i++) {
    assert_true(pool_sizes_agree(&k_cudnn_pools[i]));
    check_pool(&k_cudnn_pools[i]);
  }
  /* engine: CAFFE keeps the own kernels even where cuDNN would agree. */
  pool_param st;
  pool_make_param(&st, &k_cudnn_pools[0]);
  st.pp.has_engine = 1;
  st.pp.engine = CAFFE__POOLING_PARAMETER__ENGINE__CAFFE;
  cd_compare3(&st.lp, CT_PHASE_TRAIN, k_cudnn_pools[0].shape, 1, CD_CAFFE, false, TOL,
              distinct_inputs);
}

/* ---------------------------------------------------------------- LRN */

static void test_lrn(void **state) {
  for (size_t i = 0; i < sizeof k_lrn / sizeof k_lrn[0]; i++) {
    lrn_param st;
    make_lrn(&st, &k_lrn[i]);
    const int expect = k_lrn[i].within ? CD_CAFFE : CD_CUDNN;
    cd_compare3(&st.lp, CT_PHASE_TRAIN, "2,6,5,4", 1, expect, false, MATH_TOL, wide_inputs);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.threshold = 1e-2f;
    cd_gradient(&st.lp, CT_PHASE_TRAIN, "2,6,5,4", expect, &o, wide_inputs);
  }
  /* A window wider than cuDNN's 16 channels, asked for with engine CUDNN. */
  lrn_cfg wide = {false, 17, 0.5f, 0.75f, 2.0f};
  lrn_param st;
  make_lrn(&st, &wide);
  st.rp.has_engine = 1;
  st.rp.engine = CAFFE__LRNPARAMETER__ENGINE__CUDNN;
  cd_compare3(&st.lp, CT_PHASE_TRAIN, "2,20,3,3", 1, CD_CAFFE, false, MATH_TOL, wide_inputs);
}

/* ---------------------------------------------------------------- Softmax */

static void test_softmax(void **state) {
  const struct {
    const char *shape;
    int axis;
  } cases[] = {{"2,5,3,4", 1}, {"6,10", 1}, {"2,3,4,5", 2}, {"2,3,4,5", -1}, {"3,1000", 1}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    Caffe__LayerParameter p = nt_layer("prob", "Softmax");
    Caffe__SoftmaxParameter sp = CAFFE__SOFTMAX_PARAMETER__INIT;
    sp.has_axis = 1;
    sp.axis = cases[i].axis;
    p.softmax_param = &sp;
    cd_compare3(&p, CT_PHASE_TRAIN, cases[i].shape, 1, CD_CUDNN, false, MATH_TOL, wide_inputs);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    cd_gradient(&p, CT_PHASE_TRAIN, cases[i].shape, CD_CUDNN, &o, NULL);
  }
  Caffe__LayerParameter p = nt_layer("prob", "Softmax");
  cd_in_place(&p, CT_PHASE_TRAIN, "2,5,3,4", CD_CAFFE, MATH_TOL, wide_inputs);
}

/* ---------------------------------------------------------------- activations */

static void test_activations(void **state) {
  Caffe__LayerParameter p = nt_layer("relu", "ReLU");
  cd_compare3(&p, CT_PHASE_TRAIN, "2,3,4,5", 1, CD_CUDNN, false, TOL, NULL);
  ct_gradcheck_opts kinked = nt_opts(1e-2f, 1e-3f, 0.0f, 0.01f);
  cd_gradient(&p, CT_PHASE_TRAIN, "2,3,4,5", CD_CUDNN, &kinked, NULL);
  cd_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", CD_CUDNN, TOL, NULL);
  Caffe__ReLUParameter rp = CAFFE__RE_LUPARAMETER__INIT;
  p.relu_param = &rp;
  rp.has_engine = 1;
  rp.engine = CAFFE__RE_LUPARAMETER__ENGINE__CAFFE;
  cd_compare3(&p, CT_PHASE_TRAIN, "2,3,4,5", 1, CD_CAFFE, false, TOL, NULL);
  /* Leaky ReLU: cuDNN has none, so the CAFFE engine even when CUDNN is asked. */
  rp.engine = CAFFE__RE_LUPARAMETER__ENGINE__CUDNN;
  rp.has_negative_slope = 1;
  rp.negative_slope = 0.1f;
  cd_compare3(&p, CT_PHASE_TRAIN, "2,3,4,5", 1, CD_CAFFE, false, TOL, NULL);
  cd_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", CD_CAFFE, TOL, NULL);

  const char *types[] = {"Sigmoid", "TanH"};
  for (int k = 0; k < 2; k++) {
    p = nt_layer("act", types[k]);
    cd_compare3(&p, CT_PHASE_TRAIN, "2,3,4,5", 1, CD_CUDNN, false, MATH_TOL, wide_inputs);
    cd_in_place(&p, CT_PHASE_TRAIN, "2,3,4,5", CD_CUDNN, MATH_TOL, wide_inputs);
    ct_gradcheck_opts o = nt_opts(1e-2f, 1e-3f, 0.0f, -1.0f);
    cd_gradient(&p, CT_PHASE_TRAIN, "2,3,4,5", CD_CUDNN, &o, wide_inputs);
  }
}

/* ---------------------------------------------------------------- BatchNorm */

static void stored_stats(tu_layer_case *c) {
  const float ms[3] = {0.4f, -0.2f, 1.0f}, vs[3] = {2.0f, 0.5f, 1.2f}, factor = 2.5f;
  tu_set_values(c->l->params[0], ms);
  tu_set_values(c->l->params[1], vs);
  tu_set_values(c->l->params[2], &factor);
}

static void shifted_inputs(tu_layer_case *c) { tu_fill(c->bottom[0], -1.0f, 3.0f, 21); }

static void test_batch_norm(void **state) {
  Caffe__LayerParameter p = nt_layer("bn", "BatchNorm");
  /* Training: batch statistics, the blobs after one batch, the gradient. */
  cd_compare3(&p, CT_PHASE_TRAIN, "5,3,4,6", 1, CD_CUDNN, false, MATH_TOL, shifted_inputs);
  cd_compare3(&p, CT_PHASE_TRAIN, "6,3", 1, CD_CUDNN, false, MATH_TOL, shifted_inputs);
  cd_in_place(&p, CT_PHASE_TRAIN, "5,3,4,6", CD_CUDNN, MATH_TOL, shifted_inputs);
  ct_gradcheck_opts o = nt_opts(1e-2f, 5e-4f, 0.0f, -1.0f);
  o.check_params = false;
  cd_gradient(&p, CT_PHASE_TRAIN, "5,2,3,4", CD_CUDNN, &o, NULL);
  /* Testing: the stored statistics (sums over the factor). */
  cd_compare3(&p, CT_PHASE_TEST, "2,3,4,5", 1, CD_CUDNN, false, MATH_TOL, stored_stats);
  cd_in_place(&p, CT_PHASE_TEST, "2,3,4,5", CD_CUDNN, MATH_TOL, stored_stats);
  cd_gradient(&p, CT_PHASE_TEST, "2,3,4,5", CD_CUDNN, &o, stored_stats);
  /* One value per channel has no unbiased variance: the CAFFE engine. */
  cd_compare3(&p, CT_PHASE_TRAIN, "1,3", 1, CD_CAFFE, false, MATH_TOL, NULL);

  /* The three Caffe blobs after two training batches, as on the CPU. */
  Caffe__BatchNormParameter bp = CAFFE__BATCH_NORM_PARAMETER__INIT;
  bp.has_moving_average_fraction = 1;
  bp.moving_average_fraction = 0.9f;
  p.batch_norm_param = &bp;
  tu_layer_case cpu, gpu;
  tu_layer_case_init(&cpu, &p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,3,5,5", 1);
  cd_gpu_case(&gpu, &p, CT_PHASE_TRAIN, "4,3,5,5", 1, false, false);
  cd_expect_engine(gpu.l, CD_CUDNN, "running statistics");
  for (int pass = 0; pass < 2; pass++) {
    tu_fill(cpu.bottom[0], -1.0f + pass, 2.0f + 3 * pass, 40 + (uint64_t)pass);
    ct_tensor_copy_data(gpu.bottom[0], cpu.bottom[0]);
    tu_forward(&cpu);
    tu_forward(&gpu);
  }
  for (int i = 0; i < 3; i++) {
    char what[64];
    snprintf(what, sizeof what, "BatchNorm blob %d after two batches", i);
    cd_expect_close(what, gpu.l->params[i], cpu.l->params[i], false, MATH_TOL);
  }
  float factor;
  ct_tensor_download(gpu.l->params[2], &factor);
  assert_true(fabsf(factor - 1.9f) < 1e-6f);
  tu_layer_case_free(&cpu);
  tu_layer_case_free(&gpu);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pooling),     cmocka_unit_test(test_lrn),
      cmocka_unit_test(test_softmax),     cmocka_unit_test(test_activations),
      cmocka_unit_test(test_batch_norm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
