/* NVCaffe's LARC, momentum_policy and weight_decay_policy in the fused GPU
 * update: the cases of nvcaffe_solver_cases.h against the reference, and
 * LARC on a weight blob of more than one tile (its norms from several
 * blocks).  FP32 math (TF32 off).  Skipped (77) without a GPU. */
#include "nvcaffe_solver_cases.h"

static int setup(void **state) {
  tu_require_gpu();
  tsf_require_layers();
  ct_log_set_level(CT_LOG_WARNING);
  return 0;
}

static void test_cases(void **state) {
  for (size_t i = 0; i < NV_NCASES; i++) nv_run(0, &g_nv_cases[i], 4, 3, 2, 6);
}

/* 100 x 200 weights: two LARC tiles, the second partial. */
static void test_larc_tiles(void **state) {
  _Static_assert(100 * 200 > CT_UPDATE_LARC_TILE && 100 * 200 < 2 * CT_UPDATE_LARC_TILE,
                 "two tiles");
  nv_run(0, &g_nv_cases[0], 4, 200, 100, 3);
  nv_run(0, &g_nv_cases[1], 4, 200, 100, 3);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  /* float32 math against a double reference: TF32 products would differ by 1e-3 */
  setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_cases), cmocka_unit_test(test_larc_tiles)};
  return cmocka_run_group_tests(tests, setup, NULL);
}
