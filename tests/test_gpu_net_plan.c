/* Blob values in the lifetime-planned pool on GPU 0 (net_memory.c): the
 * nets of plan_nets.h in float32, bfloat16 and float16 give the same
 * losses and bit-identical gradients with the pool poisoned where arrays
 * end as with every value kept (within 1e-5 in float32, the same bits in
 * 16 bits; the fused layers of the 16-bit
 * channels-last path included: Convolution + ReLU, BatchNorm + Scale +
 * ReLU, a SUM over its bottom, Pooling + ReLU), also run as the runtime's
 * program of CUDA graph replays; and the pool is smaller than an array per
 * blob.  Both nets take the same cuDNN algorithms (CORTADO_CUDNN_ALGOS,
 * deterministic ones).  Skipped (77) without a GPU. */
#include "plan_nets.h"
#include "runtime/runtime.h"

static void gpu_context(ct_context *ctx, uint64_t seed, ct_dtype precision) {
  rn_gpu_context(ctx, seed);
  ct_error err;
  if (precision != CT_F32) assert_int_equal(ct_context_set_precision(ctx, precision, true, &err), CT_OK);
}

static void check_all(ct_dtype precision) {
  const char *texts[] = {rn_plan_net, rn_split_net, pn_residual_net, pn_inception_net, NULL};
  const int classes[] = {5, 4, 5, 6, 10};
  char *lenet = rn_lenet_text(8, true);
  texts[4] = lenet;
  for (int k = 0; k < 5; k++) {
    size_t pool = 0, unplanned = 0;
    /* float32 may differ in the last bit between two builds (a library's
     * choice that the algorithm file does not pin); 16 bits give the same */
    pn_compare(texts[k], classes[k], gpu_context, precision, precision == CT_F32 ? 1e-5 : 0, &pool,
               &unplanned);
    if (k >= 2) assert_true(pool < unplanned);
  }
  free(lenet);
}

static void test_poisoned_f32(void **state) { check_all(CT_F32); }
static void test_poisoned_bf16(void **state) { check_all(CT_BF16); }
static void test_poisoned_f16(void **state) { check_all(CT_F16); }

/* The runtime's program (CUDA graph replays, the poisoning captured with
 * the layers) against plain passes of a net that keeps every value. */
static void test_poisoned_program(void **state) {
  ct_context ca, cb;
  gpu_context(&ca, 9, CT_BF16);
  gpu_context(&cb, 9, CT_BF16);
  ct_net *planned, *kept;
  pn_pair(pn_residual_net, &ca, &cb, &planned, &kept);
  ct_runtime *rt;
  assert_int_equal(ct_runtime_new(&rt, planned, NULL, NULL), CT_OK);
  ct_error err;
  for (int it = 0; it < 4; it++) {
    rn_fill_inputs(planned, 5, 70 + (uint64_t)it);
    rn_fill_inputs(kept, 5, 70 + (uint64_t)it);
    double la, lb;
    assert_int_equal(rt_iteration(rt, &la, &err), CT_OK);
    ct_net_clear_param_diffs(kept);
    assert_int_equal(ct_net_forward(kept, &lb, &err), CT_OK);
    ct_net_backward(kept);
    if (!(la == lb)) fail_msg("iteration %d: loss %.9g from the program, %.9g kept", it, la, lb);
    float *ga = rn_flat(planned, true), *gb = rn_flat(kept, true);
    assert_memory_equal(ga, gb, planned->flat_count * sizeof(float));
    free(ga);
    free(gb);
  }
  ct_program_stats st;
  ct_runtime_stats(rt, &st);
  if (ct_program_graphs_allowed()) assert_true(st.replaying);
  ct_runtime_free(rt);
  ct_net_free(planned);
  ct_net_free(kept);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

static int setup(void **state) {
  char path[4200];
  snprintf(path, sizeof path, "%s/algos.txt", tu_tmpdir("test_gpu_net_plan"));
  setenv("CORTADO_CUDNN_ALGOS", path, 1);
  setenv("CORTADO_DETERMINISTIC", "1", 1);
  setenv("CORTADO_OWN_CONV", "0", 1);
  return rn_setup(state);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_poisoned_f32),  cmocka_unit_test(test_poisoned_bf16),
      cmocka_unit_test(test_poisoned_f16),  cmocka_unit_test(test_poisoned_program),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
