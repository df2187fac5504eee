/* models/nvcaffe_resnet50_fp16: the files parse with every NVCaffe field
 * either honoured or logged as ignored (the exact set), and the CPU trains
 * the net a few iterations at batch 2 on 32 x 32 dummy data. */
#include "nvcaffe_model.h"
#include "proto/catalog.h"

/* The NVCaffe fields of these files that Cortado still parses without
 * acting on, one log line each. */
static const char *const g_ignored[] = {
    "NetParameter: NVCaffe's field default_backward_type is parsed but ignored",
    "SolverParameter: NVCaffe's field solver_data_type is parsed but ignored",
};
#define NIGNORED (sizeof g_ignored / sizeof g_ignored[0])

static void test_fields(void **state) {
  const char *dir = tu_tmpdir("test_models_nvcaffe");
  char path[512];
  snprintf(path, sizeof path, "%s/log.txt", dir);
  ct_error err;
  ct_log_set_level(CT_LOG_INFO);
  assert_int_equal(ct_log_set_file(path, &err), CT_OK);
  Caffe__SolverParameter *sp = NULL;
  Caffe__NetParameter *np = NULL;
  assert_int_equal(ct_solver_param_read(tu_src(NVM_DIR "solver.prototxt"), &sp, &err), CT_OK);
  assert_int_equal(ct_net_param_read(tu_src(NVM_DIR "train_val.prototxt"), &np, &err), CT_OK);
  const int n = ct_caffe_log_ignored_fields(&np->base) + ct_caffe_log_ignored_fields(&sp->base);
  assert_int_equal(ct_log_set_file(NULL, &err), CT_OK);
  ct_log_set_level(CT_LOG_WARNING);
  assert_int_equal(n, (int)NIGNORED);
  char *log = tu_read_file(path, NULL);
  for (size_t i = 0; i < NIGNORED; i++)
    if (!strstr(log, g_ignored[i])) fail_msg("the log lacks '%s':\n%s", g_ignored[i], log);
  free(log);
  /* the fields this change honours are all there */
  assert_true(sp->larc && !strcmp(sp->larc_policy, "clip"));
  assert_string_equal(sp->momentum_policy, "poly");
  assert_string_equal(sp->weight_decay_policy, "poly");
  assert_true(sp->rampup_interval > 0 && sp->has_min_lr);
  int scale_bias = 0;
  for (size_t i = 0; i < np->n_layer; i++)
    scale_bias += np->layer[i]->batch_norm_param && np->layer[i]->batch_norm_param->scale_bias;
  assert_int_equal(scale_bias, 53);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
  protobuf_c_message_free_unpacked(&np->base, NULL);
}

static void test_train_cpu(void **state) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_solver *s = nvm_train(&ctx, 32, 2, 2);
  assert_int_equal(s->iter, 2);
  ct_solver_free(s);
  ct_context_free(&ctx);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  ct_log_set_level(CT_LOG_WARNING);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_fields), cmocka_unit_test(test_train_cpu)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
