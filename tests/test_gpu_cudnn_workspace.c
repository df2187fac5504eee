/* The cuDNN workspace limit: with CORTADO_CUDNN_WORKSPACE_MB=0 (read once,
 * before the first convolution of the process) the convolutions still run
 * on cuDNN, with algorithms that need no workspace, and the context's
 * workspace stays empty.  Exits 77 (skipped) without a GPU. */
#include <stdio.h>

#include "cudnntest.h"
#include "vision_cases.h"

#define TOL 1e-4

static void test_no_workspace(void **state) {
  const conv_cfg cases[] = {
      {"3x3", "4,16,12,12", 1, 2, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1, 16, true},
      {"5x5 s2", "2,8,15,15", 1, 2, {1, 5, 5}, {1, 2, 2}, {0, 2, 2}, {1, 1, 1}, 2, 8, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int d = 0; d < 2; d++) {
      conv_param st;
      conv_make_param(&st, &cases[i], d ? "Deconvolution" : "Convolution");
      cd_compare3(&st.lp, CT_PHASE_TRAIN, cases[i].shape, 1, CD_CUDNN, false, TOL, NULL);
      tu_layer_case c;
      cd_gpu_case(&c, &st.lp, CT_PHASE_TRAIN, cases[i].shape, 1, true, false);
      cd_expect_engine(c.l, CD_CUDNN, cases[i].name);
      assert_int_equal(c.ctx.workspace_bytes, 0);
      tu_layer_case_free(&c);
    }
#ifdef CORTADO_HAVE_CUDA
  assert_int_equal(ct_cudnn_workspace_limit(0), 0);
#endif
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  setenv("CORTADO_CUDNN_WORKSPACE_MB", "0", 1);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_workspace)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
