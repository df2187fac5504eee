/* The local worker launcher (parallel/launch.h) with real processes: this
 * test program starts itself as the workers, which act as LAUNCH_TEST_MODE
 * says.  Every worker learns its rank and the count; a worker that fails
 * makes the launcher stop the others (SIGTERM) and name it; a worker that
 * ignores SIGTERM is killed after the grace; SIGHUP sent to the launcher
 * alone reaches every worker; extra variables reach the workers; the
 * caller's other children are not reaped. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#include "core/clock.h"
#include "parallel/launch.h"

static char *g_self;


/* ------------------------------------------------------------ the workers */

static int g_rank;
static const char *g_dir;

static void mark(const char *what, const char *text) {
  char path[4300];
  snprintf(path, sizeof path, "%s/%s_%d", g_dir, what, g_rank);
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static void on_term(int sig) {
  mark(sig == SIGHUP ? "hup" : "term", "1");
  _exit(0);
}

static void sleep_s(double s) {
  const double end = ct_monotonic_s() + s;
  while (ct_monotonic_s() < end) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
}

/* modes: "ok" (record rank, count and the extra variable, exit 0);
 * "fail" (rank 1 exits 3 once the others are ready for SIGTERM, which they
 * wait for);
 * "stubborn" (rank 1 exits 2 after 0.2 s, the others ignore SIGTERM and
 * sleep 60 s); "hup" (every worker waits for SIGHUP). */
static int worker_main(int rank, int count) {
  g_rank = rank;
  g_dir = getenv("LAUNCH_TEST_DIR");
  const char *mode = getenv("LAUNCH_TEST_MODE");
  if (!g_dir || !mode) return 9;
  char text[256];
  snprintf(text, sizeof text, "%d %d %s", rank, count, getenv("LAUNCH_TEST_EXTRA") ? getenv("LAUNCH_TEST_EXTRA") : "-");
  mark("ran", text);
  if (strcmp(mode, "ok") == 0) return 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  if (strcmp(mode, "fail") == 0) {
    if (rank == 1) { /* once the others can take SIGTERM */
      const double end = ct_monotonic_s() + 10;
      for (int r = 0; r < count && ct_monotonic_s() < end; r++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/ready_%d", g_dir, r);
        while (r != 1 && access(path, F_OK) != 0 && ct_monotonic_s() < end) sleep_s(0.01);
      }
      return 3;
    }
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    mark("ready", "1");
    sleep_s(30);
    return 4;
  }
  if (strcmp(mode, "stubborn") == 0) {
    if (rank == 1) {
      sleep_s(0.2);
      return 2;
    }
    sa.sa_handler = SIG_IGN;
    sigaction(SIGTERM, &sa, NULL);
    sleep_s(60);
    return 4;
  }
  if (strcmp(mode, "hup") == 0) {
    sa.sa_handler = on_term;
    sigaction(SIGHUP, &sa, NULL);
    mark("ready", "1");
    sleep_s(30);
    return 4;
  }
  return 9;
}

/* ------------------------------------------------------------ the tests */

static const char *setup_dir(const char *name, const char *mode) {
  const char *dir = tu_tmpdir(name);
  setenv("LAUNCH_TEST_DIR", dir, 1);
  setenv("LAUNCH_TEST_MODE", mode, 1);
  return dir;
}

static char *read_mark(const char *dir, const char *what, int rank) {
  char path[4300];
  snprintf(path, sizeof path, "%s/%s_%d", dir, what, rank);
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = calloc(1, 256);
  if (!fgets(buf, 256, f)) buf[0] = '\0';
  fclose(f);
  return buf;
}

static bool launch(int n, const char *const *extra, double grace, ct_launch_failure *f) {
  char *argv[2] = {g_self, NULL};
  return ct_launch_workers(g_self, argv, n, extra, grace, f);
}

static void test_every_worker_gets_its_rank(void **state) {
  const char *dir = setup_dir("launch_ok", "ok");
  setenv("LAUNCH_TEST_EXTRA", "old", 1); /* replaced by the launch's own */
  const char *extra[] = {"LAUNCH_TEST_EXTRA=new", NULL};
  ct_launch_failure f;
  assert_true(launch(3, extra, 5, &f));
  assert_int_equal(f.rank, -1);
  for (int r = 0; r < 3; r++) {
    char *got = read_mark(dir, "ran", r), want[64];
    snprintf(want, sizeof want, "%d 3 new", r);
    if (!got || strcmp(got, want) != 0) fail_msg("worker %d wrote '%s', want '%s'", r, got ? got : "(nothing)", want);
    free(got);
  }
  unsetenv("LAUNCH_TEST_EXTRA");
}

/* The caller's own child (started before, ending during the launch) is not
 * reaped by the launcher: its status is still the caller's to collect. */
static void test_other_children_are_left_alone(void **state) {
  setup_dir("launch_other_child", "ok");
  pid_t other = fork();
  assert_true(other >= 0);
  if (other == 0) _exit(42);
  sleep_s(0.1); /* it has ended: a zombie until waited for */
  ct_launch_failure f;
  assert_true(launch(2, NULL, 5, &f));
  int status = 0;
  assert_int_equal(waitpid(other, &status, 0), other);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 42);
}

/* A launch of n workers, grace_s, that must fail: the seconds it took. */
static double failed_launch(int n, double grace_s, ct_launch_failure *f) {
  const double t0 = ct_monotonic_s();
  assert_false(launch(n, NULL, grace_s, f));
  return ct_monotonic_s() - t0;
}

static void test_a_failing_worker_stops_the_others(void **state) {
  const char *dir = setup_dir("launch_fail", "fail");
  ct_launch_failure f;
  const double took = failed_launch(3, 20, &f);
  assert_int_equal(f.rank, 1);
  assert_string_equal(f.why, "exited with status 3");
  assert_true(took < 10.0); /* not the workers' 30 s */
  for (int r = 0; r < 3; r += 2) {
    char *t = read_mark(dir, "term", r);
    if (!t) fail_msg("worker %d did not get SIGTERM", r);
    free(t);
  }
}

static void test_a_worker_ignoring_sigterm_is_killed_after_the_grace(void **state) {
  setup_dir("launch_stubborn", "stubborn");
  ct_launch_failure f;
  const double took = failed_launch(2, 1.0, &f);
  assert_int_equal(f.rank, 1);
  assert_string_equal(f.why, "exited with status 2");
  printf("stopped after %.2f s (grace 1 s)\n", took);
  assert_true(took >= 1.0 && took < 10.0);
}

static void *send_hup_when_ready(void *arg) {
  const char *dir = arg;
  const double end = ct_monotonic_s() + 20;
  for (;;) {
    char *a = read_mark(dir, "ready", 0), *b = read_mark(dir, "ready", 1);
    bool both = a && b;
    free(a);
    free(b);
    if (both || ct_monotonic_s() > end) break;
    sleep_s(0.02);
  }
  kill(getpid(), SIGHUP);
  return NULL;
}

static void test_sighup_to_the_launcher_reaches_the_workers(void **state) {
  const char *dir = setup_dir("launch_hup", "hup");
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, send_hup_when_ready, (void *)dir), 0);
  ct_launch_failure f;
  const bool ok = launch(2, NULL, 5, &f);
  pthread_join(t, NULL);
  if (!ok) fail_msg("worker %d %s", f.rank, f.why);
  for (int r = 0; r < 2; r++) {
    char *h = read_mark(dir, "hup", r);
    if (!h) fail_msg("worker %d did not get SIGHUP", r);
    free(h);
  }
}

static void test_a_program_that_cannot_start_is_named(void **state) {
  setup_dir("launch_missing", "ok");
  char *argv[2] = {"/nonexistent/worker", NULL};
  ct_launch_failure f;
  assert_false(ct_launch_workers("/nonexistent/worker", argv, 2, NULL, 1, &f));
  /* posix_spawn reports the failed exec, or the child ends with 127 */
  assert_int_equal(f.rank, 0);
  if (!strstr(f.why, "could not be started") && !strstr(f.why, "exited with status 127"))
    fail_msg("unexpected: %s", f.why);
}

int main(int argc, char **argv) {
  int rank, count;
  if (ct_launched_worker(&rank, &count)) return worker_main(rank, count);
  g_self = argv[0];
  if (argc > 0 && argv[0][0] != '/') {
    static char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
      self[len] = '\0';
      g_self = self;
    }
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_worker_gets_its_rank),
      cmocka_unit_test(test_other_children_are_left_alone),
      cmocka_unit_test(test_a_failing_worker_stops_the_others),
      cmocka_unit_test(test_a_worker_ignoring_sigterm_is_killed_after_the_grace),
      cmocka_unit_test(test_sighup_to_the_launcher_reaches_the_workers),
      cmocka_unit_test(test_a_program_that_cannot_start_is_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
