/* models/nvcaffe_resnet50_fp16 on a GPU: the net runs in float16 as its
 * default_forward_type says (convolutions, BatchNorm with its own scale and
 * bias), and trains a few iterations at batch 8 on 64 x 64 dummy data with
 * the solver's LARC and schedules.  Skipped (77) without a GPU. */
#include "nvcaffe_model.h"

static void test_train_fp16(void **state) {
  tu_require_gpu();
  ct_log_set_level(CT_LOG_WARNING);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, 0, 1, NULL), CT_OK);
  ct_solver *s = nvm_train(&ctx, 64, 8, 4);
  for (int i = 0; i < s->net->nlayers; i++) {
    const ct_layer *l = s->net->layers[i];
    if (!strcmp(l->name, "conv1") || !strcmp(l->name, "stage3_block2_b_bn"))
      if (l->dtype != CT_F16) fail_msg("layer %s computes in %s, not float16", l->name, ct_dtype_name(l->dtype));
  }
  ct_solver_free(s);
  ct_context_free(&ctx);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_train_fp16)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
