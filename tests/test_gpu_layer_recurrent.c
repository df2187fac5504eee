/* LSTM, RNN and LSTMUnit on GPU 0, in FP32 (TF32 off):
 *  - every layer case of recurrent_cases.h against the CPU (tops, bottom
 *    and parameter gradients) and gradient-checked on the device;
 *  - the small nets of test_layer_recurrent_ref.c against the double
 *    reference to 1e-5, the state carried into a second pass included;
 *  - an LSTM net trained on both devices, its iterations captured as CUDA
 *    graphs on the GPU: the same loss curve and parameters.
 * Skipped (exit 77) without a GPU. */
#include "runtime/runtime.h"
#include "recurrent_cases.h"

/* Sums over a few dozen products in another order (cuBLAS against the
 * host's BLAS); seen below 1e-6 in FP32. */
#define REL_TOL 1e-4

static void fp32_cont(tu_layer_case *c) {
  ct_context_set_tf32(&c->ctx, false);
  rl_cont(c);
}

static void test_against_cpu(void **state) {
  for (size_t i = 0; i < sizeof k_rl_cases / sizeof k_rl_cases[0]; i++) {
    const rl_case *rc = &k_rl_cases[i];
    rl_param p;
    rl_make(&p, rc);
    tu_compare_cpu_gpu(&p.lp, CT_PHASE_TRAIN, rc->shapes, rc->ntop, REL_TOL, fp32_cont);
  }
}

static void test_gradients_on_gpu(void **state) {
  for (size_t i = 0; i < sizeof k_rl_cases / sizeof k_rl_cases[0]; i++) {
    const rl_case *rc = &k_rl_cases[i];
    rl_param p;
    rl_make(&p, rc);
    tu_layer_case c;
    tu_layer_case_init(&c, &p.lp, 0, CT_PHASE_TRAIN, rc->shapes, rc->ntop);
    fp32_cont(&c);
    ct_gradcheck_opts o = rl_gradcheck_opts(rc);
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
  }
}

static void test_reference_on_gpu(void **state) {
  ct_context ctx;
  rn_gpu_context(&ctx, 5);
  for (int lstm = 0; lstm < 2; lstm++) {
    const rc_config cases[] = {
        {lstm, 5, 3, 2, 0, 3, false},
        {lstm, 4, 3, 3, 2, 2, false},
        {lstm, 3, 2, 2, 3, 4, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
      rc_run(&cases[i], &ctx, 100 * i + 7);
  }
  ct_context_free(&ctx);
}

/* 40 iterations of an LSTM net with a static input on both devices (the
 * state carried from one iteration's forward to the next): the loss curves
 * and the parameters agree, and every GPU iteration ran as a graph. */
static void test_training_cpu_vs_gpu(void **state) {
  const rc_config c = {true, 6, 4, 3, 2, 5, false};
  char *net = rc_net_text(&c);
  const char *solver = "type: 'SGD' base_lr: 0.1 momentum: 0.9 lr_policy: 'fixed' random_seed: 3 "
                       "display: 0 average_loss: 1";
  ct_context cctx, gctx;
  assert_int_equal(ct_context_init(&cctx, CT_DEVICE_CPU, 3, NULL), CT_OK);
  rn_gpu_context(&gctx, 3);
  ct_solver *s[2] = {rn_solver(net, solver, &cctx, NULL), rn_solver(net, solver, &gctx, NULL)};
  free(net);
  for (int d = 0; d < 2; d++) {
    ct_net *n = s[d]->net;
    const char *names[] = {"x", "cont", "target", "xs"};
    for (int k = 0; k < 4; k++) {
      ct_tensor *t = ct_net_blob(n, names[k]);
      double *v = k == 1 ? rc_cont(&c) : rc_values(t->count, -1, 1, 60 + (uint64_t)k);
      rc_upload(t, v);
      free(v);
    }
    ct_layer *l = n->layers[ct_net_layer_index(n, "rec")];
    for (int i = 0; i < l->nparams; i++) {
      double *v = rc_values(l->params[i]->count, -0.5, 0.5, 70 + (uint64_t)i);
      rc_upload(l->params[i], v);
      free(v);
    }
  }
  ct_error err;
  double first = 0, last = 0;
  for (int it = 0; it < 40; it++) {
    for (int d = 0; d < 2; d++) assert_int_equal(ct_solver_step(s[d], 1, &err), CT_OK);
    /* the two devices' sums round differently, and training amplifies it */
    const double lc = s[0]->smoothed_loss, lg = s[1]->smoothed_loss;
    const double tol = (it < 10 ? 1e-4 : 2e-3) * fabs(lc) + 1e-6;
    if (!(fabs(lc - lg) <= tol))
      fail_msg("iteration %d: CPU loss %.8g, GPU loss %.8g", it, lc, lg);
    if (it == 0) first = lc;
    last = lc;
  }
  assert_true(last < 0.8 * first); /* it learned (seen on the CPU: 3.67 -> 2.53) */
  float *pc = rn_flat(s[0]->net, false), *pg = rn_flat(s[1]->net, false);
  assert_int_equal(s[0]->net->flat_count, s[1]->net->flat_count);
  double e = tu_max_rel_err(pg, pc, s[0]->net->flat_count, 1e-2);
  if (!(e <= 5e-3)) fail_msg("parameters differ after 40 iterations: %g", e);
  free(pc);
  free(pg);
  ct_program_stats st;
  ct_solver_program_stats(s[1], &st);
  if (ct_program_graphs_allowed()) assert_int_equal(st.graph_steps, st.steps);
  for (int d = 0; d < 2; d++) ct_solver_free(s[d]);
  ct_context_free(&cctx);
  ct_context_free(&gctx);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
  tu_require_gpu();
  ct_log_set_level(CT_LOG_WARNING);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_cpu),
      cmocka_unit_test(test_gradients_on_gpu),
      cmocka_unit_test(test_reference_on_gpu),
      cmocka_unit_test(test_training_cpu_vs_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
