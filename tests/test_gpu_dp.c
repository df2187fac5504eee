/* Data parallelism on two GPUs (skipped without two): `cortado train
 * --gpu=0,1` with batch b ends with the parameters of `--gpu=0` with batch
 * 2b (strict FP32, tolerance for the GPUs' summation orders), also with
 * iter_size, with worker processes (the default) and worker threads; the
 * per-bucket timing shows each bucket ready, started and done in order; a
 * worker that fails stops the other, naming itself and the cause, within
 * 60 s, as a process and as a thread; Ctrl-C stops both workers after the
 * same iteration; every worker process runs rank 0's convolution
 * algorithms. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "dp_fixture.h"
#include "gpu/gpu.h"

static void require_two_gpus(void) {
  tu_require_gpu();
  if (ct_gpu_device_count() < 2) {
    printf("fewer than 2 GPUs: skipped\n");
    exit(77);
  }
}

static int run_train(const char *solver, const char *flags, char **out) {
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "%s train --solver=%s %s 2>&1", tu_cortado_bin(), solver, flags);
  return tu_run(cmd, out);
}

static void check_equivalence(const char *name, int b, const char *extra, bool threads) {
  dpf_equiv e;
  dpf_equiv_setup(&e, name, 2 * b, b, extra);
  char *out = NULL;
  int rc = run_train(e.ref_solver, "--gpu=0 --math=fp32", &out);
  if (rc != 0) fail_msg("reference run failed (%d):\n%s", rc, out);
  free(out);
  rc = run_train(e.dp_solver, threads ? "--gpu=0,1 --math=fp32 --dp_workers=threads" : "--gpu=0,1 --math=fp32",
                 &out);
  if (rc != 0) fail_msg("--gpu=0,1 failed (%d):\n%s", rc, out);
  char world[160];
  snprintf(world, sizeof world, "Data-parallel training: 1 node, 2 ranks (%s), GPUs 0,1; transport NCCL",
           threads ? "threads of one process" : "processes, one per GPU");
  if (!strstr(out, world)) fail_msg("no '%s' in:\n%s", world, out);
  char want[128];
  dpf_effective_batch(want, sizeof want, 2, b, "GPUs", extra);
  if (!strstr(out, want)) fail_msg("no '%s' in:\n%s", want, out);
  free(out);
  double err = dpf_equiv_err(&e);
  printf("%s: 2 GPUs x batch %d vs 1 GPU x batch %d: max rel err %.3g\n", name, b, 2 * b, err);
  assert_true(err < 1e-4);
}

static void test_two_gpus_equal_one_with_double_batch(void **state) {
  require_two_gpus();
  check_equivalence("gpu_dp_2", 4, NULL, false);
}

static void test_two_gpu_threads_equal_one_with_double_batch(void **state) {
  require_two_gpus();
  check_equivalence("gpu_dp_2_threads", 4, NULL, true);
}

static void test_two_gpus_iter_size(void **state) {
  require_two_gpus();
  check_equivalence("gpu_dp_iter_size", 3, "iter_size: 2", false);
}

/* Small buckets (256 bytes) so that the tiny net has several; every timed
 * bucket is ready, then started, then done, and the log says so. */
static void test_bucket_timing_is_logged(void **state) {
  require_two_gpus();
  const char *base = tu_tmpdir("gpu_dp_timing");
  char lmdb[4200], dir[4200], solver[4300];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 40, -1);
  snprintf(dir, sizeof dir, "%s/run", base);
  mkdir(dir, 0755);
  dpf_write_solver(dir, lmdb, 4, 9, 0, NULL);
  snprintf(solver, sizeof solver, "%s/solver.prototxt", dir);
  char *out = NULL;
  int rc = run_train(solver, "--gpu=0,1 --bucket_mb=0.000244140625 --dp_timing=2", &out);
  if (rc != 0) fail_msg("--gpu=0,1 failed (%d):\n%s", rc, out);
  int timed = 0, buckets = 0;
  for (const char *p = strstr(out, "dp bucket "); p; p = strstr(p + 1, "dp bucket ")) {
    int b, n;
    double ready, start, done;
    if (sscanf(p, "dp bucket %d/%d [%*u, %*u) %*f MB: ready +%lf ms, start +%lf ms, done +%lf ms", &b,
               &n, &ready, &start, &done) != 5)
      fail_msg("cannot read the bucket line: %.200s", p);
    assert_true(n > 1);
    assert_true(ready >= 0 && start >= ready - 1e-3 && done >= start);
    buckets++;
  }
  for (const char *p = strstr(out, "dp timing, reduction "); p; p = strstr(p + 1, "dp timing, reduction "))
    timed++;
  assert_int_equal(timed, 2);
  assert_true(buckets >= 4);
  int iters = 0;
  for (const char *p = strstr(out, "dp iteration "); p; p = strstr(p + 1, "dp iteration ")) {
    double before, backward, after;
    if (sscanf(p, "dp iteration %*d: %lf ms from the previous iteration's end to backward (forward and the "
                  "gap), %lf ms backward, %lf ms after it",
               &before, &backward, &after) != 3)
      fail_msg("cannot read the iteration line: %.200s", p);
    assert_true(before > 0 && backward > 0 && after >= 0);
    iters++;
  }
  assert_int_equal(iters, 2);
  assert_non_null(strstr(out, "buckets of up to 0.0 MB"));
  free(out);
}

/* Worker 1 reads a record with a label out of range at iteration 1: the
 * run ends with status 1 within 60 s, naming the worker and the cause, and
 * rank 0's snapshot of iteration 1 is intact. */
static void check_failing_worker(const char *name, bool threads) {
  const char *base = tu_tmpdir(name);
  char lmdb[4200], dir[4200], solver[4300];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 20, 5);
  snprintf(dir, sizeof dir, "%s/run", base);
  mkdir(dir, 0755);
  dpf_write_solver(dir, lmdb, 2, 50, 1, NULL);
  snprintf(solver, sizeof solver, "%s/solver.prototxt", dir);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  char *out = NULL;
  int rc = run_train(solver, threads ? "--gpu=0,1 --dp_workers=threads" : "--gpu=0,1", &out);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  assert_int_equal(rc, 1);
  const char *cause = "worker 1 (GPU 1) failed at iteration 1: layer 'loss' (SoftmaxWithLoss): label 7 at "
                      "index 0 is out of range [0, 3)";
  const char *stopped = threads ? "[0, 3); the other workers were stopped"
                                : "worker 1 (GPU 1) exited with status 1; the other workers were stopped";
  if (!strstr(out, cause) || !strstr(out, stopped)) fail_msg("the failure is not named:\n%s", out);
  free(out);
  assert_true((double)(t1.tv_sec - t0.tv_sec) < 60.0);
  char snap[4300];
  snprintf(snap, sizeof snap, "%s/snap_iter_1.caffemodel", dir);
  dpf_params p = dpf_read_caffemodel(snap);
  assert_true(p.n > 0);
  free(p.v);
}

static void test_failing_gpu_worker_stops_both(void **state) {
  require_two_gpus();
  check_failing_worker("gpu_dp_fail", false);
}

static void test_failing_gpu_worker_thread_stops_both(void **state) {
  require_two_gpus();
  check_failing_worker("gpu_dp_fail_threads", true);
}

/* Ctrl-C (SIGINT to the launcher, forwarded to the worker processes) in
 * the middle of a long run: rank 0's stop travels in the next iteration's
 * all-reduces, both workers stop after the same iteration, and the run ends
 * cleanly (status 0; a worker left waiting for the other would end it
 * through the watchdog with status 1) with one snapshot, rank 0's. */
static void test_sigint_stops_both_workers_together(void **state) {
  require_two_gpus();
  const char *base = tu_tmpdir("gpu_dp_sigint");
  char lmdb[4200], dir[4200], solver[4300], log[4300], arg[4400];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 40, -1);
  snprintf(dir, sizeof dir, "%s/run", base);
  mkdir(dir, 0755);
  dpf_write_solver(dir, lmdb, 2, 100000000, 0, "snapshot_after_train: true");
  snprintf(solver, sizeof solver, "%s/solver.prototxt", dir);
  snprintf(log, sizeof log, "%s/train.log", dir);
  snprintf(arg, sizeof arg, "--solver=%s", solver);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(tu_cortado_bin(), "cortado", "train", arg, "--gpu=0,1", "--comm_timeout=30", (char *)NULL);
    _exit(127);
  }
  bool running = false;
  for (int i = 0; i < 600 && !running; i++) { /* up to 60 s for 200 iterations */
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    char *text = tu_read_file(log, NULL);
    running = text && strstr(text, "] Iteration 200 ");
    free(text);
  }
  kill(pid, SIGINT);
  int status = -1;
  for (int i = 0; i < 600; i++) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    status = -1;
  }
  if (status == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail_msg("the run did not end within 60 s of SIGINT");
  }
  char *text = tu_read_file(log, NULL);
  if (!running) fail_msg("training did not reach iteration 200:\n%s", text ? text : "");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("status %d after SIGINT:\n%s", status, text ? text : "");
  const char *stopped = strstr(text, "Snapshotting to binary proto file ");
  if (!stopped || !strstr(text, "Optimization stopped early."))
    fail_msg("no snapshot or early stop in:\n%s", text);
  int iter = -1;
  const char *name = strstr(stopped, "snap_iter_");
  assert_non_null(name);
  assert_int_equal(sscanf(name, "snap_iter_%d.caffemodel", &iter), 1);
  printf("SIGINT: both workers stopped after iteration %d\n", iter);
  assert_true(iter >= 200 && iter < 100000000);
  free(text);
  assert_int_equal(dpf_count_files(dir, ".caffemodel"), 1);
}

/* The thread id of the glog line at `line` ("I1122 10:15:01.123456 12345
 * file.c:10] ..."); false when it is not one. */
static bool glog_tid(const char *line, char id[32]) {
  char head[16], time[32];
  return sscanf(line, "%15s %31s %31s", head, time, id) == 3;
}

/* The cuDNN lines ("layer 'c1': cuDNN fwd ...") of the glog thread id tid
 * in out, from their "]" on, joined. */
static void conv_lines_of(const char *out, const char *tid, char *buf, size_t len) {
  buf[0] = '\0';
  for (const char *p = out; *p;) {
    const char *end = strchr(p, '\n');
    const size_t n = end ? (size_t)(end - p) : strlen(p);
    const char *msg = memchr(p, ']', n), *c = strstr(p, "': cuDNN ");
    char id[32];
    if (msg && c && c < p + n && glog_tid(p, id) && strcmp(id, tid) == 0) {
      assert_true(strlen(buf) + n + 2 < len);
      strncat(buf, msg, (size_t)(p + n - msg));
      strcat(buf, "\n");
    }
    p += n + (end != NULL);
  }
}

/* Worker processes run the convolution algorithms rank 0 chose: rank 1
 * takes rank 0's table instead of benchmarking (it says how many entries),
 * and both ranks log the same algorithms for every convolution. */
static void test_ranks_run_rank0s_conv_algorithms(void **state) {
  require_two_gpus();
  const char *dir = tu_tmpdir("gpu_dp_algos");
  char net[4200], solver[4200];
  snprintf(net, sizeof net, "%s/net.prototxt", dir);
  const char *text =
      "name: 'convs'\n"
      "layer { name: 'data' type: 'DummyData' top: 'x' top: 'label' dummy_data_param {\n"
      "  shape { dim: 8 dim: 3 dim: 20 dim: 20 } shape { dim: 8 }\n"
      "  data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 1 } } }\n"
      "layer { name: 'c1' type: 'Convolution' bottom: 'x' top: 'c1' convolution_param {\n"
      "  num_output: 16 kernel_size: 5 weight_filler { type: 'xavier' } } }\n"
      "layer { name: 'r1' type: 'ReLU' bottom: 'c1' top: 'c1' }\n"
      "layer { name: 'c2' type: 'Convolution' bottom: 'c1' top: 'c2' convolution_param {\n"
      "  num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' } } }\n"
      "layer { name: 'ip' type: 'InnerProduct' bottom: 'c2' top: 'y' inner_product_param {\n"
      "  num_output: 4 weight_filler { type: 'xavier' } } }\n"
      "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'y' bottom: 'label' top: 'loss' }\n";
  tu_write_file(net, text, strlen(text));
  snprintf(solver, sizeof solver, "%s/solver.prototxt", dir);
  char stext[4600];
  snprintf(stext, sizeof stext,
           "net: '%s'\nbase_lr: 0.01 lr_policy: 'fixed' max_iter: 4 display: 1\n"
           "snapshot_after_train: false solver_mode: GPU random_seed: 3\n",
           net);
  tu_write_file(solver, stext, strlen(stext));
  setenv("CORTADO_LOG_ALL_RANKS", "1", 1);
  char *out = NULL;
  int rc = run_train(solver, "--gpu=0,1", &out);
  unsetenv("CORTADO_LOG_ALL_RANKS");
  if (rc != 0) fail_msg("--gpu=0,1 failed (%d):\n%s", rc, out);
  const char *took = strstr(out, "took 2 cuDNN convolution algorithm choices from rank 0");
  if (!took) fail_msg("rank 1 did not take rank 0's 2 algorithm choices:\n%s", out);
  /* the two thread ids of lines naming c1's algorithms */
  char tids[2][32] = {"", ""};
  int ntids = 0;
  for (const char *p = strstr(out, "layer 'c1': cuDNN "); p && ntids < 2; p = strstr(p + 1, "layer 'c1': cuDNN ")) {
    const char *line = p;
    while (line > out && line[-1] != '\n') line--;
    char id[32];
    assert_true(glog_tid(line, id));
    if (ntids == 0 || strcmp(id, tids[0]) != 0) strcpy(tids[ntids++], id);
  }
  if (ntids != 2) fail_msg("not two ranks' algorithm lines:\n%s", out);
  static char a[8192], b[8192];
  conv_lines_of(out, tids[0], a, sizeof a);
  conv_lines_of(out, tids[1], b, sizeof b);
  if (strcmp(a, b) != 0 || !strstr(a, "'c2': cuDNN fwd"))
    fail_msg("the ranks run different algorithms:\n%s---\n%s", a, b);
  printf("both ranks: %s", a);
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_gpus_equal_one_with_double_batch),
      cmocka_unit_test(test_two_gpu_threads_equal_one_with_double_batch),
      cmocka_unit_test(test_two_gpus_iter_size),
      cmocka_unit_test(test_bucket_timing_is_logged),
      cmocka_unit_test(test_failing_gpu_worker_stops_both),
      cmocka_unit_test(test_failing_gpu_worker_thread_stops_both),
      cmocka_unit_test(test_sigint_stops_both_workers_together),
      cmocka_unit_test(test_ranks_run_rank0s_conv_algorithms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
