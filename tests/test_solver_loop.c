/* The training loop: Caffe's log lines, testing, hooks, stop and snapshot
 * requests (from a signal handler too), non-finite losses, Solve's end
 * snapshots, NetState rules of train and test nets, `weights`. */
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "math/math.h"
#include "test_solver_fixture.h"

#define N 4
#define D 3
#define K 2

static float g_x[N * D], g_y[N * K];

static int setup(void **state) {
  tsf_require_layers();
  tu_fill_uniform(g_x, N * D, 0.1f, 1.0f, 31); /* positive: see test_nonfinite_loss */
  tu_fill_uniform(g_y, N * K, -1.0f, 1.0f, 32);
  ct_log_set_level(CT_LOG_WARNING);
  return 0;
}

/* DummyData with constant fillers feeds both nets: x = 0.5, y = 1. */
static const char *k_const_net =
    "name: 'c'\n"
    "layer { name: 'data' type: 'DummyData' top: 'x' top: 'y'\n"
    "  dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 2 }\n"
    "    data_filler { type: 'constant' value: 0.5 } data_filler { type: 'constant' value: 1 } } }\n"
    "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'pred'\n"
    "  inner_product_param { num_output: 2 weight_filler { type: 'gaussian' std: 0.5 } } }\n"
    "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'pred' bottom: 'y' top: 'loss' }\n";

static ct_solver *quad_solver(ct_context *ctx, const char *rest) {
  assert_int_equal(ct_context_init(ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  char *net = quad_net_text(N, D, K);
  ct_solver *s = tsf_solver(net, rest, ctx);
  free(net);
  tsf_fill(s->net, g_x, g_y, N, D, K, 1);
  return s;
}

/* The loss of k_const_net by hand: pred_k = b_k + 0.5 sum_d W_kd,
 * loss = 1/(2*2) * 2 * sum_k (pred_k - 1)^2. */
static double const_net_loss(ct_net *net) {
  const ct_tensor *w = tsf_param(net, "ip", 0), *b = tsf_param(net, "ip", 1);
  double loss = 0;
  for (int k = 0; k < 2; k++) {
    double pred = b->data[k];
    for (int d = 0; d < 3; d++) pred += 0.5 * w->data[k * 3 + d];
    loss += (pred - 1) * (pred - 1);
  }
  return loss / 2;
}

/* Reads the log file into a string (caller frees). */
static char *read_log(const char *path) {
  char *text = tu_read_file(path, NULL);
  assert_non_null(text);
  return text;
}

static void expect_line(const char *log, const char *line) {
  char want[1024];
  snprintf(want, sizeof want, "] %s\n", line);
  if (!strstr(log, want)) fail_msg("log has no line '%s'; the log:\n%s", line, log);
}

/* Display and test lines are Caffe's, with the values of the nets. */
static void test_log_lines(void **state) {
  const char *dir = tu_tmpdir("solver_log");
  char log_path[4200];
  snprintf(log_path, sizeof log_path, "%s/train.log", dir);
  ct_error err;
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  char rest[512];
  snprintf(rest, sizeof rest,
           "type: 'SGD' base_lr: 0.01 lr_policy: 'fixed' display: 2 test_iter: 3 "
           "test_interval: 2 random_seed: 5");
  ct_solver *s = tsf_solver(k_const_net, rest, &ctx);
  assert_int_equal(s->ntest_nets, 1);
  /* the test net computes with the train net's weights */
  assert_ptr_equal(tsf_param(s->test_nets[0], "ip", 0)->data, tsf_param(s->net, "ip", 0)->data);
  double loss0 = const_net_loss(s->net);

  ct_log_set_level(CT_LOG_INFO);
  assert_int_equal(ct_log_set_file(log_path, &err), CT_OK);
  assert_int_equal(ct_solver_step(s, 1, &err), CT_OK);
  assert_int_equal(ct_log_set_file(NULL, &err), CT_OK);
  ct_log_set_level(CT_LOG_WARNING);
  char *log = read_log(log_path);
  char line[512];
  expect_line(log, "Iteration 0, Testing net (#0)");
  snprintf(line, sizeof line, "    Test net output #0: loss = %g (* 1 = %g loss)", (float)loss0,
           (float)loss0);
  expect_line(log, line);
  expect_line(log, "Iteration 0, lr = 0.01");
  snprintf(line, sizeof line, "    Train net output #0: loss = %g (* 1 = %g loss)", (float)loss0,
           (float)loss0);
  expect_line(log, line);
  /* Iteration 0 (0 iter/s, 0.000123s/2 iters), loss = X */
  const char *p = strstr(log, "] Iteration 0 (");
  assert_non_null(p);
  float per_s, lapse, loss;
  int display;
  assert_int_equal(sscanf(p, "] Iteration 0 (%g iter/s, %gs/%d iters), loss = %g", &per_s, &lapse,
                          &display, &loss),
                   4);
  assert_float_equal(per_s, 0.0f, 0);
  assert_int_equal(display, 2);
  assert_true(lapse >= 0 && lapse < 10);
  assert_true(fabs(loss - loss0) < 1e-5 * (loss0 + 1e-3));
  assert_int_equal(s->ntest_scores[0], 1);
  assert_true(fabs(s->test_scores[0][0] - loss0) < 1e-5 * (loss0 + 1e-3));
  free(log);

  /* a test at iteration 2 uses the weights after two updates */
  assert_int_equal(ct_solver_step(s, 2, &err), CT_OK);
  assert_int_equal(ct_solver_test_all(s, &err), CT_OK);
  double loss3 = const_net_loss(s->net);
  assert_true(fabs(loss3 - loss0) > 1e-4);
  assert_true(fabs(s->test_scores[0][0] - loss3) < 1e-5 * (loss3 + 1e-3));
  ct_solver_free(s);
  ct_context_free(&ctx);
}

/* test_compute_loss adds "Test loss: X"; an output that is not a loss has
 * no "(* w = ...)" part. */
static void test_test_loss_line(void **state) {
  const char *dir = tu_tmpdir("solver_test_loss");
  char log_path[4200], net[2048];
  snprintf(log_path, sizeof log_path, "%s/test.log", dir);
  snprintf(net, sizeof net,
           "%s layer { name: 'extra' type: 'DummyData' top: 'z' include { phase: TEST }\n"
           "  dummy_data_param { shape { dim: 1 } data_filler { type: 'constant' value: 7 } } }\n",
           k_const_net);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_solver *s = tsf_solver(net, "base_lr: 0.1 lr_policy: 'fixed' test_iter: 2 test_interval: 5 "
                                 "test_compute_loss: true random_seed: 2",
                            &ctx);
  double loss0 = const_net_loss(s->net);
  ct_error err;
  ct_log_set_level(CT_LOG_INFO);
  assert_int_equal(ct_log_set_file(log_path, &err), CT_OK);
  assert_int_equal(ct_solver_test_all(s, &err), CT_OK);
  assert_int_equal(ct_log_set_file(NULL, &err), CT_OK);
  ct_log_set_level(CT_LOG_WARNING);
  char *log = read_log(log_path);
  char line[512];
  snprintf(line, sizeof line, "Test loss: %g", (float)loss0);
  expect_line(log, line);
  snprintf(line, sizeof line, "    Test net output #0: loss = %g (* 1 = %g loss)", (float)loss0,
           (float)loss0);
  expect_line(log, line);
  expect_line(log, "    Test net output #1: z = 7");
  assert_int_equal(s->ntest_scores[0], 2);
  free(log);
  ct_solver_free(s);
  ct_context_free(&ctx);
}

/* ------------------------------------------------------------------ hooks */

typedef struct hook_state {
  ct_solver *s;
  int starts, gradients;
  int snapshot_at, signal_at;
  bool zero_gradients, fail;
} hook_state;

static ct_solver *g_signal_solver;

static void on_sigusr1(int sig) {
  (void)sig;
  ct_solver_request(g_signal_solver, CT_SOLVER_ACTION_STOP);
}

static void hook_start(void *user) {
  hook_state *h = user;
  h->starts++;
  if (h->s->iter == h->snapshot_at) ct_solver_request(h->s, CT_SOLVER_ACTION_SNAPSHOT);
  if (h->s->iter == h->signal_at) raise(SIGUSR1);
}

static ct_status hook_gradients(void *user, ct_error *err) {
  hook_state *h = user;
  h->gradients++;
  if (h->fail) return ct_error_set(err, CT_ERR_COMM, "all-reduce failed: peer 1 is gone");
  if (h->zero_gradients) ct_cpu_set(h->s->net->flat_count, 0.0f, h->s->net->flat_diff);
  return CT_OK;
}

/* A snapshot request during iteration 2 snapshots after it (iter 3); a STOP
 * from a signal handler during iteration 4 ends the run after it (iter 5);
 * Solve then writes its final snapshot and stops early. */
static void test_requests_and_signal(void **state) {
  const char *dir = tu_tmpdir("solver_requests");
  char rest[4600], path[4400];
  snprintf(rest, sizeof rest,
           "type: 'SGD' base_lr: 0.01 lr_policy: 'fixed' max_iter: 10 random_seed: 1 "
           "snapshot_prefix: '%s/r'",
           dir);
  ct_context ctx;
  ct_solver *s = quad_solver(&ctx, rest);
  hook_state h = {.s = s, .snapshot_at = 2, .signal_at = 4};
  ct_solver_callback hooks = {hook_start, hook_gradients, &h};
  ct_solver_add_callback(s, &hooks);
  g_signal_solver = s;
  struct sigaction sa = {0}, old;
  sa.sa_handler = on_sigusr1;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
  ct_error err;
  assert_int_equal(ct_solver_solve(s, NULL, &err), CT_OK);
  sigaction(SIGUSR1, &old, NULL);
  assert_true(s->requested_early_exit);
  assert_int_equal(s->iter, 5);
  assert_int_equal(h.starts, 5);
  assert_int_equal(h.gradients, 5);
  struct stat st;
  const int present[] = {3, 5}, absent[] = {2, 4, 10};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/r_iter_%d.solverstate", dir, present[i]);
    assert_int_equal(stat(path, &st), 0);
    snprintf(path, sizeof path, "%s/r_iter_%d.caffemodel", dir, present[i]);
    assert_int_equal(stat(path, &st), 0);
  }
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/r_iter_%d.caffemodel", dir, absent[i]);
    assert_int_not_equal(stat(path, &st), 0);
  }
  ct_solver_free(s);
  ct_context_free(&ctx);
}

/* on_gradients runs after backward and before the update: zeroing the
 * gradient there leaves plain SGD's weights unchanged; its failure ends the
 * step with its status. */
static void test_gradient_hook(void **state) {
  ct_context ctx;
  ct_solver *s = quad_solver(&ctx, "type: 'SGD' base_lr: 0.1 lr_policy: 'fixed' random_seed: 3");
  hook_state h = {.s = s, .snapshot_at = -1, .signal_at = -1, .zero_gradients = true};
  ct_solver_callback hooks = {NULL, hook_gradients, &h};
  ct_solver_add_callback(s, &hooks);
  float before[K * D];
  memcpy(before, tsf_param(s->net, "ip", 0)->data, sizeof before);
  ct_error err;
  assert_int_equal(ct_solver_step(s, 3, &err), CT_OK);
  assert_int_equal(h.gradients, 3);
  assert_memory_equal(before, tsf_param(s->net, "ip", 0)->data, sizeof before);
  h.zero_gradients = false;
  assert_int_equal(ct_solver_step(s, 1, &err), CT_OK);
  assert_memory_not_equal(before, tsf_param(s->net, "ip", 0)->data, sizeof before);
  h.fail = true;
  assert_int_equal(ct_solver_step(s, 2, &err), CT_ERR_COMM);
  assert_string_equal(err.msg, "all-reduce failed: peer 1 is gone");
  assert_int_equal(s->iter, 4);
  ct_solver_free(s);
  ct_context_free(&ctx);
}

/* A non-finite loss stops the run naming the first layer whose output went
 * non-finite, without applying that iteration's update. */
static void test_nonfinite_loss(void **state) {
  ct_context ctx;
  ct_solver *s = quad_solver(&ctx, "type: 'SGD' base_lr: 0.01 lr_policy: 'fixed' random_seed: 4");
  ct_error err;
  assert_int_equal(ct_solver_step(s, 2, &err), CT_OK);
  ct_tensor *w = tsf_param(s->net, "ip", 0);
  w->data[0] = INFINITY; /* with positive inputs, pred[.,0] = +inf */
  float before[K * D];
  memcpy(before, w->data, sizeof before);
  assert_int_equal(ct_solver_step(s, 3, &err), CT_ERR_NUMERIC);
  assert_string_equal(err.msg, "iteration 2: the loss is inf; the first non-finite output is from "
                               "layer 'ip' (InnerProduct)");
  assert_int_equal(s->iter, 2);
  assert_memory_equal(before, w->data, sizeof before);

  /* NaN inputs: the data layer is named */
  ct_net_blob(s->net, "x")->data[1] = NAN;
  w->data[0] = 0.5f;
  assert_int_equal(ct_solver_step(s, 1, &err), CT_ERR_NUMERIC);
  assert_string_equal(err.msg, "iteration 2: the loss is nan; the first non-finite output is from "
                               "layer 'data' (Input)");
  ct_solver_free(s);

  /* continue_on_nonfinite keeps going */
  char *net = quad_net_text(N, D, K);
  char text[4096];
  snprintf(text, sizeof text, "net_param { %s } base_lr: 0.01 lr_policy: 'fixed'", net);
  Caffe__SolverParameter *p = tsf_parse_solver(text);
  ct_solver_opts o = {.continue_on_nonfinite = true, .quiet_nets = true};
  assert_int_equal(ct_solver_init(&s, p, &o, &ctx, &err), CT_OK);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  free(net);
  tsf_fill(s->net, g_x, g_y, N, D, K, 1);
  ct_net_blob(s->net, "x")->data[0] = NAN;
  assert_int_equal(ct_solver_step(s, 2, &err), CT_OK);
  assert_int_equal(s->iter, 2);
  ct_solver_free(s);
  ct_context_free(&ctx);
}

/* Solve snapshots every `snapshot` iterations and once more at the end. */
static void test_solve_snapshots(void **state) {
  const char *dir = tu_tmpdir("solver_solve");
  char rest[4600], path[4400];
  struct stat st;
  for (int after = 0; after < 2; after++) {
    snprintf(rest, sizeof rest,
             "base_lr: 0.01 lr_policy: 'fixed' max_iter: 7 snapshot: 3 random_seed: 1 "
             "snapshot_after_train: %s snapshot_prefix: '%s/s%d'",
             after ? "true" : "false", dir, after);
    ct_context ctx;
    ct_solver *s = quad_solver(&ctx, rest);
    ct_error err;
    assert_int_equal(ct_solver_solve(s, NULL, &err), CT_OK);
    assert_int_equal(s->iter, 7);
    assert_false(s->requested_early_exit);
    for (int it = 0; it <= 7; it++) {
      snprintf(path, sizeof path, "%s/s%d_iter_%d.caffemodel", dir, after, it);
      bool want = it == 3 || it == 6 || (after && it == 7);
      assert_int_equal(stat(path, &st) == 0, want);
    }
    /* resuming at 6 and solving again only runs iteration 6 */
    ct_context c2;
    ct_solver *r = quad_solver(&c2, rest);
    snprintf(path, sizeof path, "%s/s%d_iter_6.solverstate", dir, after);
    assert_int_equal(ct_solver_solve(r, path, &err), CT_OK);
    assert_int_equal(r->iter, 7);
    assert_memory_equal(s->net->flat_data, r->net->flat_data, s->net->flat_count * sizeof(float));
    ct_solver_free(r);
    ct_context_free(&c2);
    ct_solver_free(s);
    ct_context_free(&ctx);
  }
}

/* Nets from a prototxt file: include rules by phase, stage and level, with
 * train_state and test_state merged over the net's own state. */
static void test_net_file_states(void **state) {
  const char *dir = tu_tmpdir("solver_states");
  char net_path[4200], text[8192];
  snprintf(net_path, sizeof net_path, "%s/net.prototxt", dir);
  char *net = quad_net_text(N, D, K);
  snprintf(text, sizeof text,
           "%s"
           "state { stage: 'base' }\n"
           "layer { name: 'only_train' type: 'DummyData' top: 'a' include { phase: TRAIN }\n"
           "  dummy_data_param { shape { dim: 1 } } }\n"
           "layer { name: 'only_val' type: 'DummyData' top: 'b' include { stage: 'val' }\n"
           "  dummy_data_param { shape { dim: 1 } } }\n"
           "layer { name: 'deep' type: 'DummyData' top: 'c' include { min_level: 2 }\n"
           "  dummy_data_param { shape { dim: 1 } } }\n"
           "layer { name: 'not_base' type: 'DummyData' top: 'd' exclude { stage: 'base' }\n"
           "  dummy_data_param { shape { dim: 1 } } }\n",
           net);
  free(net);
  tu_write_file(net_path, text, strlen(text));
  snprintf(text, sizeof text,
           "net: '%s' base_lr: 0.1 lr_policy: 'fixed' test_iter: 1 test_iter: 1 "
           "test_interval: 10 train_state { level: 2 } test_state { stage: 'val' } "
           "test_state { level: 3 stage: 'x' }",
           net_path);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_solver *s;
  ct_error err;
  assert_int_equal(tsf_try_solver(text, &ctx, &s, &err), CT_OK);
  assert_int_equal(s->ntest_nets, 2);
  ct_net *t0 = s->test_nets[0], *t1 = s->test_nets[1];
  assert_true(ct_net_layer_index(s->net, "only_train") >= 0);
  assert_true(ct_net_layer_index(s->net, "only_val") < 0);
  assert_true(ct_net_layer_index(s->net, "deep") >= 0);
  assert_true(ct_net_layer_index(s->net, "not_base") < 0);
  assert_true(ct_net_layer_index(t0, "only_train") < 0);
  assert_true(ct_net_layer_index(t0, "only_val") >= 0);
  assert_true(ct_net_layer_index(t0, "deep") < 0);
  assert_true(ct_net_layer_index(t1, "only_val") < 0);
  assert_true(ct_net_layer_index(t1, "deep") >= 0);
  assert_true(ct_net_layer_index(t1, "not_base") < 0);
  ct_solver_free(s);
  ct_context_free(&ctx);
}

/* A test net layer named like a train net layer must have blobs of the same
 * shapes to share them. */
static void test_unshareable_test_net(void **state) {
  char *train = quad_net_text(N, D, K), *test = quad_net_text(N, D, K + 1);
  char text[8192];
  snprintf(text, sizeof text,
           "train_net_param { %s } test_net_param { %s } test_iter: 1 test_interval: 5 "
           "base_lr: 0.1 lr_policy: 'fixed'",
           train, test);
  free(train);
  free(test);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_solver *s;
  ct_error err;
  assert_int_equal(tsf_try_solver(text, &ctx, &s, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "test net #0: layer 'ip' blob 0 has shape 3 3 (9), the train net's "
                               "has 2 3 (6), so it cannot share its weights");
  assert_null(s);
  ct_context_free(&ctx);
}

/* `weights` copies trained layers into every net before training. */
static void test_weights_field(void **state) {
  const char *dir = tu_tmpdir("solver_weights");
  char rest[4600], model[4300];
  snprintf(rest, sizeof rest, "base_lr: 0.1 lr_policy: 'fixed' random_seed: 1 snapshot_prefix: '%s/w'",
           dir);
  ct_context c1, c2;
  ct_solver *a = quad_solver(&c1, rest);
  ct_error err;
  assert_int_equal(ct_solver_step(a, 2, &err), CT_OK);
  assert_int_equal(ct_solver_snapshot(a, &err), CT_OK);
  snprintf(model, sizeof model, "%s/w_iter_2.caffemodel", dir);
  snprintf(rest, sizeof rest,
           "base_lr: 0.1 lr_policy: 'fixed' random_seed: 9 weights: '%s' test_iter: 1 "
           "test_interval: 5",
           model);
  ct_solver *b = quad_solver(&c2, rest);
  assert_int_equal(b->iter, 0);
  for (int p = 0; p < 2; p++) {
    const ct_tensor *ta = tsf_param(a->net, "ip", p), *tb = tsf_param(b->net, "ip", p);
    assert_memory_equal(ta->data, tb->data, ta->count * sizeof(float));
    assert_memory_equal(ta->data, tsf_param(b->test_nets[0], "ip", p)->data,
                        ta->count * sizeof(float));
  }
  ct_solver_free(a);
  ct_solver_free(b);
  ct_context_free(&c1);
  ct_context_free(&c2);
}

/* average_loss smooths the displayed loss over the last iterations. */
static void test_average_loss(void **state) {
  ct_context ca, cb;
  ct_solver *a = quad_solver(&ca, "base_lr: 0.05 lr_policy: 'fixed' random_seed: 6");
  ct_solver *b = quad_solver(&cb, "base_lr: 0.05 lr_policy: 'fixed' random_seed: 6 average_loss: 3");
  ct_error err;
  float losses[5];
  for (int i = 0; i < 5; i++) {
    assert_int_equal(ct_solver_step(a, 1, &err), CT_OK);
    losses[i] = a->smoothed_loss;
  }
  assert_int_equal(ct_solver_step(b, 5, &err), CT_OK);
  double want = (losses[2] + losses[3] + losses[4]) / 3.0;
  assert_true(fabs(b->smoothed_loss - want) < 1e-5 * fabs(want));
  assert_true(fabs(b->smoothed_loss - losses[4]) > 1e-4 * fabs(want));
  ct_solver_free(a);
  ct_solver_free(b);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_log_lines),         cmocka_unit_test(test_test_loss_line),
      cmocka_unit_test(test_requests_and_signal), cmocka_unit_test(test_gradient_hook),
      cmocka_unit_test(test_nonfinite_loss),    cmocka_unit_test(test_solve_snapshots),
      cmocka_unit_test(test_net_file_states),   cmocka_unit_test(test_weights_field),
      cmocka_unit_test(test_average_loss),      cmocka_unit_test(test_unshareable_test_net),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
