/* Values restored from a .solverstate are checked against the solver and
 * net before anything changes: a crafted current_step (past the multistep
 * stepvalues: an out-of-bounds read in the rate; negative: rates like
 * 1e+26), a negative iter or one past max_iter, non-finite history values,
 * an RNG state no generator can be in, and a data position past any epoch
 * are errors naming the file and the field. */
#include "proto/io.h"
#include "test_solver_fixture.h"

static int setup(void **state) {
  (void)state;
  tsf_require_layers();
  ct_log_set_level(CT_LOG_ERROR);
  return 0;
}

#define SOLVER_REST                                                                         \
  "type: 'SGD' momentum: 0.9 lr_policy: 'multistep' stepvalue: 2 stepvalue: 4 gamma: 0.5 " \
  "base_lr: 0.02 random_seed: 77 max_iter: 10 snapshot_prefix: '%s'"

typedef struct fixture {
  char prefix[4200];
  char good[4300];  /* a real state at iteration 3 */
  char path[4300];  /* where the edited copies go */
  ct_context ctx;
  ct_solver *s;     /* a fresh solver of the same definition */
} fixture;

static ct_solver *make_solver(ct_context *ctx, const char *prefix) {
  char rest[4600];
  snprintf(rest, sizeof rest, SOLVER_REST, prefix);
  assert_int_equal(ct_context_init(ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  char *net = quad_net_text(4, 3, 2);
  ct_solver *s = tsf_solver(net, rest, ctx);
  free(net);
  return s;
}

static void fixture_init(fixture *f, const char *name) {
  const char *dir = tu_tmpdir(name);
  snprintf(f->prefix, sizeof f->prefix, "%s/run", dir);
  snprintf(f->good, sizeof f->good, "%s_iter_3.solverstate", f->prefix);
  snprintf(f->path, sizeof f->path, "%s/edited.solverstate", dir);
  ct_context c;
  ct_solver *a = make_solver(&c, f->prefix);
  ct_error err;
  assert_int_equal(ct_solver_step(a, 3, &err), CT_OK);
  assert_int_equal(ct_solver_snapshot(a, &err), CT_OK);
  ct_solver_free(a);
  ct_context_free(&c);
  f->s = make_solver(&f->ctx, f->prefix);
}

static void fixture_free(fixture *f) {
  ct_solver_free(f->s);
  ct_context_free(&f->ctx);
}

static Caffe__SolverState *read_state(const char *path) {
  ProtobufCMessage *m;
  ct_error err;
  if (ct_proto_read_binary(&caffe__solver_state__descriptor, path, &m, &err) != CT_OK)
    fail_msg("%s", err.msg);
  return (Caffe__SolverState *)m;
}

static void write_state(const Caffe__SolverState *st, const char *path) {
  ct_error err;
  if (ct_proto_write_binary(&st->base, path, &err) != CT_OK) fail_msg("%s", err.msg);
}

/* Restores f->path into the fresh solver: the status must be
 * CT_ERR_INVALID with "<path>: <want>", and the solver unchanged. */
static void expect_refused(fixture *f, const char *want) {
  ct_solver *s = f->s;
  const size_t bytes = s->net->flat_count * sizeof(float);
  float *before = malloc(bytes);
  memcpy(before, s->net->flat_data, bytes);
  ct_error err;
  assert_int_equal(ct_solver_restore(s, f->path, &err), CT_ERR_INVALID);
  char msg[9000];
  snprintf(msg, sizeof msg, "%s: %s", f->path, want);
  assert_string_equal(err.msg, msg);
  assert_int_equal(s->iter, 0);
  assert_int_equal(s->current_step, 0);
  assert_memory_equal(before, s->net->flat_data, bytes);
  free(before);
}

/* The unedited state restores (the edits below are what makes them fail). */
static void test_good_state_restores(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f, "restore_values_good");
  ct_error err;
  assert_int_equal(ct_solver_restore(f.s, f.good, &err), CT_OK);
  assert_int_equal(f.s->iter, 3);
  assert_int_equal(f.s->current_step, 1);
  assert_int_equal(ct_solver_step(f.s, 7, &err), CT_OK);
  assert_int_equal(f.s->current_step, 2);
  assert_float_equal(f.s->rate, 0.02f * 0.25f, 1e-9);
  fixture_free(&f);
}

/* Past the 2 stepvalues of multistep: the rate read stepvalues[1000000]. */
static void test_current_step_past_stepvalues(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f, "restore_values_step_past");
  Caffe__SolverState *st = read_state(f.good);
  st->current_step = 1000000;
  write_state(st, f.path);
  expect_refused(&f, "current_step is 1000000, but lr_policy 'multistep' of this solver has 2 "
                     "stepvalues (current_step counts those passed: 0 to 2)");
  st->current_step = 3;
  write_state(st, f.path);
  expect_refused(&f, "current_step is 3, but lr_policy 'multistep' of this solver has 2 "
                     "stepvalues (current_step counts those passed: 0 to 2)");
  protobuf_c_message_free_unpacked(&st->base, NULL);
  fixture_free(&f);
}

/* Negative: gamma^-40 = 1.1e+12 times base_lr, silently. */
static void test_current_step_negative(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f, "restore_values_step_neg");
  Caffe__SolverState *st = read_state(f.good);
  st->current_step = -40;
  write_state(st, f.path);
  expect_refused(&f, "current_step is -40; it counts learning-rate steps taken and cannot be negative");
  protobuf_c_message_free_unpacked(&st->base, NULL);
  fixture_free(&f);
}

static void test_iter_out_of_range(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f, "restore_values_iter");
  Caffe__SolverState *st = read_state(f.good);
  st->iter = -5;
  write_state(st, f.path);
  expect_refused(&f, "iter is -5; an iteration count cannot be negative");
  st->iter = 2147483647;
  write_state(st, f.path);
  expect_refused(&f, "iter is 2147483647, past this solver's max_iter 10 (a state of another run, or "
                     "raise max_iter to continue it)");
  /* max_iter itself is a finished run: it restores */
  st->iter = 10;
  st->current_step = 2;
  write_state(st, f.path);
  ct_error err;
  assert_int_equal(ct_solver_restore(f.s, f.path, &err), CT_OK);
  assert_int_equal(f.s->iter, 10);
  protobuf_c_message_free_unpacked(&st->base, NULL);
  fixture_free(&f);
}

static void test_history_not_finite(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f, "restore_values_history");
  Caffe__SolverState *st = read_state(f.good);
  assert_int_equal(st->n_history, 2);
  assert_int_equal(st->history[1]->n_data, 2);
  st->history[1]->data[1] = INFINITY;
  write_state(st, f.path);
  expect_refused(&f, "history blob 1 holds a non-finite value (inf at index 1)");
  st->history[1]->data[1] = 0;
  st->history[0]->data[4] = NAN;
  write_state(st, f.path);
  expect_refused(&f, "history blob 0 holds a non-finite value (nan at index 4)");
  protobuf_c_message_free_unpacked(&st->base, NULL);
  fixture_free(&f);
}

static void test_rng_state_impossible(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f, "restore_values_rng");
  Caffe__SolverState *st = read_state(f.good);
  assert_int_equal(st->cortado_rng_state.len, CT_RNG_STATE_BYTES);
  uint8_t saved[CT_RNG_STATE_BYTES];
  memcpy(saved, st->cortado_rng_state.data, sizeof saved);
  memset(st->cortado_rng_state.data, 0, 32);
  write_state(st, f.path);
  expect_refused(&f, "cortado_rng_state is not a state Cortado writes (an all-zero generator)");
  memcpy(st->cortado_rng_state.data, saved, sizeof saved);
  st->cortado_rng_state.data[32] = 1;
  double nan = NAN;
  uint64_t bits;
  memcpy(&bits, &nan, 8);
  for (int b = 0; b < 8; b++) st->cortado_rng_state.data[40 + b] = (uint8_t)(bits >> (8 * b));
  write_state(st, f.path);
  expect_refused(&f, "cortado_rng_state is not a state Cortado writes (a non-finite spare value)");
  st->cortado_rng_state.len = 7;
  write_state(st, f.path);
  expect_refused(&f, "cortado_rng_state has 7 bytes, expected 48");
  protobuf_c_message_free_unpacked(&st->base, NULL);
  fixture_free(&f);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_state_restores),
      cmocka_unit_test(test_current_step_past_stepvalues),
      cmocka_unit_test(test_current_step_negative),
      cmocka_unit_test(test_iter_out_of_range),
      cmocka_unit_test(test_history_not_finite),
      cmocka_unit_test(test_rng_state_impossible),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
