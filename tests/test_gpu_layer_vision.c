/* The vision layers on GPU 0: every setting of the host tests compared with
 * the host (forward, bottom and parameter gradients) and gradient-checked on
 * the device, in FP32 (TF32 off), on the CAFFE engine.  Exits 77 (skipped)
 * without a GPU. */
#include <stdio.h>

#include "gpu/cudnn_util.h"
#include "layers/conv/conv_common.h"
#include "vision_cases.h"

/* Weight gradients sum thousands of products, in another order on each
 * device (cuBLAS against the host's GEMM): 1.1e-4 was seen on an H100. */
#define REL_TOL 3e-4

static void gpu_gradient(const Caffe__LayerParameter *p, ct_phase phase, const char *shape,
                         int ntop, const ct_gradcheck_opts *o, void (*prepare)(tu_layer_case *)) {
  tu_layer_case c;
  tu_layer_case_init(&c, p, 0, phase, shape, ntop);
  if (prepare) prepare(&c);
  tu_check_gradient(&c, o);
  tu_layer_case_free(&c);
}

static void positive_inputs(tu_layer_case *c) { tu_fill(c->bottom[0], 0.1f, 1.0f, 31); }
static void distinct_inputs(tu_layer_case *c) { distinct_values(c->bottom[0]); }
static void wide_inputs(tu_layer_case *c) { tu_fill(c->bottom[0], -2.0f, 2.0f, 12); }

/* The CAFFE engine on both devices: the GPU's im2col + GEMM kernels against
 * the host's im2col + GEMM reference (the host's oneDNN engine sums in
 * another order; test_layer_vision_conv_engines checks it). */
static void caffe_engine(conv_param *st) {
  st->cp.has_engine = 1;
  st->cp.engine = CAFFE__CONVOLUTION_PARAMETER__ENGINE__CAFFE;
}

static void test_conv_deconv(void **state) {
  const size_t n = sizeof k_conv_cases / sizeof k_conv_cases[0];
  for (int d = 0; d < 2; d++)
    for (size_t i = 0; i < n; i++) {
      const conv_cfg *c = &k_conv_cases[i];
      conv_param st;
      conv_make_param(&st, c, d ? "Deconvolution" : "Convolution");
      caffe_engine(&st);
      tu_compare_cpu_gpu(&st.lp, CT_PHASE_TRAIN, c->shape, 1, REL_TOL, NULL);
      ct_gradcheck_opts o = ct_gradcheck_defaults();
      gpu_gradient(&st.lp, CT_PHASE_TRAIN, c->shape, 1, &o, NULL);
    }
}

/* Several chunks per batch (2, 2, 1 images), so the GPU permutes run, and
 * two bottoms sharing the weights. */
static void test_conv_chunks_and_two_bottoms(void **state) {
  const int which[] = {0, 1, 3, 7};
  for (int d = 0; d < 2; d++)
    for (size_t j = 0; j < sizeof which / sizeof which[0]; j++) {
      conv_cfg c = k_conv_cases[which[j]];
      char shape[64], two[140];
      snprintf(shape, sizeof shape, "5%s", strchr(c.shape, ','));
      snprintf(two, sizeof two, "%s;%s", shape, shape);
      conv_param st;
      conv_make_param(&st, &c, d ? "Deconvolution" : "Convolution");
      caffe_engine(&st);
      tu_layer_case lc;
      tu_layer_case_init(&lc, &st.lp, 0, CT_PHASE_TRAIN, shape, 1);
      ct_conv *cv = lc.l->priv;
      size_t per = ((size_t)cv->group * cv->kernel_dim + cv->y_channels) * cv->y_spatial * 4;
      tu_layer_case_free(&lc);
      ct_conv_set_chunk_bytes(2 * per + per / 2);
      tu_layer_case_init(&lc, &st.lp, 0, CT_PHASE_TRAIN, shape, 1);
      assert_int_equal(((ct_conv *)lc.l->priv)->chunk, 2);
      tu_layer_case_free(&lc);
      tu_compare_cpu_gpu(&st.lp, CT_PHASE_TRAIN, shape, 1, REL_TOL, NULL);
      tu_compare_cpu_gpu(&st.lp, CT_PHASE_TRAIN, two, 2, REL_TOL, NULL);
      ct_gradcheck_opts o = ct_gradcheck_defaults();
      gpu_gradient(&st.lp, CT_PHASE_TRAIN, shape, 1, &o, NULL);
      ct_conv_set_chunk_bytes(0);
    }
}

static void test_pooling(void **state) {
  const size_t n = sizeof k_pool_cases / sizeof k_pool_cases[0];
  for (size_t i = 0; i < n; i++) {
    const pool_cfg *c = &k_pool_cases[i];
    pool_param st;
    pool_make_param(&st, c);
    tu_compare_cpu_gpu(&st.lp, CT_PHASE_TRAIN, c->shape, 1, REL_TOL, NULL);
    if (c->method == MAX) tu_compare_cpu_gpu(&st.lp, CT_PHASE_TRAIN, c->shape, 2, REL_TOL, NULL);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.threshold = 1e-2f;
    if (c->method == MAX) o.step = 1e-4f;
    gpu_gradient(&st.lp, CT_PHASE_TRAIN, c->shape, 1, &o, c->method == MAX ? distinct_inputs : NULL);
    /* engine CAFFE: Cortado's kernels where cuDNN would pool (a second
     * batch of 70 planes, so that a plane's values cross thread blocks) */
    st.pp.has_engine = 1;
    st.pp.engine = CAFFE__POOLING_PARAMETER__ENGINE__CAFFE;
    tu_compare_cpu_gpu(&st.lp, CT_PHASE_TRAIN, c->shape, 1, REL_TOL, NULL);
    char big[32];
    snprintf(big, sizeof big, "7,10%s", strchr(strchr(c->shape, ',') + 1, ','));
    tu_compare_cpu_gpu(&st.lp, CT_PHASE_TRAIN, big, 1, REL_TOL, NULL);
    gpu_gradient(&st.lp, CT_PHASE_TRAIN, c->shape, 1, &o, c->method == MAX ? distinct_inputs : NULL);
  }
  /* STOCHASTIC: the same draws on both devices give the same picks. */
  pool_cfg sto = {"sto", "2,3,6,5", STO, 3, 3, 2, 2, 0, 0, false, false, 3, 2};
  pool_param st;
  pool_make_param(&st, &sto);
  for (int phase = 0; phase < 2; phase++) {
    ct_phase ph = phase ? CT_PHASE_TEST : CT_PHASE_TRAIN;
    tu_compare_cpu_gpu(&st.lp, ph, sto.shape, 1, REL_TOL, positive_inputs);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.step = 1e-4f;
    o.threshold = 1e-2f;
    gpu_gradient(&st.lp, ph, sto.shape, 1, &o, positive_inputs);
  }
}

static void test_spp(void **state) {
  for (int m = 0; m < 2; m++)
    for (int height = 1; height <= 3; height++) {
      Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
      Caffe__SPPParameter sp = CAFFE__SPPPARAMETER__INIT;
      lp.name = "spp";
      lp.type = "SPP";
      lp.spp_param = &sp;
      sp.has_pyramid_height = sp.has_pool = 1;
      sp.pyramid_height = (uint32_t)height;
      sp.pool = m ? CAFFE__SPPPARAMETER__POOL_METHOD__AVE : CAFFE__SPPPARAMETER__POOL_METHOD__MAX;
      tu_compare_cpu_gpu(&lp, CT_PHASE_TRAIN, "2,3,8,6", 1, REL_TOL, NULL);
      ct_gradcheck_opts o = ct_gradcheck_defaults();
      o.threshold = 1e-2f;
      if (!m) o.step = 1e-4f;
      gpu_gradient(&lp, CT_PHASE_TRAIN, "2,3,8,6", 1, &o, m ? NULL : distinct_inputs);
    }
}

static void test_inner_product(void **state) {
  for (size_t i = 0; i < sizeof k_ip / sizeof k_ip[0]; i++) {
    ip_param st;
    make_ip(&st, &k_ip[i]);
    tu_compare_cpu_gpu(&st.lp, CT_PHASE_TRAIN, k_ip[i].shape, 1, REL_TOL, NULL);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    gpu_gradient(&st.lp, CT_PHASE_TRAIN, k_ip[i].shape, 1, &o, NULL);
  }
}

static void test_lrn(void **state) {
  for (size_t i = 0; i < sizeof k_lrn / sizeof k_lrn[0]; i++) {
    lrn_param st;
    make_lrn(&st, &k_lrn[i]);
    tu_compare_cpu_gpu(&st.lp, CT_PHASE_TRAIN, "2,6,5,4", 1, REL_TOL, wide_inputs);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.threshold = 1e-2f;
    gpu_gradient(&st.lp, CT_PHASE_TRAIN, "2,6,5,4", 1, &o, wide_inputs);
  }
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  /* Contexts default to TF32 GEMMs (10-bit mantissas, ~1e-3 relative);
   * these comparisons are for the FP32 arithmetic, so turn TF32 off in
   * cuBLAS before anything loads it. */
  setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
  tu_require_gpu();
  /* These are the CAFFE engine's kernels; test_gpu_cudnn_*.c compare the
   * cuDNN engine (whose FFT and Winograd convolutions round differently). */
  ct_cudnn_set_enabled(false);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_deconv), cmocka_unit_test(test_conv_chunks_and_two_bottoms),
      cmocka_unit_test(test_pooling),     cmocka_unit_test(test_spp),
      cmocka_unit_test(test_inner_product),
      cmocka_unit_test(test_lrn),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
