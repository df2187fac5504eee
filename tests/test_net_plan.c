/* Blob values in the lifetime-planned pool, on the CPU (net_memory.c): the
 * steps each value group lives, nets that give the same losses and
 * gradients with the pool poisoned where arrays end as with every value
 * kept (plan_nets.h), in float32 and bfloat16, and a build that releases
 * values as it goes. */
#include "core/cpu.h"
#include "plan_nets.h"

static const ct_value_group *vgroup_of(const ct_net *net, const char *blob) {
  const ct_blob_plan *plan = net->blob_plan;
  int g = plan->blob_vgroup[rn_blob_index(net, blob)];
  if (g < 0) fail_msg("blob %s has no value group", blob);
  return &plan->vgroups[g];
}

static void expect_values(const ct_net *net, const char *blob, ct_value_kind kind, int first, int last) {
  const ct_value_group *v = vgroup_of(net, blob);
  if (v->kind != kind || (kind == CT_VALUE_POOLED && (v->first != first || v->last != last)))
    fail_msg("blob %s: kind %d steps [%d, %d], expected kind %d [%d, %d]", blob, (int)v->kind, v->first,
             v->last, (int)kind, first, last);
}

/* rn_plan_net after Split insertion: 0 data, 1 label split, 2 conv1,
 * 3 relu1, 4 pool1, 5 flat, 6 ip1, 7 ip1 split, 8 loss, 9 acc; layer L's
 * forward is step L, its backward step 19 - L. */
static void test_value_steps(void **state) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 5, NULL), CT_OK);
  ct_net *net = rn_net(rn_plan_net, &ctx, false);
  assert_true(net->plan_values);
  /* inputs and outputs keep their own storage */
  expect_values(net, "data", CT_VALUE_OWN, 0, 0);
  expect_values(net, "label", CT_VALUE_OWN, 0, 0);
  expect_values(net, "label_data_1_split_0", CT_VALUE_OWN, 0, 0);
  expect_values(net, "loss", CT_VALUE_OWN, 0, 0);
  expect_values(net, "acc", CT_VALUE_OWN, 0, 0);
  assert_true(ct_net_blob(net, "data")->owns_data);
  /* conv1 and its in-place ReLU: written at 2, read by relu1 and pool1's
   * forwards, and by relu1's backward (16; conv1's reads its bottom, the
   * host's MAX pooling its argmax) */
  expect_values(net, "conv1", CT_VALUE_POOLED, 2, 16);
  /* pool1 and its Flatten view: written at 4, read by flat (a view; its
   * backward, 14) and ip1 (forward 6, backward 13) */
  expect_values(net, "pool1", CT_VALUE_POOLED, 4, 14);
  assert_ptr_equal(vgroup_of(net, "pool1"), vgroup_of(net, "flat"));
  /* ip1 and its Split views: read by the loss's backward (11); ip1's
   * backward reads no top, the accuracy has none */
  expect_values(net, "ip1", CT_VALUE_POOLED, 6, 11);
  assert_ptr_equal(vgroup_of(net, "ip1"), vgroup_of(net, "ip1_ip1_0_split_1"));
  /* live together: apart in the pool; the views point into their owner */
  const ct_value_group *c = vgroup_of(net, "conv1"), *p = vgroup_of(net, "pool1");
  assert_true(c->offset + c->count <= p->offset || p->offset + p->count <= c->offset);
  assert_ptr_equal(ct_net_blob(net, "conv1")->data, net->blob_pool + c->offset);
  assert_ptr_equal(ct_net_blob(net, "flat")->data, ct_net_blob(net, "pool1")->data);
  assert_false(ct_net_blob(net, "pool1")->owns_data);
  ct_net_free(net);
  ct_context_free(&ctx);
}

static void cpu_context(ct_context *ctx, uint64_t seed, ct_dtype precision) {
  ct_error err;
  assert_int_equal(ct_context_init(ctx, CT_DEVICE_CPU, seed, &err), CT_OK);
  if (precision != CT_F32) assert_int_equal(ct_context_set_precision(ctx, precision, true, &err), CT_OK);
}

static void check_net(const char *text, int nclass, ct_dtype precision) {
  size_t pool = 0, unplanned = 0;
  pn_compare(text, nclass, cpu_context, precision, 0, &pool, &unplanned);
  assert_true(pool < unplanned);
}

static void test_poisoned_f32(void **state) {
  check_net(rn_plan_net, 5, CT_F32);
  char *lenet = rn_lenet_text(4, true);
  check_net(lenet, 10, CT_F32);
  free(lenet);
  check_net(rn_split_net, 4, CT_F32);
  check_net(pn_residual_net, 5, CT_F32);
  check_net(pn_inception_net, 6, CT_F32);
}

static void test_poisoned_bf16(void **state) {
  if (!ct_cpu_has_bf16()) skip();
  check_net(pn_residual_net, 5, CT_BF16);
  check_net(pn_inception_net, 6, CT_BF16);
}

/* A chain of 30 Power layers, each with a new 512 KB top (15 MB of values
 * in all), then a global pooling, an InnerProduct and a loss. */
static char *chain_net(void) {
  size_t cap = 16384, n = 0;
  char *t = malloc(cap);
  n += (size_t)snprintf(t + n, cap - n,
                        "name: 'chain'\n"
                        "layer { name: 'data' type: 'Input' top: 'data' top: 'label'\n"
                        "  input_param { shape { dim: 8 dim: 16 dim: 32 dim: 32 } shape { dim: 8 } } }\n");
  for (int i = 0; i < 30; i++) {
    char bottom[16] = "data";
    if (i) snprintf(bottom, sizeof bottom, "p%d", i - 1);
    n += (size_t)snprintf(t + n, cap - n,
                          "layer { name: 'p%d' type: 'Power' bottom: '%s' top: 'p%d'\n"
                          "  power_param { scale: 1.01 shift: 0.001 } }\n",
                          i, bottom, i);
  }
  n += (size_t)snprintf(t + n, cap - n,
                        "layer { name: 'pool' type: 'Pooling' bottom: 'p29' top: 'pool'\n"
                        "  pooling_param { pool: AVE global_pooling: true } }\n"
                        "layer { name: 'ip' type: 'InnerProduct' bottom: 'pool' top: 'ip'\n"
                        "  inner_product_param { num_output: 5 weight_filler { type: 'xavier' } } }\n"
                        "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' "
                        "top: 'loss' }\n");
  return t;
}

/* The most host memory a build of text holds beyond what was held before. */
static size_t build_peak(const char *text, bool plan_values) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 5, NULL), CT_OK);
  if (!plan_values) setenv("CORTADO_VALUE_PLANNING", "0", 1);
  size_t before, peak;
  ct_mem_host_stats(&before, NULL);
  ct_mem_host_reset_peak();
  ct_net *net = rn_net(text, &ctx, false);
  ct_mem_host_stats(NULL, &peak);
  unsetenv("CORTADO_VALUE_PLANNING");
  assert_int_equal(net->plan_values, plan_values);
  ct_net_free(net);
  ct_context_free(&ctx);
  return peak - before;
}

/* The build lets each Power's top go once the next layers are set up: it
 * never holds more than a few of them (the plan then needs two at a time),
 * where keeping every value holds all 30. */
static void test_build_releases(void **state) {
  char *text = chain_net();
  const size_t top = (size_t)8 * 16 * 32 * 32 * sizeof(float);
  const size_t released = build_peak(text, true), kept = build_peak(text, false);
  if (!(kept >= 30 * top && released <= 8 * top))
    fail_msg("build peak %zu bytes planned, %zu kept (a top is %zu)", released, kept, top);
  pn_compare(text, 5, cpu_context, CT_F32, 0, NULL, NULL);
  free(text);
}

/* A net whose intermediate blobs a caller reads (keep_blob_diffs, pycaffe's
 * and cortado.h's nets) plans nothing: every blob holds its values after
 * backward. */
static void test_kept_for_readers(void **state) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 5, NULL), CT_OK);
  ct_net *net = rn_net(rn_plan_net, &ctx, true);
  assert_false(net->plan_values);
  assert_null(net->blob_plan);
  for (int b = 0; b < net->nblobs; b++)
    if (net->blobs[b]->data) assert_true(net->blobs[b]->owns_data || net->value_owner[b] != b);
  ct_net_free(net);
  ct_context_free(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_value_steps),     cmocka_unit_test(test_poisoned_f32),
      cmocka_unit_test(test_poisoned_bf16),   cmocka_unit_test(test_build_releases),
      cmocka_unit_test(test_kept_for_readers),
  };
  return cmocka_run_group_tests(tests, rn_setup, NULL);
}
