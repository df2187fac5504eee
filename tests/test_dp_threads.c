/* The data-parallel driver with CPU workers as threads of this process:
 * W workers of batch b end with the same parameters as one solver of batch
 * W*b on the same records (also with iter_size, small buckets and
 * --global_batch), a worker that fails stops the others, naming itself and
 * the cause, and stop/snapshot requests are acted on by all together. */
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "dp_fixture.h"
#include "net/net_load.h"
#include "parallel/dp.h"
#include "solvers/solver.h"

static Caffe__SolverParameter *read_solver(const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/solver.prototxt", dir);
  Caffe__SolverParameter *sp;
  ct_error err;
  if (ct_solver_param_read(path, &sp, &err) != CT_OK) fail_msg("%s", err.msg);
  return sp;
}

/* A .solverstate to resume from in train_threads and train_reference (NULL: none). */
static const char *g_resume;

/* One plain solver (no driver) over dir's solver file. */
static void train_reference(const char *dir) {
  Caffe__SolverParameter *sp = read_solver(dir);
  ct_context ctx;
  ct_error err;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 0, &err), CT_OK);
  ct_solver *s;
  if (ct_solver_init(&s, sp, NULL, &ctx, &err) != CT_OK) fail_msg("%s", err.msg);
  if (ct_solver_solve(s, g_resume, &err) != CT_OK) fail_msg("%s", err.msg);
  ct_solver_free(s);
  ct_context_free(&ctx);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
}

/* Bucket size of the driver in these tests: 0 (the default 25 MB: one
 * bucket for these small nets) or a few hundred bytes (several). */
static size_t g_bucket_bytes;

static ct_status train_threads(const char *dir, int workers, bool global_batch, ct_error *err) {
  Caffe__SolverParameter *sp = read_solver(dir);
  ct_dp_job job = {0};
  job.solver_param = sp;
  job.resume = g_resume;
  job.global_batch = global_batch;
  job.dp.timeout_s = 30;
  job.dp.bucket_bytes = g_bucket_bytes;
  ct_status st = ct_dp_train_threads(&job, NULL, workers, err);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
  return st;
}

static char *path_in(const char *dir, const char *name) {
  static char buf[4][4300];
  static int slot;
  char *p = buf[slot++ % 4];
  snprintf(p, 4300, "%s/%s", dir, name);
  return p;
}

/* W workers of batch b against one solver of batch W*b. */
static void check_equivalence(const char *name, int workers, int b, const char *extra) {
  dpf_equiv q;
  dpf_equiv_setup(&q, name, workers * b, b, extra);
  char small[4200];
  snprintf(small, sizeof small, "%s/small", q.base);
  mkdir(small, 0755);
  dpf_write_solver(small, q.lmdb, b, 6, 0, extra);
  train_reference(q.ref);
  train_reference(small);
  ct_error err;
  if (train_threads(q.dp, workers, false, &err) != CT_OK) fail_msg("%s", err.msg);
  double e = dpf_equiv_err(&q);
  printf("%s: %d workers x batch %d vs batch %d: max rel err %.3g\n", name, workers, b, workers * b, e);
  assert_true(e < 5e-5);
  /* the comparison can fail: one worker of batch b differs clearly */
  const char *model = "snap_iter_6.caffemodel";
  double e_small = dpf_caffemodel_rel_err(path_in(small, model), path_in(q.ref, model));
  assert_true(e_small > 1e-2);
  /* only the root snapshots */
  assert_int_equal(access(path_in(q.dp, "snap_iter_6.solverstate"), F_OK), 0);
}

static void test_two_workers_equal_one_with_double_batch(void **state) {
  check_equivalence("dp_threads_2", 2, 4, NULL);
}

static void test_three_workers_equal_one_with_triple_batch(void **state) {
  check_equivalence("dp_threads_3", 3, 3, NULL);
}

static void test_iter_size_reduces_once_per_iteration(void **state) {
  check_equivalence("dp_threads_iter_size", 2, 3, "iter_size: 2");
}

/* 256-byte buckets: the gradient (a few hundred floats) goes in several
 * all-reduces launched from the gradient hook during backward. */
static void test_small_buckets_during_backward(void **state) {
  g_bucket_bytes = 256;
  check_equivalence("dp_threads_buckets", 2, 4, NULL);
  check_equivalence("dp_threads_buckets_iter_size", 3, 2, "iter_size: 3");
  g_bucket_bytes = 0;
}

/* --global_batch: 2 workers given batch 8 train as 2 x 4, the same as the
 * plain batch of 8. */
static void test_global_batch_equals_plain_batch(void **state) {
  const char *base = tu_tmpdir("dp_threads_global");
  char lmdb[4200], ref[4200], dp[4200];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 40, -1);
  snprintf(ref, sizeof ref, "%s/ref", base);
  snprintf(dp, sizeof dp, "%s/dp", base);
  mkdir(ref, 0755);
  mkdir(dp, 0755);
  dpf_write_solver(ref, lmdb, 8, 4, 0, NULL);
  dpf_write_solver(dp, lmdb, 8, 4, 0, NULL);
  train_reference(ref);
  ct_error err;
  if (train_threads(dp, 2, true, &err) != CT_OK) fail_msg("%s", err.msg);
  const char *model = "snap_iter_4.caffemodel";
  assert_true(dpf_caffemodel_rel_err(path_in(dp, model), path_in(ref, model)) < 1e-4);
  /* 3 workers do not divide 8 */
  assert_int_equal(train_threads(dp, 3, true, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "--global_batch: layer 'data' (Data) has batch_size 8, which 3 workers do not divide");
}

/* Record 5 has a label out of range.  With 2 workers of batch 2, worker 1
 * reads positions 1, 3 (iteration 0) and 5, 7 (iteration 1): its forward
 * fails at iteration 1 while worker 0 waits for it in the all-reduce. */
static void test_failing_worker_stops_all_and_is_named(void **state) {
  const char *base = tu_tmpdir("dp_threads_fail");
  char lmdb[4200], dir[4200];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 20, 5);
  snprintf(dir, sizeof dir, "%s/run", base);
  mkdir(dir, 0755);
  dpf_write_solver(dir, lmdb, 2, 50, 1, NULL);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  ct_error err;
  ct_status st = train_threads(dir, 2, false, &err);
  clock_gettime(CLOCK_MONOTONIC, &b);
  assert_int_equal(st, CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "worker 1 (CPU) failed at iteration 1: layer 'loss' (SoftmaxWithLoss): label 7 at "
                      "index 0 is out of range [0, 3); the other workers were stopped");
  assert_true((double)(b.tv_sec - a.tv_sec) < 20.0);
  /* the snapshot of iteration 1 is there and whole; none after it */
  dpf_params p = dpf_read_caffemodel(path_in(dir, "snap_iter_1.caffemodel"));
  assert_true(p.n > 0);
  free(p.v);
  assert_int_not_equal(access(path_in(dir, "snap_iter_2.caffemodel"), F_OK), 0);
}

/* A snapshot taken by 2 workers resumes on 3 workers as it does on one
 * solver of the same global batch. */
static void test_snapshot_of_two_resumes_on_three(void **state) {
  const char *base = tu_tmpdir("dp_threads_resume");
  char lmdb[4200], first[4200], three[4200], one[4200], state_file[4300];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 45, -1);
  snprintf(first, sizeof first, "%s/first", base);
  snprintf(three, sizeof three, "%s/three", base);
  snprintf(one, sizeof one, "%s/one", base);
  mkdir(first, 0755);
  mkdir(three, 0755);
  mkdir(one, 0755);
  dpf_write_solver(first, lmdb, 3, 3, 0, NULL);
  dpf_write_solver(three, lmdb, 2, 6, 0, NULL);
  dpf_write_solver(one, lmdb, 6, 6, 0, NULL);
  ct_error err;
  if (train_threads(first, 2, false, &err) != CT_OK) fail_msg("%s", err.msg);
  snprintf(state_file, sizeof state_file, "%s/snap_iter_3.solverstate", first);
  g_resume = state_file;
  ct_status st = train_threads(three, 3, false, &err);
  if (st == CT_OK) train_reference(one);
  g_resume = NULL;
  if (st != CT_OK) fail_msg("%s", err.msg);
  const char *model = "snap_iter_6.caffemodel";
  double e = dpf_caffemodel_rel_err(path_in(three, model), path_in(one, model));
  assert_true(e < 5e-5);
  /* and it moved on from the snapshot */
  double moved = dpf_caffemodel_rel_err(path_in(three, model), path_in(first, "snap_iter_3.caffemodel"));
  assert_true(moved > 1e-3);
}

/* A stop-and-snapshot request (what SIGINT/SIGHUP send) reaches all workers
 * on the same iteration: the run ends cleanly, rank 0 snapshots once. */
static void *request_later(void *arg) {
  struct timespec ts = {0, 300000000};
  nanosleep(&ts, NULL);
  ct_dp_request(CT_SOLVER_ACTION_SNAPSHOT | CT_SOLVER_ACTION_STOP);
  return NULL;
}

static void test_requests_are_agreed_on(void **state) {
  const char *base = tu_tmpdir("dp_threads_request");
  char lmdb[4200], dir[4200];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 40, -1);
  snprintf(dir, sizeof dir, "%s/run", base);
  mkdir(dir, 0755);
  dpf_write_solver(dir, lmdb, 2, 100000000, 0, "display: 0 snapshot_after_train: false");
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, request_later, NULL), 0);
  ct_error err;
  ct_status st = train_threads(dir, 3, false, &err);
  pthread_join(t, NULL);
  if (st != CT_OK) fail_msg("%s", err.msg);
  assert_int_equal(dpf_count_files(dir, ".caffemodel"), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_workers_equal_one_with_double_batch),
      cmocka_unit_test(test_three_workers_equal_one_with_triple_batch),
      cmocka_unit_test(test_iter_size_reduces_once_per_iteration),
      cmocka_unit_test(test_small_buckets_during_backward),
      cmocka_unit_test(test_global_batch_equals_plain_batch),
      cmocka_unit_test(test_failing_worker_stops_all_and_is_named),
      cmocka_unit_test(test_requests_are_agreed_on),
      cmocka_unit_test(test_snapshot_of_two_resumes_on_three),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
