/* The communicator interface on the host back ends: the "threads" back end
 * (collectives between threads, timeouts, aborts, cancellation) and the
 * local one; and --global_batch's division of batch sizes. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "testutil.h"

#include "net/net_load.h"
#include "parallel/comm.h"
#include "parallel/dp.h"
#include "proto/textformat.h"

#define MAXR 4

typedef struct rank_job {
  ct_comm *c;
  int (*body)(struct rank_job *j);
  int result;
  ct_status st;
  ct_error err;
  double seconds;
} rank_job;

static void *run_rank(void *arg) {
  rank_job *j = arg;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  j->result = j->body(j);
  clock_gettime(CLOCK_MONOTONIC, &b);
  j->seconds = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
  return NULL;
}

/* Runs body on n threads, rank i with its own threads communicator. */
static void run_ranks(int n, int (*body)(rank_job *), rank_job *jobs, double timeout_s,
                      const int *cancel) {
  ct_comm_threads_group *g = ct_comm_threads_group_create(n);
  pthread_t t[MAXR];
  for (int i = 0; i < n; i++) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].c = ct_comm_threads_create(g, i);
    ct_comm_set_watchdog(jobs[i].c, timeout_s, cancel);
    jobs[i].body = body;
  }
  ct_comm_threads_group_release(g);
  for (int i = 0; i < n; i++) assert_int_equal(pthread_create(&t[i], NULL, run_rank, &jobs[i]), 0);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < n; i++) ct_comm_free(jobs[i].c);
}

/* ------------------------------------------------------------ collectives */

#define NVAL 1237

static float g_out[MAXR][NVAL];

static int body_allreduce(rank_job *j) {
  float *buf = g_out[j->c->rank];
  for (int i = 0; i < NVAL; i++) buf[i] = (float)(j->c->rank + 1) * 0.1f + (float)i;
  j->st = ct_comm_allreduce(j->c, buf, NVAL, CT_COMM_SUM, NULL, &j->err);
  return 0;
}

static void test_threads_allreduce_sum_identical_on_all_ranks(void **state) {
  rank_job jobs[MAXR];
  for (int n = 1; n <= 3; n++) {
    run_ranks(n, body_allreduce, jobs, 10, NULL);
    for (int r = 0; r < n; r++) {
      assert_int_equal(jobs[r].st, CT_OK);
      for (int i = 0; i < NVAL; i++) {
        float want = 0.0f; /* the same order: rank 0 first */
        for (int k = 0; k < n; k++) want += (float)(k + 1) * 0.1f + (float)i;
        assert_true(memcmp(&g_out[r][i], &want, sizeof want) == 0);
      }
    }
  }
}

static int body_avg(rank_job *j) {
  float *buf = g_out[j->c->rank];
  for (int i = 0; i < NVAL; i++) buf[i] = (float)j->c->rank * 3.0f + (float)i;
  j->st = ct_comm_allreduce(j->c, buf, NVAL, CT_COMM_AVG, NULL, &j->err);
  return 0;
}

static void test_threads_allreduce_avg(void **state) {
  rank_job jobs[MAXR];
  run_ranks(3, body_avg, jobs, 10, NULL);
  for (int r = 0; r < 3; r++) {
    assert_int_equal(jobs[r].st, CT_OK);
    for (int i = 0; i < NVAL; i++) assert_float_equal(g_out[r][i], 3.0f + (float)i, 1e-4);
  }
}

static int body_broadcast_f64_barrier(rank_job *j) {
  float *buf = g_out[j->c->rank];
  for (int i = 0; i < NVAL; i++) buf[i] = (float)(j->c->rank * 1000 + i);
  j->st = ct_comm_broadcast(j->c, buf, NVAL, 1, NULL, &j->err);
  if (j->st != CT_OK) return 1;
  double d[2] = {1.0, (double)j->c->rank};
  j->st = ct_comm_allreduce_host_f64(j->c, d, 2, &j->err);
  if (j->st != CT_OK) return 2;
  if (d[0] != (double)j->c->size || d[1] != 3.0) return 3; /* 0 + 1 + 2 */
  j->st = ct_comm_barrier(j->c, &j->err);
  if (j->st != CT_OK) return 4;
  return ct_comm_wait(j->c, NULL, &j->err) == CT_OK ? 0 : 5;
}

static void test_threads_broadcast_host_f64_barrier(void **state) {
  rank_job jobs[MAXR];
  run_ranks(3, body_broadcast_f64_barrier, jobs, 10, NULL);
  for (int r = 0; r < 3; r++) {
    assert_int_equal(jobs[r].result, 0);
    for (int i = 0; i < NVAL; i++) assert_float_equal(g_out[r][i], (float)(1000 + i), 0);
  }
}

static void test_local_is_a_world_of_one(void **state) {
  ct_comm *c = ct_comm_local();
  assert_int_equal(c->size, 1);
  float v[3] = {1, 2, 3};
  double d = 5;
  ct_error err;
  assert_int_equal(ct_comm_allreduce(c, v, 3, CT_COMM_AVG, NULL, &err), CT_OK);
  assert_int_equal(ct_comm_allreduce_host_f64(c, &d, 1, &err), CT_OK);
  assert_float_equal(v[2], 3.0f, 0);
  assert_float_equal(d, 5.0, 0);
  ct_comm_free(c);
}

/* ------------------------------------------------------------ failures */

/* Rank 1 never joins: the others time out naming themselves. */
static int body_rank1_absent(rank_job *j) {
  if (j->c->rank == 1) return 0;
  float v = 1;
  j->st = ct_comm_allreduce(j->c, &v, 1, CT_COMM_SUM, NULL, &j->err);
  return 0;
}

static void test_threads_timeout_names_rank(void **state) {
  rank_job jobs[MAXR];
  run_ranks(2, body_rank1_absent, jobs, 0.3, NULL);
  assert_int_equal(jobs[0].st, CT_ERR_COMM);
  assert_string_equal(jobs[0].err.msg, "threads allreduce on rank 0: only 1 of 2 ranks arrived within 0.3 s");
  assert_true(jobs[0].seconds >= 0.25 && jobs[0].seconds < 5);
}

/* Rank 2 aborts: ranks 0 and 1, waiting in an all-reduce, fail at once
 * naming rank 2, long before the timeout. */
static int body_rank2_aborts(rank_job *j) {
  if (j->c->rank == 2) {
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    ct_comm_abort(j->c);
    return 0;
  }
  float v = 1;
  j->st = ct_comm_allreduce(j->c, &v, 1, CT_COMM_SUM, NULL, &j->err);
  return 0;
}

static void test_threads_abort_fails_the_others(void **state) {
  rank_job jobs[MAXR];
  run_ranks(3, body_rank2_aborts, jobs, 60, NULL);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(jobs[r].st, CT_ERR_COMM);
    char want[128];
    snprintf(want, sizeof want, "threads allreduce on rank %d: rank 2 aborted the communicator", r);
    assert_string_equal(jobs[r].err.msg, want);
    assert_true(jobs[r].seconds < 5);
  }
}

static int g_cancel;

static int body_cancelled(rank_job *j) {
  if (j->c->rank == 1) {
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    __atomic_store_n(&g_cancel, 1, __ATOMIC_RELEASE);
    return 0;
  }
  double d = 1;
  j->st = ct_comm_allreduce_host_f64(j->c, &d, 1, &j->err);
  return 0;
}

static void test_threads_cancel_flag_interrupts(void **state) {
  rank_job jobs[MAXR];
  g_cancel = 0;
  run_ranks(2, body_cancelled, jobs, 60, &g_cancel);
  assert_int_equal(jobs[0].st, CT_ERR_INTERRUPTED);
  assert_string_equal(jobs[0].err.msg, "threads allreduce (host) on rank 0: cancelled");
  assert_true(jobs[0].seconds < 5);
}

static void test_default_timeout_from_env(void **state) {
  setenv("CORTADO_COMM_TIMEOUT", "42.5", 1);
  assert_float_equal(ct_comm_default_timeout(), 42.5, 0);
  setenv("CORTADO_COMM_TIMEOUT", "nonsense", 1);
  assert_float_equal(ct_comm_default_timeout(), 300.0, 0);
  unsetenv("CORTADO_COMM_TIMEOUT");
  assert_float_equal(ct_comm_default_timeout(), 300.0, 0);
}

/* ------------------------------------------------------------ --global_batch */

static ct_status parse_solver(const char *text, Caffe__SolverParameter **sp, ct_error *err) {
  return ct_text_parse(&caffe__solver_parameter__descriptor, text, strlen(text), "s.prototxt",
                       (ProtobufCMessage **)sp, err);
}

static Caffe__SolverParameter *solver_with_net(const char *net_text) {
  char *text = ct_xcalloc(strlen(net_text) + 64, 1);
  sprintf(text, "base_lr: 0.1 net_param { %s }", net_text);
  Caffe__SolverParameter *sp = NULL;
  ct_error err;
  assert_int_equal(parse_solver(text, &sp, &err), CT_OK);
  free(text);
  return sp;
}

static void test_global_batch_divides_train_layers(void **state) {
  Caffe__SolverParameter *sp = solver_with_net(
      "layer { name: 'd' type: 'Data' top: 'x' top: 'y' data_param { source: 's' batch_size: 256 } "
      "  include { phase: TRAIN } } "
      "layer { name: 't' type: 'Data' top: 'x' top: 'y' data_param { source: 's' batch_size: 50 } "
      "  include { phase: TEST } } "
      "layer { name: 'dd' type: 'DummyData' top: 'z' dummy_data_param { shape { dim: 64 dim: 3 } } } "
      "layer { name: 'in' type: 'Input' top: 'w' input_param { shape { dim: 8 dim: 2 } } "
      "  exclude { phase: TEST } }");
  ct_error err;
  assert_int_equal(ct_dp_divide_batch(sp, 4, &err), CT_OK);
  const Caffe__NetParameter *np = sp->net_param;
  assert_int_equal(np->layer[0]->data_param->batch_size, 64);
  assert_int_equal(np->layer[1]->data_param->batch_size, 50); /* TEST only: untouched */
  assert_int_equal(np->layer[2]->dummy_data_param->shape[0]->dim[0], 16);
  assert_int_equal(np->layer[2]->dummy_data_param->shape[0]->dim[1], 3);
  assert_int_equal(np->layer[3]->input_param->shape[0]->dim[0], 2);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
}

/* The train net's layers are those the net builder keeps: an exclude rule
 * without a phase (a stage) excludes only under that stage, an include rule
 * with a stage includes only under it, and the solver's train_state (the
 * command line's --stage) is part of the train state. */
static void test_global_batch_follows_the_builders_rule(void **state) {
  static const char net[] =
      "layer { name: 'a' type: 'Input' top: 'x' input_param { shape { dim: 8 } } "
      "  exclude { stage: 'deploy' } } "
      "layer { name: 'b' type: 'Input' top: 'y' input_param { shape { dim: 8 } } "
      "  include { phase: TRAIN stage: 'big' } } "
      "layer { name: 'c' type: 'Input' top: 'z' input_param { shape { dim: 8 } } "
      "  exclude { phase: TRAIN min_level: 2 } }";
  static const int plain[3] = {4, 8, 4}, deploy_big[3] = {8, 4, 4}, level3[3] = {4, 8, 8};
  static const char *const rest[3] = {"", "train_state { stage: 'deploy' stage: 'big' }",
                                      "train_state { level: 3 }"};
  static const int *const want[3] = {plain, deploy_big, level3};
  for (int k = 0; k < 3; k++) {
    char text[1024];
    snprintf(text, sizeof text, "base_lr: 0.1 %s net_param { %s }", rest[k], net);
    Caffe__SolverParameter *sp = NULL;
    ct_error err;
    assert_int_equal(parse_solver(text, &sp, &err), CT_OK);
    Caffe__NetState st;
    ct_solver_train_state(sp, sp->net_param, &st);
    for (int i = 0; i < 3; i++)
      assert_int_equal(ct_net_state_includes(&st, sp->net_param->layer[i]), want[k][i] == 4);
    ct_net_state_clear(&st);
    assert_int_equal(ct_dp_divide_batch(sp, 2, &err), CT_OK);
    for (int i = 0; i < 3; i++)
      assert_int_equal(sp->net_param->layer[i]->input_param->shape[0]->dim[0], want[k][i]);
    protobuf_c_message_free_unpacked(&sp->base, NULL);
  }
}

static void test_global_batch_must_divide(void **state) {
  Caffe__SolverParameter *sp = solver_with_net(
      "layer { name: 'data' type: 'Data' top: 'x' data_param { source: 's' batch_size: 250 } }");
  ct_error err;
  assert_int_equal(ct_dp_divide_batch(sp, 3, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "--global_batch: layer 'data' (Data) has batch_size 250, which 3 workers do not divide");
  protobuf_c_message_free_unpacked(&sp->base, NULL);
  sp = solver_with_net("layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'x' }");
  assert_int_equal(ct_dp_divide_batch(sp, 2, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "--global_batch: the train net has no data layer with a batch size to divide");
  protobuf_c_message_free_unpacked(&sp->base, NULL);
}

/* Net files named by the solver are read in, test nets keeping Caffe's order. */
static void test_inline_nets_reads_files(void **state) {
  const char *dir = tu_tmpdir("dp_inline_nets");
  char a[4200], b[4200], text[9000];
  snprintf(a, sizeof a, "%s/a.prototxt", dir);
  snprintf(b, sizeof b, "%s/b.prototxt", dir);
  const char *na = "name: 'A' layer { name: 'd' type: 'Input' top: 'x' input_param { shape { dim: 6 } } }";
  const char *nb = "name: 'B'";
  tu_write_file(a, na, strlen(na));
  tu_write_file(b, nb, strlen(nb));
  snprintf(text, sizeof text,
           "base_lr: 0.1 train_net: '%s' test_net_param { name: 'P' } test_net: '%s' test_iter: 1 "
           "test_iter: 1",
           a, b);
  Caffe__SolverParameter *sp = NULL;
  ct_error err;
  assert_int_equal(parse_solver(text, &sp, &err), CT_OK);
  assert_int_equal(ct_dp_divide_batch(sp, 2, &err), CT_OK);
  assert_null(sp->train_net);
  assert_string_equal(sp->train_net_param->name, "A");
  assert_int_equal(sp->train_net_param->layer[0]->input_param->shape[0]->dim[0], 3);
  assert_int_equal(sp->n_test_net, 0);
  assert_int_equal(sp->n_test_net_param, 2);
  assert_string_equal(sp->test_net_param[0]->name, "P");
  assert_string_equal(sp->test_net_param[1]->name, "B");
  protobuf_c_message_free_unpacked(&sp->base, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_allreduce_sum_identical_on_all_ranks),
      cmocka_unit_test(test_threads_allreduce_avg),
      cmocka_unit_test(test_threads_broadcast_host_f64_barrier),
      cmocka_unit_test(test_local_is_a_world_of_one),
      cmocka_unit_test(test_threads_timeout_names_rank),
      cmocka_unit_test(test_threads_abort_fails_the_others),
      cmocka_unit_test(test_threads_cancel_flag_interrupts),
      cmocka_unit_test(test_default_timeout_from_env),
      cmocka_unit_test(test_global_batch_divides_train_layers),
      cmocka_unit_test(test_global_batch_must_divide),
      cmocka_unit_test(test_global_batch_follows_the_builders_rule),
      cmocka_unit_test(test_inline_nets_reads_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
