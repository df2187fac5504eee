/* The recurrent layers on the CPU beyond the references of
 * test_layer_recurrent_ref.c: LSTMUnit against Caffe's equations, gradient
 * checks of LSTM, RNN and LSTMUnit (every bottom but cont, every
 * parameter, the exposed state), the setups Caffe refuses, and
 * recurrent_param.debug_info. */
#include "recurrent_cases.h"

/* LSTMUnit's tops against its equations in double, for 0/1 indicators. */
static void test_lstm_unit_forward(void **state) {
  const rl_case *uc = &k_rl_cases[sizeof k_rl_cases / sizeof k_rl_cases[0] - 1];
  rl_param p;
  rl_make(&p, uc);
  tu_layer_case c;
  tu_layer_case_init(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, uc->shapes, 2);
  tu_fill(c.bottom[1], -3.0f, 3.0f, 41);
  rl_cont(&c);
  tu_forward(&c);
  float *cp = tu_values(c.bottom[0]), *x = tu_values(c.bottom[1]), *cont = tu_values(c.bottom[2]);
  const int N = 3, D = 2;
  double want_c[6], want_h[6];
  for (int n = 0; n < N; n++)
    for (int d = 0; d < D; d++) {
      const float *g = x + n * 4 * D;
      const double i = rr_sigmoid(g[d]), f = rr_sigmoid(g[D + d]), o = rr_sigmoid(g[2 * D + d]);
      const double gg = tanh(g[3 * D + d]);
      want_c[n * D + d] = cont[n] * f * cp[n * D + d] + i * gg;
      want_h[n * D + d] = o * tanh(want_c[n * D + d]);
    }
  rc_expect("c", c.top[0], false, want_c);
  rc_expect("h", c.top[1], false, want_h);
  assert_true(cont[0] == 0.0f && cont[1] == 1.0f);
  free(cp);
  free(x);
  free(cont);
  tu_layer_case_free(&c);
}

static void test_gradients(void **state) {
  for (size_t i = 0; i < sizeof k_rl_cases / sizeof k_rl_cases[0]; i++) {
    const rl_case *rc = &k_rl_cases[i];
    rl_param p;
    rl_make(&p, rc);
    tu_layer_case c;
    tu_layer_case_init(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, rc->shapes, rc->ntop);
    rl_cont(&c);
    ct_gradcheck_opts o = rl_gradcheck_opts(rc);
    tu_check_gradient(&c, &o);
    tu_layer_case_free(&c);
  }
}

static void expect_error(const rl_case *rc, const char *shapes, int ntop, const char *msg) {
  rl_param p;
  rl_make(&p, rc);
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, shapes, ntop, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

static void test_errors(void **state) {
  const rl_case lstm = {"LSTM", 2, false, NULL, 1}, exposed = {"LSTM", 2, true, NULL, 3};
  const rl_case rnn = {"RNN", 2, true, NULL, 2}, unit = {"LSTMUnit", 0, false, NULL, 2};
  expect_error(&lstm, "3,2,3; 3,2; 2,2; 1,2,2", 1,
               "layer 'rec' (LSTM): the bottoms are x, cont [, x_static] (2 or 3 blobs; h_0, c_0 "
               "come with recurrent_param.expose_hidden), got 4");
  expect_error(&exposed, "3,2,3; 3,2; 1,2,2", 3,
               "layer 'rec' (LSTM): with recurrent_param.expose_hidden the bottoms are x, cont, "
               "[x_static,] h_0, c_0 (4 or 5 blobs), got 3");
  expect_error(&exposed, "3,2,3; 3,2; 1,2,2; 1,2,2", 1,
               "layer 'rec' (LSTM): with recurrent_param.expose_hidden the tops are the output "
               "and h_T, c_T (3 blobs), got 1");
  expect_error(&lstm, "3,2,3; 3,2", 2,
               "layer 'rec' (LSTM): the top is the output alone (1 blob; the final state comes "
               "with recurrent_param.expose_hidden), got 2");
  expect_error(&lstm, "3; 3,2", 1,
               "layer 'rec' (LSTM): bottom 0 (x) must have at least 2 axes (T time steps, N "
               "streams, ...), got 1");
  expect_error(&lstm, "3,2,3; 3,3", 1,
               "layer 'rec' (LSTM): bottom 1 (cont) must have shape (T, N) = (3, 2), got 3 3 (9)");
  expect_error(&lstm, "3,2,3; 3,2; 3,4", 1,
               "layer 'rec' (LSTM): bottom 2 (x_static) must be (N, ...) = (2, ...) with 4 "
               "values per stream, got 3 4 (12)");
  expect_error(&rnn, "3,2,3; 3,2; 1,2,3", 2,
               "layer 'rec' (RNN): bottom 2 (h_0) must have shape (1, N, num_output) = (1, 2, 2), "
               "got 1 2 3 (6)");
  rl_param p;
  rl_make(&p, &lstm);
  p.rp.has_num_output = 0;
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3,2,3; 3,2", 1, &err),
                   CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'rec' (LSTM): recurrent_param.num_output must be given and "
                               "positive (at most 16384)");
  tu_layer_case_free(&c);
  expect_error(&unit, "1,3,2; 1,3,6; 1,3", 2,
               "layer 'rec' (LSTMUnit): bottom 1 (x) must hold 4 gates of the 2 cells of bottom 0 "
               "(4 x 2 = 8 values per stream), got 6");
  expect_error(&unit, "1,3,2; 1,3,8; 2,3", 2,
               "layer 'rec' (LSTMUnit): bottom 2 (cont) must have shape (1, N) with the N of "
               "bottom 0, got 2 3 (6)");
  /* in place: the top replaces x, which backward needs */
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  int xshape[3] = {3, 2, 2}, cshape[2] = {3, 2};
  ct_tensor *b[2] = {ct_tensor_new_shape(CT_DEVICE_CPU, "x", 3, xshape, true),
                     ct_tensor_new_shape(CT_DEVICE_CPU, "cont", 2, cshape, true)};
  ct_layer *l;
  rl_make(&p, &lstm);
  assert_int_equal(ct_layer_create(&p.lp, CT_PHASE_TRAIN, &ctx, 2, 1, &l, &err), CT_OK);
  assert_int_equal(ct_layer_setup(l, b, b, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'rec' (LSTM): top 0 is bottom 0: a recurrent layer cannot run "
                               "in place (backward needs its inputs)");
  ct_layer_free(l);
  ct_tensor_free(b[0]);
  ct_tensor_free(b[1]);
  ct_context_free(&ctx);
  /* T may change between passes (Caffe refuses; a direct loop does not
   * care), N too; the carried state restarts from zeros */
  rl_make(&p, &lstm);
  tu_layer_case_init(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, "3,2,3; 3,2", 1);
  int xs[3] = {5, 4, 3}, cs[2] = {5, 4};
  ct_tensor_reshape(c.bottom[0], 3, xs, NULL);
  ct_tensor_reshape(c.bottom[1], 2, cs, NULL);
  assert_int_equal(ct_layer_reshape(c.l, c.bottom, c.top, &err), CT_OK);
  assert_int_equal(c.top[0]->shape[0], 5);
  assert_int_equal(c.top[0]->shape[1], 4);
  tu_layer_case_free(&c);
}

/* debug_info logs the internal states of each forward and the gradients
 * of each backward, in the style of Caffe's net debug lines. */
static void test_debug_info(void **state) {
  rl_param p;
  rl_make(&p, &k_rl_cases[0]);
  p.rp.has_debug_info = 1;
  p.rp.debug_info = true;
  char path[512];
  snprintf(path, sizeof path, "%s/log.txt", tu_tmpdir("recurrent_debug"));
  ct_error err;
  ct_log_set_level(CT_LOG_INFO);
  assert_int_equal(ct_log_set_file(path, &err), CT_OK);
  tu_layer_case c;
  tu_layer_case_init(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TRAIN, k_rl_cases[0].shapes, 1);
  rl_cont(&c);
  tu_forward(&c);
  float dy[12];
  assert_int_equal(c.top[0]->count, 12);
  tu_fill_uniform(dy, 12, 0.5f, 1.0f, 3);
  ct_tensor_upload_diff(c.top[0], dy);
  bool prop[2] = {true, false};
  ct_layer_backward(c.l, c.top, prop, c.bottom);
  ct_log_set_file(NULL, &err);
  ct_log_set_level(CT_LOG_WARNING);
  char *log = tu_read_file(path, NULL);
  assert_non_null(log);
  assert_non_null(strstr(log, "[Forward] Layer rec, internal blob h_1 data: "));
  assert_non_null(strstr(log, "[Forward] Layer rec, internal blob c_3 data: "));
  assert_non_null(strstr(log, "[Backward] Layer rec, internal blob pre_1 diff: "));
  assert_null(strstr(log, "pre_1 diff: 0\n"));
  free(log);
  tu_layer_case_free(&c);
}

int main(int argc, char **argv) {
  ct_log_set_level(CT_LOG_WARNING);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lstm_unit_forward),
      cmocka_unit_test(test_gradients),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_debug_info),
  };
  tu_filter_tests(argc, argv);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
