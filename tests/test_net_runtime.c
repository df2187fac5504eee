/* The device-independent parts of the GPU runtime, on the CPU: the diff
 * lifetime planner (groups, intervals, placement, and gradients equal to
 * one diff per blob; the diffs alone: the tests that place values with
 * them are in test_net_plan.c) and a net run as a step program
 * (net_exec.h). */
#include "runtime/runtime.h"
#include "runtime_nets.h"

static const ct_diff_group *group_of(const ct_net *net, const char *blob) {
  const ct_blob_plan *plan = net->blob_plan;
  assert_non_null(plan);
  int g = plan->blob_group[rn_blob_index(net, blob)];
  assert_true(g >= 0);
  return &plan->groups[g];
}

static void expect_group(const ct_net *net, const char *blob, ct_diff_kind kind, int first,
                         int last) {
  const ct_diff_group *g = group_of(net, blob);
  if (g->kind != kind || (kind != CT_DIFF_NONE && (g->first != first || g->last != last)))
    fail_msg("blob %s: kind %d interval [%d, %d], expected kind %d [%d, %d]", blob, (int)g->kind,
             g->first, g->last, (int)kind, first, last);
}

/* Nets whose diffs alone share the pool (values keep their own storage). */
static ct_net *diff_net(const char *text, ct_context *ctx) {
  setenv("CORTADO_VALUE_PLANNING", "0", 1);
  ct_net *net = rn_net(text, ctx, false);
  unsetenv("CORTADO_VALUE_PLANNING");
  assert_false(net->plan_values);
  return net;
}

/* Layers after Split insertion: 0 data, 1 label split, 2 conv1, 3 relu1,
 * 4 pool1, 5 flat, 6 ip1, 7 ip1 split, 8 loss, 9 acc; layer L is backward
 * step 19 - L. */
static void test_plan_groups(void **state) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 5, NULL), CT_OK);
  ct_net *net = diff_net(rn_plan_net, &ctx);
  assert_int_equal(net->nlayers, 10);
  assert_string_equal(net->layers[7]->ops->type, "Split");
  expect_group(net, "data", CT_DIFF_NONE, -1, -1);
  expect_group(net, "label", CT_DIFF_NONE, -1, -1);
  /* conv1 and its in-place ReLU: read by conv1 (step 17), written by relu1
   * (16) and pool1 (15) */
  expect_group(net, "conv1", CT_DIFF_POOLED, 15, 17);
  /* pool1 and its Flatten view are one group: pool1 reads (15), flat (14),
   * ip1 writes (13) */
  expect_group(net, "pool1", CT_DIFF_POOLED, 13, 15);
  assert_ptr_equal(group_of(net, "pool1"), group_of(net, "flat"));
  expect_group(net, "ip1", CT_DIFF_POOLED, 12, 13);
  expect_group(net, "ip1_ip1_0_split_0", CT_DIFF_POOLED, 11, 12);
  /* the split top that feeds the accuracy is read by the split, never written */
  expect_group(net, "ip1_ip1_0_split_1", CT_DIFF_ZERO, 12, 12);
  expect_group(net, "loss", CT_DIFF_LOSS, 11, 11);
  expect_group(net, "acc", CT_DIFF_NONE, -1, -1);
  /* First fit by size: conv1 (432 values) at 0, pool1 (108) above it, then
   * the two 20-value blobs, the earlier-starting first. */
  assert_int_equal(group_of(net, "conv1")->offset, 0);
  assert_int_equal(group_of(net, "pool1")->offset, 448);
  assert_int_equal(group_of(net, "ip1_ip1_0_split_0")->offset, 0);
  assert_int_equal(group_of(net, "ip1")->offset, 64);
  assert_int_equal(net->blob_plan->pool_count, 576);
  assert_int_equal(net->blob_plan->zero_count, 20);
  /* the tensors point where the plan says */
  assert_ptr_equal(ct_net_blob(net, "conv1")->diff, net->blob_pool);
  assert_ptr_equal(ct_net_blob(net, "flat")->diff, net->blob_pool + 448);
  assert_ptr_equal(ct_net_blob(net, "pool1")->diff, net->blob_pool + 448);
  assert_ptr_equal(ct_net_blob(net, "ip1")->diff, net->blob_pool + 64);
  assert_ptr_equal(ct_net_blob(net, "ip1_ip1_0_split_1")->diff, net->diff_zero);
  assert_null(ct_net_blob(net, "data")->diff);
  assert_float_equal(ct_f32_diff(ct_net_blob(net, "loss"))[0], 1.0f, 0);
  ct_net_free(net);
  ct_context_free(&ctx);
}

/* Pooled groups whose intervals meet never share memory. */
static void check_apart(const ct_net *net) {
  const ct_blob_plan *p = net->blob_plan;
  for (int a = 0; a < p->ngroups; a++)
    for (int b = a + 1; b < p->ngroups; b++) {
      const ct_diff_group *x = &p->groups[a], *y = &p->groups[b];
      if (x->kind != CT_DIFF_POOLED || y->kind != CT_DIFF_POOLED) continue;
      if (x->first > y->last || y->first > x->last) continue;
      bool apart = x->offset + x->count <= y->offset || y->offset + y->count <= x->offset;
      if (!apart) fail_msg("groups %d and %d are live together and overlap in the pool", a, b);
    }
}

/* ... and the pool is smaller than an array per blob. */
static void check_no_overlap(const ct_net *net) {
  check_apart(net);
  assert_true(net->blob_plan->pool_count <
              net->blob_plan->unplanned_count + net->blob_plan->values_unplanned);
}

/* The most the pooled groups hold at one step (aligned as the planner
 * aligns): no placement can use less. */
static size_t max_live(const ct_blob_plan *p, int nsteps) {
  size_t best = 0;
  for (int t = 0; t <= nsteps; t++) {
    size_t live = 0;
    for (int g = 0; g < p->ngroups; g++) {
      const ct_diff_group *d = &p->groups[g];
      if (d->kind == CT_DIFF_POOLED && d->first <= t && t <= d->last) live += (d->count + 63) / 64 * 64;
    }
    if (live > best) best = live;
  }
  return best;
}

static void test_plan_no_overlap(void **state) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 5, NULL), CT_OK);
  ct_net *a = diff_net(rn_plan_net, &ctx);
  check_no_overlap(a);
  char *lenet = rn_lenet_text(8, true);
  ct_net *b = diff_net(lenet, &ctx);
  check_no_overlap(b);
  /* LeNet is a chain: the pool is exactly the largest live set (conv1's and
   * pool1's diffs, at pool1's backward), 92160 + 23040 values at batch 8. */
  assert_true(a->blob_plan->pool_count >= max_live(a->blob_plan, 2 * a->nlayers));
  assert_int_equal(b->blob_plan->pool_count, max_live(b->blob_plan, 2 * b->nlayers));
  assert_int_equal(b->blob_plan->pool_count, 92160 + 23040);
  free(lenet);
  ct_net_free(a);
  ct_net_free(b);
  ct_context_free(&ctx);
}

/* Layers that compute their parameter gradients on the gradient stream
 * (set by hand here: the CPU has no stream): ip1 (step 13) reads its top
 * diff there until the compute stream waits for it at the end of the next
 * such layer's step, conv1's (17), so the ip1 group lives to step 17 and
 * moves off conv1's memory; conv1, the last, is joined at its own step. */
static void test_plan_grad_side(void **state) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 5, NULL), CT_OK);
  ct_net *net = diff_net(rn_plan_net, &ctx);
  assert_int_equal(net->grad_side_last, -1);
  expect_group(net, "ip1", CT_DIFF_POOLED, 12, 13);
  assert_int_equal(group_of(net, "ip1")->offset, 64);
  net->layers[2]->grad_side = net->layers[6]->grad_side = true;
  net->grad_side_last = 2;
  ct_error err;
  assert_int_equal(ct_net_plan_blobs(net, &err), CT_OK);
  expect_group(net, "ip1", CT_DIFF_POOLED, 12, 17);
  expect_group(net, "conv1", CT_DIFF_POOLED, 15, 17);
  expect_group(net, "pool1", CT_DIFF_POOLED, 13, 15);
  check_apart(net);
  assert_true(group_of(net, "ip1")->offset >= group_of(net, "conv1")->count);
  ct_net_free(net);
  ct_context_free(&ctx);
}

/* One forward and backward of the same net and inputs with planned and
 * with per-blob diffs: the same loss and bit-identical parameter gradients. */
static void compare_planned(const char *text, int nclass) {
  ct_context ca, cb;
  assert_int_equal(ct_context_init(&ca, CT_DEVICE_CPU, 9, NULL), CT_OK);
  assert_int_equal(ct_context_init(&cb, CT_DEVICE_CPU, 9, NULL), CT_OK);
  ct_net *planned = rn_net(text, &ca, false), *plain = rn_net(text, &cb, true);
  assert_non_null(planned->blob_plan);
  assert_null(plain->blob_plan);
  for (int round = 0; round < 2; round++) {
    double la, lb;
    rn_pass_pair(planned, plain, nclass, 40 + (uint64_t)round, &la, &lb);
    assert_true(la == lb);
    float *ga = rn_flat(planned, true), *gb = rn_flat(plain, true);
    assert_memory_equal(ga, gb, planned->flat_count * sizeof(float));
    bool nonzero = false;
    for (size_t i = 0; i < planned->flat_count; i++) nonzero |= ga[i] != 0.0f;
    assert_true(nonzero);
    free(ga);
    free(gb);
  }
  ct_net_free(planned);
  ct_net_free(plain);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

static void test_plan_same_gradients(void **state) {
  compare_planned(rn_plan_net, 5);
  char *lenet = rn_lenet_text(4, true);
  compare_planned(lenet, 10);
  free(lenet);
}

/* After a reshape (a larger batch) the plan is made again and still gives
 * the gradients of per-blob diffs. */
static void test_plan_after_reshape(void **state) {
  ct_context ca, cb;
  assert_int_equal(ct_context_init(&ca, CT_DEVICE_CPU, 9, NULL), CT_OK);
  assert_int_equal(ct_context_init(&cb, CT_DEVICE_CPU, 9, NULL), CT_OK);
  ct_net *planned = rn_net(rn_plan_net, &ca, false), *plain = rn_net(rn_plan_net, &cb, true);
  size_t pool_before = planned->blob_plan->pool_count;
  ct_error err;
  ct_net *nets[2] = {planned, plain};
  for (int k = 0; k < 2; k++) {
    ct_tensor_reshape4(ct_net_blob(nets[k], "data"), 7, 1, 8, 8);
    ct_tensor_reshape_or_die(ct_net_blob(nets[k], "label"), 1, (int[]){7});
    assert_int_equal(ct_net_reshape(nets[k], &err), CT_OK);
    rn_fill_inputs(nets[k], 5, 77);
    ct_net_clear_param_diffs(nets[k]);
    double loss;
    assert_int_equal(ct_net_forward(nets[k], &loss, &err), CT_OK);
    ct_net_backward(nets[k]);
  }
  assert_true(planned->blob_plan->pool_count > pool_before);
  check_no_overlap(planned);
  float *ga = rn_flat(planned, true), *gb = rn_flat(plain, true);
  assert_memory_equal(ga, gb, planned->flat_count * sizeof(float));
  free(ga);
  free(gb);
  ct_net_free(planned);
  ct_net_free(plain);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

/* With force_backward the input gradient is written by conv1 (step 17)
 * and kept to the end of the pass, so the caller can read it. */
static void test_plan_force_backward(void **state) {
  size_t n = strlen(rn_plan_net) + 64;
  char *text = malloc(n);
  snprintf(text, n, "force_backward: true\n%s", rn_plan_net);
  ct_context ca, cb;
  assert_int_equal(ct_context_init(&ca, CT_DEVICE_CPU, 9, NULL), CT_OK);
  assert_int_equal(ct_context_init(&cb, CT_DEVICE_CPU, 9, NULL), CT_OK);
  ct_net *planned = rn_net(text, &ca, false), *plain = rn_net(text, &cb, true);
  expect_group(planned, "data", CT_DIFF_POOLED, 17, 2 * planned->nlayers);
  ct_net *nets[2] = {planned, plain};
  for (int k = 0; k < 2; k++) {
    rn_fill_inputs(nets[k], 5, 3);
    double loss;
    ct_error err;
    assert_int_equal(ct_net_forward(nets[k], &loss, &err), CT_OK);
    ct_net_backward(nets[k]);
  }
  const ct_tensor *da = ct_net_blob(planned, "data"), *db = ct_net_blob(plain, "data");
  assert_memory_equal(da->diff, db->diff, da->count * sizeof(float));
  free(text);
  ct_net_free(planned);
  ct_net_free(plain);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

/* Every step kind has a name of its own (the table and the enum agree). */
static void test_step_kind_names(void **state) {
  for (int k = 0; k < CT_STEP_KINDS; k++) {
    const char *name = ct_step_kind_name((ct_step_kind)k);
    assert_string_not_equal(name, "?");
    for (int j = 0; j < k; j++) assert_string_not_equal(ct_step_kind_name((ct_step_kind)j), name);
  }
  assert_string_equal(ct_step_kind_name(CT_STEP_REDUCE), "reduce");
  assert_string_equal(ct_step_kind_name(CT_STEP_KINDS), "?");
}

/* A net run as a step program gives what ct_net_forward and
 * ct_net_backward give; on the CPU every run is plain. */
static void test_program_cpu(void **state) {
  ct_context ca, cb;
  assert_int_equal(ct_context_init(&ca, CT_DEVICE_CPU, 9, NULL), CT_OK);
  assert_int_equal(ct_context_init(&cb, CT_DEVICE_CPU, 9, NULL), CT_OK);
  char *lenet = rn_lenet_text(4, true);
  ct_net *a = rn_net(lenet, &ca, false), *b = rn_net(lenet, &cb, false);
  free(lenet);
  ct_runtime *rt;
  assert_int_equal(ct_runtime_new(&rt, a, NULL, NULL), CT_OK);
  ct_error err;
  for (int it = 0; it < 4; it++) {
    rn_fill_inputs(a, 10, 60 + (uint64_t)it);
    rn_fill_inputs(b, 10, 60 + (uint64_t)it);
    double la, lb;
    assert_int_equal(rt_iteration(rt, &la, &err), CT_OK);
    ct_net_clear_param_diffs(b);
    assert_int_equal(ct_net_forward(b, &lb, &err), CT_OK);
    ct_net_backward(b);
    assert_true(la == lb);
    assert_true(la > 0.5 && la < 5.0);
    float *ga = rn_flat(a, true), *gb = rn_flat(b, true);
    assert_memory_equal(ga, gb, a->flat_count * sizeof(float));
    free(ga);
    free(gb);
  }
  ct_program_stats st;
  ct_runtime_stats(rt, &st);
  assert_false(st.replaying);
  assert_int_equal(st.plain_steps, st.steps);
  /* the clock, begin, a forward per layer, the pass's loss, a backward per
   * layer but the data layer, the read back */
  assert_int_equal(st.steps, 1 + 1 + a->nlayers + 1 + (a->nlayers - 1) + 1);
  ct_runtime_free(rt);
  ct_net_free(a);
  ct_net_free(b);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

/* A test net that shares all its weights keeps no flat buffers of its own;
 * testing still works and sees the trained values. */
static void test_shared_test_net(void **state) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 3, NULL), CT_OK);
  char *lenet = rn_lenet_text(4, false);
  ct_solver *s = rn_solver(lenet,
                           "type: 'SGD' base_lr: 0.01 lr_policy: 'fixed' test_iter: 1 "
                           "test_interval: 1000 test_initialization: false display: 0",
                           &ctx, NULL);
  free(lenet);
  assert_int_equal(s->ntest_nets, 1);
  ct_net *t = s->test_nets[0];
  assert_int_equal(t->flat_count, 0);
  assert_null(t->flat_data);
  int li = ct_net_layer_index(t, "ip2");
  assert_true(li >= 0);
  int lj = ct_net_layer_index(s->net, "ip2");
  assert_ptr_equal(t->layers[li]->params[0]->data, s->net->layers[lj]->params[0]->data);
  rn_fill_inputs(s->net, 10, 5);
  ct_error err;
  assert_int_equal(ct_solver_step(s, 2, &err), CT_OK);
  rn_fill_inputs(t, 10, 5);
  assert_int_equal(ct_solver_test_all(s, &err), CT_OK);
  assert_int_equal(s->ntest_scores[0], 1); /* the loss */
  assert_true(s->test_scores[0][0] > 0.5f && s->test_scores[0][0] < 5.0f);
  ct_solver_free(s);
  ct_context_free(&ctx);
}

static void expect_split_views(const ct_net *net) {
  const ct_tensor *c = ct_net_blob(net, "c");
  for (int k = 0; k < 2; k++) {
    char name[32];
    snprintf(name, sizeof name, "c_conv1_0_split_%d", k);
    const ct_tensor *t = ct_net_blob(net, name);
    assert_non_null(t);
    assert_ptr_equal(t->data, c->data);
    assert_false(t->owns_data);
    assert_true(ct_tensor_same_shape(t, c));
  }
}

/* Split tops view their bottom's data, also after a reshape that moved it,
 * and keep diffs of their own: a view of one top (the Flatten) joins that
 * top's diff group, not the bottom's nor the other top's. */
static void test_split_shares_data(void **state) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 9, NULL), CT_OK);
  ct_net *net = rn_net(rn_split_net, &ctx, false);
  expect_split_views(net);
  const ct_diff_group *f = group_of(net, "f"), *t0 = group_of(net, "c_conv1_0_split_0");
  assert_ptr_equal(f, t0);
  assert_true(t0 != group_of(net, "c"));
  assert_true(t0 != group_of(net, "c_conv1_0_split_1"));
  assert_true(ct_net_blob(net, "c_conv1_0_split_1")->diff != ct_net_blob(net, "c")->diff);
  float *before = ct_net_blob(net, "c")->data;
  ct_tensor_reshape4(ct_net_blob(net, "data"), 5, 2, 3, 3);
  ct_tensor_reshape_or_die(ct_net_blob(net, "label"), 1, (int[]){5});
  ct_error err;
  assert_int_equal(ct_net_reshape(net, &err), CT_OK);
  assert_true(ct_net_blob(net, "c")->data != before);
  expect_split_views(net);
  ct_net_free(net);
  ct_context_free(&ctx);
}

/* The input gradient through the shared Split tops against central
 * differences of the loss; planned diffs give the per-blob diffs' result. */
static void test_split_gradient(void **state) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 9, NULL), CT_OK);
  ct_net *net = rn_net(rn_split_net, &ctx, false);
  rn_fill_inputs(net, 4, 21);
  ct_error err;
  double loss;
  assert_int_equal(ct_net_forward(net, &loss, &err), CT_OK);
  ct_net_backward(net);
  ct_tensor *x = ct_net_blob(net, "data");
  float *grad = malloc(x->count * sizeof(float));
  memcpy(grad, x->diff, x->count * sizeof(float));
  const float h = 1e-2f;
  for (size_t i = 0; i < x->count; i++) {
    float keep = ct_f32(x)[i];
    double up, down;
    ct_f32(x)[i] = keep + h;
    assert_int_equal(ct_net_forward(net, &up, &err), CT_OK);
    ct_f32(x)[i] = keep - h;
    assert_int_equal(ct_net_forward(net, &down, &err), CT_OK);
    ct_f32(x)[i] = keep;
    double numeric = (up - down) / (2 * h);
    double scale = fmax(1.0, fmax(fabs(numeric), fabs(grad[i])));
    if (fabs(numeric - grad[i]) > 2e-3 * scale)
      fail_msg("data[%zu]: analytic %g, numeric %g", i, (double)grad[i], numeric);
  }
  free(grad);
  ct_net_free(net);
  ct_context_free(&ctx);
  compare_planned(rn_split_net, 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_groups),         cmocka_unit_test(test_plan_no_overlap),
      cmocka_unit_test(test_plan_same_gradients), cmocka_unit_test(test_plan_after_reshape),
      cmocka_unit_test(test_plan_force_backward), cmocka_unit_test(test_program_cpu),
      cmocka_unit_test(test_step_kind_names),
      cmocka_unit_test(test_shared_test_net),     cmocka_unit_test(test_split_shares_data),
      cmocka_unit_test(test_split_gradient),      cmocka_unit_test(test_plan_grad_side),
  };
  return cmocka_run_group_tests(tests, rn_setup, NULL);
}
