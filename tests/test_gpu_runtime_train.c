/* The GPU runtime end to end, on GPU 0 against the CPU:
 *  - LeNet trained 500 iterations on the CPU and on the GPU (FP32 math, a
 *    fixed learnable batch) gives the same loss curve;
 *  - iterations replayed as CUDA graphs (Dropout included) give the
 *    parameters of plain launches, with deterministic algorithms;
 *  - planned blob diffs give the gradients of one diff per blob;
 *  - Dropout draws a fresh mask on every graph replay, the CPU's mask for
 *    the same seed and draw;
 *  - a bad label and a NaN loss are reported after the iteration with the
 *    CPU's messages, and the update of that iteration is not applied;
 *  - parameter gradients on the gradient stream (the default) train to the
 *    parameters of a context without it.
 * Skipped (77) without a GPU. */
#include "runtime/runtime.h"
#include "runtime_nets.h"

/* A batch LeNet can learn: noise plus a bright band of rows that depends on
 * the class. */
static void fill_learnable(ct_net *net) {
  ct_tensor *x = ct_net_blob(net, "data"), *y = ct_net_blob(net, "label");
  int n = x->shape[0];
  float *hx = malloc(x->count * sizeof(float)), *hy = malloc(y->count * sizeof(float));
  tu_fill_uniform(hx, x->count, 0.0f, 0.5f, 21);
  for (int i = 0; i < n; i++) {
    int c = (i * 7) % 10;
    hy[i] = (float)c;
    for (int r = 2 * c + 4; r < 2 * c + 6; r++)
      for (int k = 0; k < 28; k++) hx[(size_t)i * 784 + (size_t)r * 28 + k] = 1.0f;
  }
  ct_tensor_upload(x, hx);
  ct_tensor_upload(y, hy);
  free(hx);
  free(hy);
}

static const char *k_lenet_solver =
    "type: 'SGD' base_lr: 0.01 momentum: 0.9 weight_decay: 0.0005 lr_policy: 'inv' "
    "gamma: 0.0001 power: 0.75 random_seed: 1 display: 0 average_loss: 1";

/* The must-show: the same 500-iteration loss curve on both devices.  The
 * host's oneDNN convolutions and the GPU's cuDNN ones sum in different
 * orders, so the curves agree to about 1e-3 early on (seen: 1.6e-4 at
 * iteration 13 on an H100) and drift within a few percent later. */
static void test_lenet_cpu_vs_gpu(void **state) {
  ct_context cctx, gctx;
  assert_int_equal(ct_context_init(&cctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  rn_gpu_context(&gctx, 1);
  char *net = rn_lenet_text(64, false);
  ct_solver *cs = rn_solver(net, k_lenet_solver, &cctx, NULL);
  ct_solver *gs = rn_solver(net, k_lenet_solver, &gctx, NULL);
  free(net);
  fill_learnable(cs->net);
  fill_learnable(gs->net);
  ct_error err;
  double first = 0, last = 0, worst = 0;
  int worst_at = 0;
  for (int it = 0; it < 500; it++) {
    assert_int_equal(ct_solver_step(cs, 1, &err), CT_OK);
    assert_int_equal(ct_solver_step(gs, 1, &err), CT_OK);
    double lc = cs->smoothed_loss, lg = gs->smoothed_loss;
    double tol = it < 20 ? 1e-3 * fabs(lc) + 1e-5 : 2e-2 * fabs(lc) + 2e-3;
    double d = fabs(lc - lg);
    if (d > tol) fail_msg("iteration %d: CPU loss %.7g, GPU loss %.7g", it, lc, lg);
    if (d > worst) worst = d, worst_at = it;
    if (it == 0) first = lc;
    last = lc;
  }
  print_message("LeNet 500 iterations: loss %.4g -> %.4g, largest CPU/GPU gap %.3g at %d\n", first,
                last, worst, worst_at);
  assert_true(first > 1.5 && last < 0.1 * first); /* it learned */
  /* the GPU iterations ran as CUDA graphs, every step captured */
  ct_program_stats st;
  ct_solver_program_stats(gs, &st);
  if (ct_program_graphs_allowed()) {
    assert_true(st.replaying);
    assert_int_equal(st.plain_steps, 0);
    assert_int_equal(st.graph_steps, st.steps);
  }
  ct_solver_free(cs);
  ct_solver_free(gs);
  ct_context_free(&cctx);
  ct_context_free(&gctx);
}

/* Graph replays and plain launches: the same parameters, iteration by
 * iteration, with Dropout captured in the graph (its masks come from the
 * device draw counter).  Both contexts take deterministic algorithms only, so
 * the two runs do the same arithmetic in the same order: a wrong graph (a
 * stale pointer, a skipped step, a frozen rate or mask) shows at once, not
 * behind the last-bit noise of cuDNN's atomic backward-filter algorithms,
 * which two plain runs amplify to 1e-4 within a few iterations. */
static void test_graph_vs_plain(void **state) {
  ct_context ca, cb;
  rn_gpu_context(&ca, 4);
  rn_gpu_context(&cb, 4);
  ct_context_set_deterministic(&ca, true);
  ct_context_set_deterministic(&cb, true);
  char *net = rn_lenet_text(16, true);
  ct_solver_opts plain = {.quiet_nets = true, .no_replay = true};
  ct_solver *g = rn_solver(net, k_lenet_solver, &ca, NULL);
  ct_solver *p = rn_solver(net, k_lenet_solver, &cb, &plain);
  free(net);
  fill_learnable(g->net);
  fill_learnable(p->net);
  ct_error err;
  /* One iteration at a time, so that a failure says where the two parted:
   * the loss, the draw counter, the dropped elements of the Dropout's top
   * (in place on ip1: zeros where the mask or the ReLU dropped) and the
   * parameters. */
  const ct_tensor *tg = ct_net_blob(g->net, "ip1"), *tp = ct_net_blob(p->net, "ip1");
  float *ag = malloc(tg->count * sizeof(float)), *ap = malloc(tp->count * sizeof(float));
  double worst = 0;
  for (int it = 0; it < 30; it++) {
    assert_int_equal(ct_solver_step(g, 1, &err), CT_OK);
    assert_int_equal(ct_solver_step(p, 1, &err), CT_OK);
    uint64_t dg = ct_context_draws(&ca), dp = ct_context_draws(&cb);
    ct_tensor_download(tg, ag);
    ct_tensor_download(tp, ap);
    size_t zeros_differ = 0;
    for (size_t i = 0; i < tg->count; i++) zeros_differ += (ag[i] == 0.0f) != (ap[i] == 0.0f);
    float *wg = rn_flat(g->net, false), *wp = rn_flat(p->net, false);
    double e = tu_max_rel_err(wg, wp, g->net->flat_count, 1e-3);
    free(wg);
    free(wp);
    if (e > worst) worst = e;
    if (dg != dp || dg != (uint64_t)it + 1 || zeros_differ || e > 1e-6)
      fail_msg("iteration %d: loss %.7g (graph) / %.7g (plain), draws %llu / %llu, %zu of %zu "
               "zeros differ, parameters %.3g apart",
               it, g->smoothed_loss, p->smoothed_loss, (unsigned long long)dg,
               (unsigned long long)dp, zeros_differ, tg->count, e);
  }
  print_message("graph and plain runs, 30 iterations with Dropout: parameters at most %.3g apart\n",
                worst);
  free(ag);
  free(ap);
  ct_program_stats sg, sp;
  ct_solver_program_stats(g, &sg);
  ct_solver_program_stats(p, &sp);
  if (ct_program_graphs_allowed()) {
    assert_true(sg.replaying && sg.graphs >= 1);
    assert_int_equal(sg.plain_steps, 0); /* Dropout's steps too */
  }
  assert_false(sp.replaying);
  ct_solver_free(g);
  ct_solver_free(p);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

/* The gradient stream: LeNet (every parameter layer on it) trained 30
 * iterations, replayed as graphs, against a context without the stream
 * (CORTADO_GRAD_STREAM=0), both with deterministic algorithms: the same
 * parameters.  A missing wait (the update or the next forward before a
 * weight gradient, a reused diff read late) shows as a difference. */
static void test_grad_stream(void **state) {
  const char *env = getenv("CORTADO_GRAD_STREAM");
  if (env && strcmp(env, "0") == 0) skip();
  ct_context ca, cb;
  rn_gpu_context(&ca, 6);
  setenv("CORTADO_GRAD_STREAM", "0", 1);
  rn_gpu_context(&cb, 6);
  unsetenv("CORTADO_GRAD_STREAM");
  assert_non_null(ca.grads);
  assert_null(cb.grads);
  ct_context_set_deterministic(&ca, true);
  ct_context_set_deterministic(&cb, true);
  char *net = rn_lenet_text(32, false);
  ct_solver *a = rn_solver(net, k_lenet_solver, &ca, NULL);
  ct_solver *b = rn_solver(net, k_lenet_solver, &cb, NULL);
  free(net);
  /* conv1 is the lowest parameter layer: every one is on the stream */
  assert_int_equal(a->net->grad_side_last, ct_net_layer_index(a->net, "conv1"));
  assert_true(a->net->layers[ct_net_layer_index(a->net, "ip2")]->grad_side);
  assert_int_equal(b->net->grad_side_last, -1);
  fill_learnable(a->net);
  fill_learnable(b->net);
  ct_error err;
  double worst = 0;
  for (int it = 0; it < 30; it++) {
    assert_int_equal(ct_solver_step(a, 1, &err), CT_OK);
    assert_int_equal(ct_solver_step(b, 1, &err), CT_OK);
    float *wa = rn_flat(a->net, false), *wb = rn_flat(b->net, false);
    double e = tu_max_rel_err(wa, wb, a->net->flat_count, 1e-3);
    free(wa);
    free(wb);
    if (e > worst) worst = e;
    if (e > 1e-6)
      fail_msg("iteration %d: loss %.7g (gradient stream) / %.7g, parameters %.3g apart", it,
               a->smoothed_loss, b->smoothed_loss, e);
  }
  ct_program_stats st;
  ct_solver_program_stats(a, &st);
  if (ct_program_graphs_allowed()) assert_true(st.replaying && st.graphs >= 1);
  print_message("gradient stream, 30 iterations: parameters at most %.3g apart\n", worst);
  ct_solver_free(a);
  ct_solver_free(b);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

/* Planned and per-blob diffs on the GPU: the same parameter gradients. */
static void test_planned_gradients(void **state) {
  const char *texts[2] = {rn_plan_net, NULL};
  char *lenet = rn_lenet_text(8, false);
  texts[1] = lenet;
  for (int k = 0; k < 2; k++) {
    ct_context ca, cb;
    rn_gpu_context(&ca, 9);
    rn_gpu_context(&cb, 9);
    ct_net *planned = rn_net(texts[k], &ca, false), *plain = rn_net(texts[k], &cb, true);
    rn_fill_inputs(planned, 5, 31);
    rn_fill_inputs(plain, 5, 31);
    double la, lb;
    ct_error err;
    assert_int_equal(ct_net_forward(planned, &la, &err), CT_OK);
    assert_int_equal(ct_net_forward(plain, &lb, &err), CT_OK);
    ct_net_backward(planned);
    ct_net_backward(plain);
    assert_true(fabs(la - lb) <= 1e-6 * fabs(lb));
    float *ga = rn_flat(planned, true), *gb = rn_flat(plain, true);
    double e = tu_max_rel_err(ga, gb, planned->flat_count, 1e-3);
    if (e > 1e-5) fail_msg("net %d: planned gradients differ by %g", k, e);
    free(ga);
    free(gb);
    /* and LeNet's planned net holds less device memory (the tiny plan net
     * keeps ip1's diff alive for the gradient stream, and its 256-byte
     * alignment outweighs what sharing saves) */
    if (k == 1)
      assert_true(planned->blob_plan->pool_count <
                  planned->blob_plan->unplanned_count + planned->blob_plan->values_unplanned);
    ct_net_free(planned);
    ct_net_free(plain);
    ct_context_free(&ca);
    ct_context_free(&cb);
  }
  free(lenet);
}

/* Ones through a Dropout: its top is 0 or 2 (ratio 0.5), so the mask can be
 * read off exactly. */
static const char k_dropout_net[] =
    "name: 'drop'\n"
    "layer { name: 'in' type: 'Input' top: 'x' top: 'y'\n"
    "  input_param { shape { dim: 4 dim: 256 } shape { dim: 4 dim: 1 } } }\n"
    "layer { name: 'drop' type: 'Dropout' bottom: 'x' top: 'd' dropout_param { dropout_ratio: 0.5 } }\n"
    "layer { name: 'ip' type: 'InnerProduct' bottom: 'd' top: 'p'\n"
    "  inner_product_param { num_output: 1 weight_filler { type: 'gaussian' std: 0.1 } } }\n"
    "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'p' bottom: 'y' top: 'loss' }\n";

static void set_ones(ct_net *net) {
  ct_tensor *x = ct_net_blob(net, "x");
  float *h = malloc(x->count * sizeof(float));
  for (size_t i = 0; i < x->count; i++) h[i] = 1.0f;
  ct_tensor_upload(x, h);
  free(h);
}

static void test_dropout_replays(void **state) {
  if (!ct_layer_find("EuclideanLoss")) skip();
  ct_context cctx, gctx;
  assert_int_equal(ct_context_init(&cctx, CT_DEVICE_CPU, 77, NULL), CT_OK);
  rn_gpu_context(&gctx, 77);
  ct_net *cpu = rn_net(k_dropout_net, &cctx, false), *gpu = rn_net(k_dropout_net, &gctx, false);
  set_ones(cpu);
  set_ones(gpu);
  ct_runtime *rt;
  assert_int_equal(ct_runtime_new(&rt, gpu, NULL, NULL), CT_OK);
  const size_t n = 4 * 256;
  float *prev = calloc(n, sizeof(float)), *mg = malloc(n * sizeof(float));
  ct_error err;
  for (int run = 0; run < 6; run++) {
    double loss;
    assert_int_equal(rt_iteration(rt, &loss, &err), CT_OK);
    assert_int_equal(ct_net_forward(cpu, &loss, &err), CT_OK);
    ct_tensor_download(ct_net_blob(gpu, "d"), mg);
    const float *mc = ct_net_blob(cpu, "d")->data;
    size_t kept = 0, changed = 0;
    for (size_t i = 0; i < n; i++) {
      assert_true(mg[i] == 0.0f || mg[i] == 2.0f);
      if (mg[i] != mc[i]) fail_msg("run %d: element %zu is %g on the GPU, %g on the CPU", run, i, mg[i], mc[i]);
      kept += mg[i] != 0.0f;
      changed += mg[i] != prev[i];
    }
    assert_true(kept > n / 3 && kept < 2 * n / 3);
    if (run > 0 && changed < n / 4) fail_msg("run %d: the mask barely changed (%zu of %zu)", run, changed, n);
    memcpy(prev, mg, n * sizeof(float));
  }
  ct_program_stats st;
  ct_runtime_stats(rt, &st);
  if (ct_program_graphs_allowed()) assert_true(st.replaying); /* runs 3 to 6 were graph launches */
  assert_int_equal(ct_context_draws(&gctx), 6);
  free(prev);
  free(mg);
  ct_runtime_free(rt);
  ct_net_free(cpu);
  ct_net_free(gpu);
  ct_context_free(&cctx);
  ct_context_free(&gctx);
}

/* A label out of range in the 5th iteration (a graph replay): the error the
 * CPU gives, and the parameters of the 4th iteration. */
static void test_bad_label_after_replay(void **state) {
  ct_context gctx, cctx;
  rn_gpu_context(&gctx, 2);
  assert_int_equal(ct_context_init(&cctx, CT_DEVICE_CPU, 2, NULL), CT_OK);
  char *net = rn_lenet_text(8, false);
  ct_solver *s = rn_solver(net, k_lenet_solver, &gctx, NULL);
  ct_solver *c = rn_solver(net, k_lenet_solver, &cctx, NULL);
  free(net);
  ct_solver *both[2] = {s, c};
  ct_error err;
  for (int k = 0; k < 2; k++) {
    fill_learnable(both[k]->net);
    assert_int_equal(ct_solver_step(both[k], 4, &err), CT_OK);
  }
  float *before = rn_flat(s->net, false);
  float labels[8] = {0, 1, 2, 12, 4, 5, 6, 7};
  const char *want = "layer 'loss' (SoftmaxWithLoss): label 12 at index 3 is out of range [0, 10)";
  for (int k = 0; k < 2; k++) {
    ct_tensor_upload(ct_net_blob(both[k]->net, "label"), labels);
    assert_int_equal(ct_solver_step(both[k], 1, &err), CT_ERR_INVALID);
    assert_string_equal(err.msg, want);
  }
  float *after = rn_flat(s->net, false);
  assert_memory_equal(before, after, s->net->flat_count * sizeof(float));
  /* the check is cleared: good labels train again */
  fill_learnable(s->net);
  assert_int_equal(ct_solver_step(s, 1, &err), CT_OK);
  /* and ct_net_forward reports the same error at once */
  ct_tensor_upload(ct_net_blob(s->net, "label"), labels);
  double loss;
  assert_int_equal(ct_net_forward(s->net, &loss, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, want);
  free(before);
  free(after);
  ct_solver_free(s);
  ct_solver_free(c);
  ct_context_free(&gctx);
  ct_context_free(&cctx);
}

/* A NaN target: CT_ERR_NUMERIC naming the first layer with a non-finite
 * output (the Input holding it), and the update of that iteration skipped
 * by the guarded kernel. */
static void test_nan_loss_skips_update(void **state) {
  if (!ct_layer_find("EuclideanLoss")) skip();
  ct_context gctx;
  rn_gpu_context(&gctx, 2);
  ct_solver *s = rn_solver(k_dropout_net, "type: 'SGD' base_lr: 0.01 lr_policy: 'fixed' display: 0",
                           &gctx, NULL);
  set_ones(s->net);
  ct_error err;
  assert_int_equal(ct_solver_step(s, 5, &err), CT_OK);
  float *before = rn_flat(s->net, false);
  float y[4] = {0, NAN, 0, 0};
  ct_tensor_upload(ct_net_blob(s->net, "y"), y);
  assert_int_equal(ct_solver_step(s, 1, &err), CT_ERR_NUMERIC);
  assert_string_equal(err.msg,
                      "iteration 5: the loss is nan; the first non-finite output is from layer "
                      "'in' (Input)");
  float *after = rn_flat(s->net, false);
  assert_memory_equal(before, after, s->net->flat_count * sizeof(float));
  free(before);
  free(after);
  ct_solver_free(s);
  ct_context_free(&gctx);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lenet_cpu_vs_gpu),      cmocka_unit_test(test_graph_vs_plain),
      cmocka_unit_test(test_planned_gradients),     cmocka_unit_test(test_dropout_replays),
      cmocka_unit_test(test_bad_label_after_replay), cmocka_unit_test(test_nan_loss_skips_update),
      cmocka_unit_test(test_grad_stream),
  };
  return cmocka_run_group_tests(tests, rn_setup, NULL);
}
