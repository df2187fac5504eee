/* Building solvers: Caffe's checks on the SolverParameter with their exact
 * messages, and how test nets are counted.  Uses empty nets, so no layer
 * types are needed. */
#include <stdio.h>

#include "core/log.h"
#include "proto/textformat.h"
#include "solvers/solver.h"
#include "testutil.h"

static int setup(void **state) {
  ct_log_set_level(CT_LOG_WARNING);
  return 0;
}

/* Parses text as a SolverParameter and tries to build a solver from it. */
static ct_status try_init(const char *text, ct_solver **out, ct_error *err) {
  ProtobufCMessage *m;
  ct_error perr;
  if (ct_text_parse(&caffe__solver_parameter__descriptor, text, strlen(text), "solver", &m,
                    &perr) != CT_OK)
    fail_msg("%s", perr.msg);
  static ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_solver_opts o = {.quiet_nets = true};
  *out = NULL;
  ct_status st = ct_solver_init(out, (Caffe__SolverParameter *)m, &o, &ctx, err);
  protobuf_c_message_free_unpacked(m, NULL);
  return st;
}

static void expect_error(const char *text, ct_status code, const char *msg) {
  ct_solver *s;
  ct_error err;
  ct_status st = try_init(text, &s, &err);
  if (st == CT_OK) fail_msg("expected an error for: %s", text);
  assert_null(s);
  assert_int_equal(st, code);
  assert_string_equal(err.msg, msg);
}

#define OK_RULE "base_lr: 0.01 lr_policy: 'fixed' "

static void test_train_net_fields(void **state) {
  expect_error(OK_RULE, CT_ERR_INVALID,
               "SolverParameter must specify a train net using one of these fields: net, "
               "net_param, train_net, train_net_param");
  expect_error(OK_RULE "net_param { } train_net_param { }", CT_ERR_INVALID,
               "SolverParameter must not contain more than one of these fields specifying a "
               "train_net: net, net_param, train_net, train_net_param");
  expect_error(OK_RULE "net: 'a.prototxt' train_net: 'b.prototxt'", CT_ERR_INVALID,
               "SolverParameter must not contain more than one of these fields specifying a "
               "train_net: net, net_param, train_net, train_net_param");
}

static void test_test_net_counts(void **state) {
  expect_error(OK_RULE "train_net_param { } test_net_param { } test_interval: 10", CT_ERR_INVALID,
               "test_iter must be specified for each test network.");
  expect_error(OK_RULE "train_net_param { } test_iter: 5 test_interval: 10", CT_ERR_INVALID,
               "test_iter must be specified for each test network.");
  expect_error(OK_RULE "net_param { } test_net_param { } test_net_param { } test_iter: 5 "
               "test_interval: 10",
               CT_ERR_INVALID, "test_iter must be specified for each test network.");
  expect_error(OK_RULE "net_param { } test_iter: 5 test_iter: 5 test_state { } test_interval: 10",
               CT_ERR_INVALID, "test_state must be unspecified or specified once per test net.");
  expect_error(OK_RULE "net_param { } test_iter: 5", CT_ERR_INVALID,
               "test_interval must be > 0 when there are test nets (got 0)");

  /* a generic net serves every test_iter left after the explicit test nets */
  ct_solver *s;
  ct_error err;
  assert_int_equal(try_init(OK_RULE "net_param { name: 'g' } test_net_param { name: 't' } "
                            "test_iter: 1 test_iter: 2 test_iter: 3 test_interval: 10",
                            &s, &err),
                   CT_OK);
  assert_int_equal(s->ntest_nets, 3);
  assert_string_equal(s->test_nets[0]->name, "t");
  assert_string_equal(s->test_nets[1]->name, "g");
  assert_string_equal(s->test_nets[2]->name, "g");
  assert_int_equal(s->net->phase, CT_PHASE_TRAIN);
  for (int i = 0; i < 3; i++) assert_int_equal(s->test_nets[i]->phase, CT_PHASE_TEST);
  ct_solver_free(s);

  /* without a generic net, no test nets at all is fine */
  assert_int_equal(try_init(OK_RULE "train_net_param { }", &s, &err), CT_OK);
  assert_int_equal(s->ntest_nets, 0);
  assert_int_equal(s->iter, 0);
  ct_solver_free(s);
}

/* Caffe's NetState merge: TRAIN / TEST first, then the net's own state,
 * then train_state / test_state, where set fields win. */
static void test_net_state_phase(void **state) {
  ct_solver *s;
  ct_error err;
  assert_int_equal(try_init(OK_RULE "net_param { state { phase: TEST } } train_state { }", &s, &err),
                   CT_OK);
  assert_int_equal(s->net->phase, CT_PHASE_TEST);
  ct_solver_free(s);
  assert_int_equal(try_init(OK_RULE "net_param { state { phase: TEST } } "
                            "train_state { phase: TRAIN }",
                            &s, &err),
                   CT_OK);
  assert_int_equal(s->net->phase, CT_PHASE_TRAIN);
  ct_solver_free(s);
}

static void test_field_checks(void **state) {
  expect_error("base_lr: 0.01 lr_policy: 'stpe' net_param { }", CT_ERR_INVALID,
               "lr_policy: unknown policy 'stpe' (known: fixed, step, exp, inv, multistep, poly, "
               "sigmoid; did you mean 'step'?)");
  expect_error("base_lr: 0.01 net_param { }", CT_ERR_INVALID,
               "lr_policy: not set (one of fixed, step, exp, inv, multistep, poly, sigmoid)");
  expect_error(OK_RULE "type: 'Adma' net_param { }", CT_ERR_NOTFOUND,
               "unknown solver type 'Adma' (known types: SGD, Nesterov, AdaGrad, RMSProp, "
               "AdaDelta, Adam; did you mean 'Adam'?)");
  expect_error(OK_RULE "type: 'AdaGrad' momentum: 0.9 net_param { }", CT_ERR_INVALID,
               "momentum: must be 0 for solver type AdaGrad (got 0.9); AdaGrad keeps no momentum");
  expect_error(OK_RULE "type: 'RMSProp' rms_decay: 1.5 net_param { }", CT_ERR_INVALID,
               "rms_decay: must lie in [0, 1), got 1.5");
  expect_error(OK_RULE "average_loss: 0 net_param { }", CT_ERR_INVALID,
               "average_loss: must be at least 1, got 0");
  expect_error(OK_RULE "iter_size: 0 net_param { }", CT_ERR_INVALID,
               "iter_size: must be at least 1, got 0");
  expect_error(OK_RULE "weight_decay: 0.1 regularization_type: 'L3' net_param { }", CT_ERR_INVALID,
               "regularization_type: unknown type 'L3' (known types: L1, L2)");
  expect_error(OK_RULE "snapshot_format: HDF5 net_param { }", CT_ERR_UNSUPPORTED,
               "snapshot_format: HDF5 is not supported; use BINARYPROTO");
  expect_error(OK_RULE "snapshot: 100 net_param { }", CT_ERR_INVALID,
               "In solver params, snapshot is specified but snapshot_prefix is not");
  expect_error(OK_RULE "snapshot: 100 snapshot_prefix: '/nonexistent/folder/run' net_param { }",
               CT_ERR_IO,
               "Cannot write to snapshot prefix '/nonexistent/folder/run'.  Make sure that the "
               "directory exists and is writable.");
  /* an unused regularization_type is not checked, as in Caffe */
  ct_solver *s;
  ct_error err;
  assert_int_equal(try_init(OK_RULE "regularization_type: 'L3' net_param { }", &s, &err), CT_OK);
  ct_solver_free(s);
}

/* The snapshot prefix probe leaves nothing behind. */
static void test_prefix_probe(void **state) {
  const char *dir = tu_tmpdir("solver_probe");
  char text[4600];
  snprintf(text, sizeof text, OK_RULE "snapshot: 10 snapshot_prefix: '%s/run' net_param { }", dir);
  ct_solver *s;
  ct_error err;
  assert_int_equal(try_init(text, &s, &err), CT_OK);
  char cmd[4400];
  snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", dir);
  assert_int_equal(system(cmd), 0);
  char *f = ct_solver_snapshot_filename(s, ".caffemodel");
  char want[4300];
  snprintf(want, sizeof want, "%s/run_iter_0.caffemodel", dir);
  assert_string_equal(f, want);
  free(f);
  ct_solver_free(s);
}

static void test_missing_net_file(void **state) {
  expect_error(OK_RULE "net: '/nonexistent/net.prototxt'", CT_ERR_NOTFOUND,
               "/nonexistent/net.prototxt: cannot open: No such file or directory");
}

/* random_seed seeds the context RNG (plus the worker's rank). */
static void test_random_seed(void **state) {
  ct_solver *s;
  ct_error err;
  assert_int_equal(try_init(OK_RULE "random_seed: 42 net_param { }", &s, &err), CT_OK);
  ct_rng ref;
  ct_rng_seed(&ref, 42);
  assert_int_equal(ct_rng_next(&s->ctx->rng), ct_rng_next(&ref));
  assert_int_equal(s->ctx->seed, 42);
  ct_solver_free(s);
}

/* BVLC's own solver files are accepted (their nets swapped for an empty
 * one, their snapshot prefixes moved to a scratch folder), and read as
 * Caffe reads them. */
static void test_bvlc_solver_files(void **state) {
  const char *dir = tu_tmpdir("solver_bvlc");
  char net_path[4200], prefix[4200];
  snprintf(net_path, sizeof net_path, "%s/empty.prototxt", dir);
  snprintf(prefix, sizeof prefix, "%s/snap", dir);
  tu_write_file(net_path, "name: 'empty'\n", 14);
  const struct {
    const char *file, *type;
    ct_lr_policy policy;
    int ntest;
    ct_status status;
  } cases[] = {
      {"lenet_solver.prototxt", "SGD", CT_LR_POLICY_INV, 1, CT_OK},
      {"lenet_solver_adam.prototxt", "Adam", CT_LR_POLICY_FIXED, 1, CT_OK},
      {"lenet_solver_rmsprop.prototxt", "RMSProp", CT_LR_POLICY_INV, 1, CT_OK},
      {"lenet_adadelta_solver.prototxt", "AdaDelta", CT_LR_POLICY_FIXED, 1, CT_OK},
      {"lenet_multistep_solver.prototxt", "SGD", CT_LR_POLICY_MULTISTEP, 1, CT_OK},
      {"mnist_autoencoder_solver_adagrad.prototxt", "AdaGrad", CT_LR_POLICY_FIXED, 2, CT_OK},
      {"mnist_autoencoder_solver_nesterov.prototxt", "Nesterov", CT_LR_POLICY_STEP, 2, CT_OK},
      {"bvlc_alexnet_solver.prototxt", "SGD", CT_LR_POLICY_STEP, 1, CT_OK},
      {"bvlc_googlenet_solver.prototxt", "SGD", CT_LR_POLICY_STEP, 1, CT_OK},
      {"cifar10_quick_solver.prototxt", "SGD", CT_LR_POLICY_FIXED, 1, CT_OK},
      {"cifar10_full_solver.prototxt", NULL, 0, 0, CT_ERR_UNSUPPORTED},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ProtobufCMessage *m;
    ct_error err;
    if (ct_text_parse_file(&caffe__solver_parameter__descriptor, tu_fixture(cases[i].file), &m,
                           &err) != CT_OK)
      fail_msg("%s", err.msg);
    Caffe__SolverParameter *p = (Caffe__SolverParameter *)m;
    assert_non_null(p->net);
    free(p->net);
    p->net = strdup(net_path);
    free(p->snapshot_prefix);
    p->snapshot_prefix = strdup(prefix);
    ct_context ctx;
    assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
    ct_solver *s;
    ct_solver_opts o = {.quiet_nets = true};
    ct_status st = ct_solver_init(&s, p, &o, &ctx, &err);
    protobuf_c_message_free_unpacked(m, NULL);
    if (st != cases[i].status) fail_msg("%s: status %d (%s)", cases[i].file, st, err.msg);
    if (st != CT_OK) {
      assert_string_equal(err.msg, "snapshot_format: HDF5 is not supported; use BINARYPROTO");
      ct_context_free(&ctx);
      continue;
    }
    assert_string_equal(s->rule->type, cases[i].type);
    assert_int_equal(s->lr.policy, cases[i].policy);
    assert_int_equal(s->ntest_nets, cases[i].ntest);
    ct_solver_free(s);
    ct_context_free(&ctx);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_train_net_fields), cmocka_unit_test(test_test_net_counts),
      cmocka_unit_test(test_net_state_phase),  cmocka_unit_test(test_field_checks),
      cmocka_unit_test(test_prefix_probe),     cmocka_unit_test(test_missing_net_file),
      cmocka_unit_test(test_random_seed),      cmocka_unit_test(test_bvlc_solver_files),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
