/* Convolution and Deconvolution on cuDNN: every setting of the vision tests
 * on the cuDNN engine and the CAFFE engine against the CPU in strict FP32
 * (ct_context_set_tf32(false), which must keep cuDNN off the tensor cores
 * by itself), the gradient checker on the cuDNN engine, the engine field,
 * the table of benchmarked algorithms, and TF32 at a looser tolerance.
 * Exits 77 (skipped) without a GPU. */
#include <stdio.h>

#include "cudnntest.h"
#include "layers/conv/conv_algos.h"
#include "layers/conv/conv_common.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/conv/conv_cudnn.h"
#endif
#include "vision_cases.h"

#define TOL 1e-4      /* strict FP32 (cuDNN may still choose FFT or Winograd) */
#define TF32_TOL 3e-3 /* TF32 rounds the inputs to 10-bit mantissas */

static void set_engine(conv_param *st, int engine) {
  st->cp.has_engine = 1;
  st->cp.engine = (Caffe__ConvolutionParameter__Engine)engine;
}

static void test_conv_cases(void **state) {
  const size_t n = sizeof k_conv_cases / sizeof k_conv_cases[0];
  for (int d = 0; d < 2; d++)
    for (size_t i = 0; i < n; i++) {
      const conv_cfg *c = &k_conv_cases[i];
      conv_param st;
      conv_make_param(&st, c, d ? "Deconvolution" : "Convolution");
      cd_compare3(&st.lp, CT_PHASE_TRAIN, c->shape, 1, CD_CUDNN, false, TOL, NULL);
      /* linear in bottom and weights: a longer step is as exact and shrinks
       * the forward's rounding (a Winograd one's, when the race picks it)
       * in the difference (test_gpu_conv_igemm.c) */
      ct_gradcheck_opts o = ct_gradcheck_defaults();
      o.step = 1e-1f;
      cd_gradient(&st.lp, CT_PHASE_TRAIN, c->shape, CD_CUDNN, &o, NULL);
    }
}

/* A batch of 5 and two bottoms sharing the weights (their weight and bias
 * gradients add up). */
static void test_conv_batch_and_two_bottoms(void **state) {
  const int which[] = {0, 1, 3, 7};
  for (int d = 0; d < 2; d++)
    for (size_t j = 0; j < sizeof which / sizeof which[0]; j++) {
      conv_cfg c = k_conv_cases[which[j]];
      char shape[64], two[140];
      snprintf(shape, sizeof shape, "5%s", strchr(c.shape, ','));
      snprintf(two, sizeof two, "%s;%s", shape, shape);
      conv_param st;
      conv_make_param(&st, &c, d ? "Deconvolution" : "Convolution");
      cd_compare3(&st.lp, CT_PHASE_TRAIN, shape, 1, CD_CUDNN, false, TOL, NULL);
      cd_compare3(&st.lp, CT_PHASE_TRAIN, two, 2, CD_CUDNN, false, TOL, NULL);
    }
}

/* engine: CAFFE keeps Cortado's kernels; CUDNN on a convolution cuDNN cannot
 * run (4 spatial axes) falls back to them with a warning. */
static void test_engine_field(void **state) {
  conv_cfg c = k_conv_cases[0];
  conv_param st;
  conv_make_param(&st, &c, "Convolution");
  set_engine(&st, CT_ENGINE_CAFFE);
  cd_compare3(&st.lp, CT_PHASE_TRAIN, c.shape, 1, CD_CAFFE, false, TOL, NULL);
  set_engine(&st, CT_ENGINE_CUDNN);
  cd_compare3(&st.lp, CT_PHASE_TRAIN, c.shape, 1, CD_CUDNN, false, TOL, NULL);

  conv_cfg four = {"4-d", "2,2,3,4,3,4", 1, 3, {2, 2, 2}, {1, 1, 1}, {0, 1, 0}, {1, 1, 1},
                   1, 2, true};
  conv_make_param(&st, &four, "Convolution");
  uint32_t k4[4] = {2, 2, 2, 2};
  st.cp.n_kernel_size = 4;
  st.cp.kernel_size = k4;
  st.cp.n_stride = st.cp.n_pad = st.cp.n_dilation = 0;
  set_engine(&st, CT_ENGINE_CUDNN);
  cd_compare3(&st.lp, CT_PHASE_TRAIN, four.shape, 1, CD_CAFFE, false, TOL, NULL);

  /* The CAFFE engine's im2col scratch is dropped while cuDNN runs. */
  conv_make_param(&st, &c, "Convolution");
  tu_layer_case lc;
  cd_gpu_case(&lc, &st.lp, CT_PHASE_TRAIN, c.shape, 1, false, false);
  cd_expect_engine(lc.l, CD_CUDNN, "default engine");
  assert_int_equal(((ct_conv *)lc.l->priv)->col->capacity, 0);
#ifdef CORTADO_HAVE_CUDA
  char buf[256];
  ct_conv_cudnn_describe(lc.l, buf, sizeof buf);
  assert_true(strncmp(buf, "fwd ", 4) == 0);
#endif
  tu_layer_case_free(&lc);
}

#ifdef CORTADO_HAVE_CUDA
/* One benchmark per shape and math mode in the process: a second layer of
 * the same shape reuses the first one's algorithms.  A case is set up in
 * TF32 (the context's default) and then reshaped in strict FP32, so the
 * first one makes both entries. */
static void test_algorithm_table(void **state) {
  conv_cfg c = {"table", "3,5,11,9", 1, 2, {1, 3, 3}, {1, 1, 2}, {0, 1, 0}, {1, 1, 1}, 1, 7, true};
  conv_param st;
  conv_make_param(&st, &c, "Convolution");
  size_t n0 = ct_cudnn_conv_table_size();
  tu_layer_case a, b, t;
  cd_gpu_case(&a, &st.lp, CT_PHASE_TRAIN, c.shape, 1, false, false);
  assert_int_equal(ct_cudnn_conv_table_size(), n0 + 2);
  cd_gpu_case(&b, &st.lp, CT_PHASE_TRAIN, c.shape, 1, false, false);
  cd_gpu_case(&t, &st.lp, CT_PHASE_TRAIN, c.shape, 1, true, false);
  assert_int_equal(ct_cudnn_conv_table_size(), n0 + 2);
  /* Another batch size is another shape. */
  tu_layer_case d;
  cd_gpu_case(&d, &st.lp, CT_PHASE_TRAIN, "4,5,11,9", 1, true, false);
  assert_int_equal(ct_cudnn_conv_table_size(), n0 + 3);
  tu_layer_case_free(&d);
  char da[256], db[256];
  ct_conv_cudnn_describe(a.l, da, sizeof da);
  ct_conv_cudnn_describe(b.l, db, sizeof db);
  assert_string_equal(da, db);
  /* Strict FP32 allows no tensor-op math (no '*' in the description). */
  assert_null(strchr(da, '*'));
  tu_layer_case_free(&a);
  tu_layer_case_free(&b);
  tu_layer_case_free(&t);
}
#endif

/* TF32 (the default math): only a looser tolerance, on shapes large enough
 * for tensor-core kernels. */
static void test_tf32(void **state) {
  const conv_cfg cases[] = {
      {"tf32 3x3", "4,32,14,14", 1, 2, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1, 64, true},
      {"tf32 1x1", "4,64,14,14", 1, 2, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1, 32, true},
      {"tf32 group", "4,32,9,9", 1, 2, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {1, 1, 1}, 4, 32, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int d = 0; d < 2; d++) {
      conv_param st;
      conv_make_param(&st, &cases[i], d ? "Deconvolution" : "Convolution");
      st.wf.std = 0.05f;
      cd_compare3(&st.lp, CT_PHASE_TRAIN, cases[i].shape, 1, CD_CUDNN, true, TF32_TOL, NULL);
    }
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  /* cuDNN's own algorithms: Cortado's kernels (raced by default) have
   * test_gpu_conv_igemm */
  setenv("CORTADO_OWN_CONV", "0", 1);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_cases),
      cmocka_unit_test(test_conv_batch_and_two_bottoms),
      cmocka_unit_test(test_engine_field),
#ifdef CORTADO_HAVE_CUDA
      cmocka_unit_test(test_algorithm_table),
#endif
      cmocka_unit_test(test_tf32),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
