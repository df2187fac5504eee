/* Cortado's implicit-GEMM convolution kernels (layers/conv_igemm.h), forced
 * in every direction they can run (CT_IGEMM_FORCE): forward, backward data
 * and backward filter against the CPU in strict FP32, and through the
 * gradient checker, on the vision tests' 2-D group-1 cases and on shapes
 * that reach the kernels' edges (partial tiles in every dimension, a
 * reduction length that is not a multiple of the step, several channel
 * tiles, split filter-gradient sums, stride 2, dilation, rectangles); the
 * layer must say that it runs them.  Deconvolution and groups stay on
 * cuDNN.  Exits 77 (skipped) without a GPU. */
#include <stdio.h>

#include "cudnntest.h"
#include "layers/conv_common.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/conv_cudnn.h"
#include "layers/conv_igemm.h"
#endif
#include "vision_cases.h"

#define TOL 1e-4

#ifdef CORTADO_HAVE_CUDA
/* Whether each direction's description names the kernels, as expected. */
static void expect_igemm(const conv_param *st, const char *shape, bool fwd, bool data,
                         bool filter) {
  tu_layer_case lc;
  cd_gpu_case(&lc, &st->lp, CT_PHASE_TRAIN, shape, 1, false, false);
  char buf[256];
  ct_conv_cudnn_describe(lc.l, buf, sizeof buf);
  const char *d = strstr(buf, "bwd-data"), *f = strstr(buf, "bwd-filter");
  assert_non_null(d);
  assert_non_null(f);
  const bool has[3] = {strstr(buf, "IGEMM") != NULL && strstr(buf, "IGEMM") < d,
                       strstr(d, "IGEMM") != NULL && strstr(d, "IGEMM") < f,
                       strstr(f, "IGEMM") != NULL};
  const bool want[3] = {fwd, data, filter};
  for (int i = 0; i < 3; i++)
    if (has[i] != want[i]) fail_msg("%s %s: '%s', direction %d", st->lp.type, shape, buf, i);
  printf("%-8s %-14s %s\n", st->lp.type, shape, buf);
  tu_layer_case_free(&lc);
}

static void check(const conv_cfg *c, bool gradient) {
  conv_param st;
  conv_make_param(&st, c, "Convolution");
  const int nsp = c->nsp;
  const bool unit_stride = c->s[3 - nsp + 0] == 1 && c->s[2] == 1;
  expect_igemm(&st, c->shape, true, unit_stride, true);
  cd_compare3(&st.lp, CT_PHASE_TRAIN, c->shape, 1, CD_CUDNN, false, TOL, NULL);
  if (gradient) {
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    cd_gradient(&st.lp, CT_PHASE_TRAIN, c->shape, CD_CUDNN, &o, NULL);
  }
}

/* The vision tests' 2-D and 1-D cases with one group. */
static void test_vision_cases(void **state) {
  const size_t n = sizeof k_conv_cases / sizeof k_conv_cases[0];
  int ran = 0;
  for (size_t i = 0; i < n; i++) {
    const conv_cfg *c = &k_conv_cases[i];
    if (c->group != 1 || c->nsp > 2) continue;
    check(c, true);
    ran++;
  }
  assert_true(ran >= 4);
}

/* Shapes at the kernels' edges (see the top of the file). */
static void test_edges(void **state) {
  const conv_cfg cases[] = {
      /* cifar10_quick's 5x5 pad 2, small */
      {"5x5 pad 2", "3,5,12,10", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, 1, 12, true},
      /* 70 outputs: two tiles of 64 rows; K = 180 */
      {"70 outputs", "2,20,6,5", 1, 2, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1, 70, true},
      /* 25600 columns: the filter gradient's sum split among blocks */
      {"split sums", "64,3,20,20", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, 1, 8, true},
      /* stride 2, a rectangular kernel, unequal pads: backward data stays on cuDNN */
      {"stride 2", "3,4,11,9", 1, 2, {1, 4, 3}, {1, 2, 1}, {0, 1, 2}, {1, 1, 1}, 1, 5, true,
       false, true},
      /* dilation with a rectangle, no bias */
      {"dilated", "2,3,8,13", 1, 2, {1, 3, 5}, {1, 1, 1}, {0, 0, 2}, {1, 2, 1}, 1, 6, false},
      /* cifar10_quick's conv2 at batch 10 */
      {"cifar conv2", "10,32,16,16", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, 1, 32,
       true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check(&cases[i], i == 0 || i == 3 || i == 4);
}

/* Deconvolution and groups stay on cuDNN whatever the mode. */
static void test_not_for_others(void **state) {
  conv_cfg c = k_conv_cases[0];
  conv_param st;
  conv_make_param(&st, &c, "Deconvolution");
  expect_igemm(&st, c.shape, false, false, false);
  conv_cfg g = k_conv_cases[1];
  conv_make_param(&st, &g, "Convolution");
  expect_igemm(&st, g.shape, false, false, false);
}

/* The ReLU fused into the forward's epilogue (net_fuse.c's absorb): the
 * layer's top is max(conv + bias, 0) on the GPU. */
static void test_fused_relu(void **state) {
  conv_cfg c = {"fused", "4,6,9,9", 1, 2, {1, 5, 5}, {1, 1, 1}, {0, 2, 2}, {1, 1, 1}, 1, 10, true};
  conv_param st;
  conv_make_param(&st, &c, "Convolution");
  tu_layer_case cpu, gpu;
  tu_layer_case_init(&cpu, &st.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, c.shape, 1);
  cd_gpu_case(&gpu, &st.lp, CT_PHASE_TRAIN, c.shape, 1, false, false);
  assert_true(ct_conv_cudnn_absorb_relu(gpu.l));
  ct_tensor_copy_data(gpu.bottom[0], cpu.bottom[0]);
  for (int i = 0; i < cpu.l->nparams; i++) ct_tensor_copy_data(gpu.l->params[i], cpu.l->params[i]);
  tu_forward(&cpu);
  tu_forward(&gpu);
  const size_t n = cpu.top[0]->count;
  float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
  ct_tensor_download(cpu.top[0], want);
  ct_tensor_download(gpu.top[0], got);
  size_t negative = 0;
  for (size_t i = 0; i < n; i++) {
    const float r = want[i] > 0.0f ? want[i] : 0.0f;
    negative += want[i] < 0.0f;
    if (fabsf(got[i] - r) > TOL * (1.0f + fabsf(r)))
      fail_msg("fused ReLU value %zu: %g, want %g", i, got[i], r);
  }
  assert_true(negative > 0);
  free(want);
  free(got);
  tu_layer_case_free(&cpu);
  tu_layer_case_free(&gpu);
}
#endif

int main(void) {
  tu_require_gpu();
#ifdef CORTADO_HAVE_CUDA
  ct_igemm_set_mode(CT_IGEMM_FORCE);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vision_cases),
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_not_for_others),
      cmocka_unit_test(test_fused_relu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
#else
  return 77;
#endif
}
