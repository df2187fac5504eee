/* BatchNorm + Scale fusion (net_fuse.c) on the CPU: which pairs fuse, the
 * fused pair against the unfused one (outputs, input and parameter
 * gradients accumulated over passes, running statistics), finite
 * differences through the fused pair, and a small ResNet trained fused and
 * unfused. */
#include "fuse_nets.h"

static void replace(char *s, const char *from, const char *to) {
  char *p = strstr(s, from);
  assert_non_null(p);
  size_t nf = strlen(from), nt = strlen(to);
  memmove(p + nt, p + nf, strlen(p + nf) + 1);
  memcpy(p, to, nt);
}

/* The Scale is absorbed, keeps its parameters, and its gradients become
 * final at the BatchNorm's backward. */
static void test_fuse_marks_scale(void **state) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 3, NULL), CT_OK);
  char *text = fz_bn_net(3, true, true);
  ct_net *a = fz_net(text, &ctx, true), *b = fz_net(text, &ctx, false);
  int bi = ct_net_layer_index(a, "bn1"), si = ct_net_layer_index(a, "sc1");
  assert_int_equal(si, bi + 1);
  assert_true(a->layers[si]->absorbed);
  assert_false(a->layers[bi]->absorbed);
  assert_int_equal(fz_absorbed_count(a), 1);
  assert_int_equal(fz_absorbed_count(b), 0);
  assert_int_equal(a->layers[si]->nparams, 2);
  assert_false(a->layer_need_backward[si]);
  assert_true(a->layer_need_backward[bi]);
  int found = 0;
  for (int q = 0; q < a->nparams; q++)
    if (a->params[q].layer == si) {
      assert_int_equal(a->params[q].final_layer, bi);
      found++;
    }
  assert_int_equal(found, 2);
  /* nothing of the Scale is final after its own (empty) step; all of it after bn1's */
  for (int q = 0; q < a->nparams; q++)
    if (a->params[q].layer == si) {
      assert_true(a->layer_ready_count[si] <= a->params[q].offset);
      assert_true(a->layer_ready_count[bi] >= a->params[q].offset + a->params[q].count);
    }
  free(text);
  ct_net_free(a);
  ct_net_free(b);
  ct_context_free(&ctx);
}

static void expect_unfused(const char *text, ct_phase phase) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 3, NULL), CT_OK);
  Caffe__NetParameter *p = rn_parse_net(text);
  ct_net_opts o = {.phase = phase, .quiet = true};
  ct_net *net = NULL;
  ct_error err;
  if (ct_net_init(&net, p, &o, &ctx, &err) != CT_OK) fail_msg("net init: %s", err.msg);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  if (fz_absorbed_count(net) != 0) fail_msg("fused, but should not be:\n%s", text);
  ct_net_free(net);
  ct_context_free(&ctx);
}

/* Pairs that must stay apart: a Scale without bias, a Scale out of place,
 * global statistics (given, or the TEST default), fusion turned off. */
static void test_fuse_not_applied(void **state) {
  char *t = fz_bn_net(3, true, false);
  replace(t, "bias_term: true filler", "bias_term: false filler");
  replace(t, "bias_filler { type: 'uniform' min: -0.5 max: 0.5 } ", "");
  expect_unfused(t, CT_PHASE_TRAIN);
  free(t);
  t = fz_bn_net(3, false, false);
  replace(t, "bottom: 'b1' top: 'b1'", "bottom: 'b1' top: 's1'");
  replace(t, "bottom: 'b1' top: 'ip'", "bottom: 's1' top: 'ip'");
  expect_unfused(t, CT_PHASE_TRAIN);
  free(t);
  t = fz_bn_net(3, true, false);
  replace(t, "moving_average_fraction: 0.9", "use_global_stats: true");
  expect_unfused(t, CT_PHASE_TRAIN);
  expect_unfused(t, CT_PHASE_TEST);
  free(t);
  t = fz_bn_net(3, true, true);
  expect_unfused(t, CT_PHASE_TEST);
  setenv("CORTADO_FUSE", "0", 1);
  expect_unfused(t, CT_PHASE_TRAIN);
  unsetenv("CORTADO_FUSE");
  free(t);
}

/* Fused and unfused agree, in place or not, with and without a ReLU, over
 * two passes that accumulate the parameter gradients. */
static void test_fuse_same_results(void **state) {
  for (int k = 0; k < 4; k++) {
    bool in_place = k & 1, relu = k & 2;
    ct_context ca, cb;
    assert_int_equal(ct_context_init(&ca, CT_DEVICE_CPU, 11, NULL), CT_OK);
    assert_int_equal(ct_context_init(&cb, CT_DEVICE_CPU, 11, NULL), CT_OK);
    char *text = fz_bn_net(3, in_place, relu);
    ct_net *a = fz_net(text, &ca, true), *b = fz_net(text, &cb, false);
    assert_int_equal(fz_absorbed_count(a), 1);
    fz_compare_passes(a, b, in_place ? "c1" : "b1", 2, true, 1e-5);
    free(text);
    ct_net_free(a);
    ct_net_free(b);
    ct_context_free(&ca);
    ct_context_free(&cb);
  }
}

/* Nothing below the pair needs a gradient: the fused backward still runs
 * (for gamma and beta) and computes no dx. */
static void test_fuse_params_only(void **state) {
  ct_context ca, cb;
  assert_int_equal(ct_context_init(&ca, CT_DEVICE_CPU, 11, NULL), CT_OK);
  assert_int_equal(ct_context_init(&cb, CT_DEVICE_CPU, 11, NULL), CT_OK);
  char *text = fz_bn_net_frozen(3);
  ct_net *a = fz_net(text, &ca, true), *b = fz_net(text, &cb, false);
  int bi = ct_net_layer_index(a, "bn1");
  assert_true(a->layers[bi + 1]->absorbed);
  assert_true(a->layer_need_backward[bi]);
  assert_false(a->bottom_need_backward[bi][0]);
  assert_false(b->layer_need_backward[bi]);
  assert_false(a->layer_need_backward[ct_net_layer_index(a, "conv1")]);
  fz_compare_passes(a, b, "c1", 2, false, 1e-5);
  free(text);
  ct_net_free(a);
  ct_net_free(b);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

/* Central differences of the loss against the fused backward: the input,
 * conv1's weights and the Scale's gamma and beta. */
static void test_fuse_gradient(void **state) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 5, NULL), CT_OK);
  char *text = fz_bn_net(3, true, false);
  ct_net *net = fz_net(text, &ctx, true);
  assert_int_equal(fz_absorbed_count(net), 1);
  rn_fill_inputs(net, 5, 8);
  ct_error err;
  double loss;
  ct_net_clear_param_diffs(net);
  assert_int_equal(ct_net_forward(net, &loss, &err), CT_OK);
  ct_net_backward(net);
  const ct_layer *sc = net->layers[ct_net_layer_index(net, "sc1")];
  const ct_layer *conv = net->layers[ct_net_layer_index(net, "conv1")];
  ct_tensor *checked[4] = {ct_net_blob(net, "data"), conv->params[0], sc->params[0], sc->params[1]};
  const char *names[4] = {"data", "conv1 weights", "gamma", "beta"};
  const float h = 1e-2f;
  long n = 0;
  for (int k = 0; k < 4; k++) {
    ct_tensor *t = checked[k];
    float *grad = malloc(t->count * sizeof(float));
    memcpy(grad, t->diff, t->count * sizeof(float));
    for (size_t i = 0; i < t->count; i++) {
      float keep = ct_f32(t)[i];
      double up, down;
      ct_f32(t)[i] = keep + h;
      assert_int_equal(ct_net_forward(net, &up, &err), CT_OK);
      ct_f32(t)[i] = keep - h;
      assert_int_equal(ct_net_forward(net, &down, &err), CT_OK);
      ct_f32(t)[i] = keep;
      double numeric = (up - down) / (2 * h);
      double scale = fmax(1.0, fmax(fabs(numeric), fabs(grad[i])));
      if (fabs(numeric - grad[i]) > 2e-3 * scale)
        fail_msg("%s[%zu]: analytic %g, numeric %g", names[k], i, (double)grad[i], numeric);
      n++;
    }
    free(grad);
  }
  assert_int_equal(n, 3 * 3 * 5 * 4 + 4 * 3 * 3 * 3 + 4 + 4);
  free(text);
  ct_net_free(net);
  ct_context_free(&ctx);
}

/* A small ResNet trained with SGD and momentum, fused and unfused, has the
 * same losses and parameters (and running statistics) after each step. */
static void test_fuse_trains_same(void **state) {
  static const char rest[] =
      "type: 'SGD' base_lr: 0.1 momentum: 0.9 weight_decay: 0.0005 lr_policy: 'fixed' "
      "random_seed: 7 display: 0 average_loss: 1";
  char *text = fz_res_net(4);
  ct_context ca, cb;
  assert_int_equal(ct_context_init(&ca, CT_DEVICE_CPU, 7, NULL), CT_OK);
  assert_int_equal(ct_context_init(&cb, CT_DEVICE_CPU, 7, NULL), CT_OK);
  ct_solver *a = rn_solver(text, rest, &ca, NULL);
  setenv("CORTADO_FUSE", "0", 1);
  ct_solver *b = rn_solver(text, rest, &cb, NULL);
  unsetenv("CORTADO_FUSE");
  assert_int_equal(fz_absorbed_count(a->net), 3);
  assert_int_equal(fz_absorbed_count(b->net), 0);
  rn_fill_inputs(a->net, 5, 99);
  rn_fill_inputs(b->net, 5, 99);
  ct_error err;
  for (int it = 0; it < 4; it++) {
    assert_int_equal(ct_solver_step(a, 1, &err), CT_OK);
    assert_int_equal(ct_solver_step(b, 1, &err), CT_OK);
    float *pa = rn_flat(a->net, false), *pb = rn_flat(b->net, false);
    fz_expect_close("parameters after a step", pa, pb, a->net->flat_count, 1e-5);
    free(pa), free(pb);
  }
  float *p0 = rn_flat(a->net, false);
  bool moved = false;
  ct_solver_free(a);
  a = rn_solver(text, rest, &ca, NULL);
  float *p1 = rn_flat(a->net, false);
  for (size_t i = 0; i < a->net->flat_count; i++) moved |= p0[i] != p1[i];
  assert_true(moved);
  free(p0), free(p1);
  free(text);
  ct_solver_free(a);
  ct_solver_free(b);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fuse_marks_scale),  cmocka_unit_test(test_fuse_not_applied),
      cmocka_unit_test(test_fuse_same_results), cmocka_unit_test(test_fuse_gradient),
      cmocka_unit_test(test_fuse_trains_same),  cmocka_unit_test(test_fuse_params_only),
  };
  return cmocka_run_group_tests(tests, rn_setup, NULL);
}
