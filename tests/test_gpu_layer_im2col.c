/* Im2col on GPU 0: every case of im2col_cases.h against the CPU (the same
 * values copied; backward sums the overlapping windows in another order,
 * hence the tolerance) and gradient-checked on the device.  Skipped (exit
 * 77) without a GPU. */
#include "im2col_cases.h"

static void test_against_cpu(void **state) {
  for (size_t i = 0; i < sizeof k_ic_cases / sizeof k_ic_cases[0]; i++) {
    ic_param p;
    ic_make(&p, &k_ic_cases[i]);
    tu_compare_cpu_gpu(&p.lp, CT_PHASE_TRAIN, k_ic_cases[i].shape, 1, 1e-5, NULL);
  }
}

static void test_gradient_on_gpu(void **state) {
  for (size_t i = 0; i < sizeof k_ic_cases / sizeof k_ic_cases[0]; i++) {
    ic_param p;
    ic_make(&p, &k_ic_cases[i]);
    tu_layer_case c;
    tu_layer_case_init(&c, &p.lp, 0, CT_PHASE_TRAIN, k_ic_cases[i].shape, 1);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
  }
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_cpu),
      cmocka_unit_test(test_gradient_on_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
