/* core/signals.h: SIGINT/SIGHUP/SIGTERM reach their handlers on the relay
 * thread, never on a thread that computes; the relay carries out each
 * disposition (handler, ignore, default).  The storm case is the
 * regression of Ctrl-C aborting training with "corrupted size vs.
 * prev_size": oneDNN 2.x's GEMM kernels point rsp into the heap, and a
 * handler frame pushed there corrupted it. */
#include "testutil.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/context.h"
#include "core/signals.h"
#include "layers/conv/conv_dnnl.h"

static atomic_int g_count;
static atomic_int g_on_main;
static atomic_int g_from_self;
static pthread_t g_main;

static void on_sig(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  if (pthread_equal(pthread_self(), g_main)) atomic_store(&g_on_main, 1);
  if (si && si->si_pid == getpid()) atomic_store(&g_from_self, 1);
  atomic_fetch_add(&g_count, 1);
}

static void install(int sig) {
  struct sigaction sa = {0};
  sa.sa_sigaction = on_sig;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(sig, &sa, NULL), 0);
}

static void wait_count(int at_least) {
  const double until = ct_monotonic_s() + 10.0;
  while (atomic_load(&g_count) < at_least && ct_monotonic_s() < until) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

static void test_relay_runs_the_handler_off_the_blocked_thread(void **state) {
  (void)state;
  g_main = pthread_self();
  install(SIGHUP);
  assert_true(ct_signals_start_relay());
  assert_true(ct_signals_start_relay()); /* once per process */
  sigset_t old;
  ct_signals_block_async(&old);
  atomic_store(&g_count, 0);
  kill(getpid(), SIGHUP);
  wait_count(1);
  assert_int_equal(atomic_load(&g_count), 1);
  assert_int_equal(atomic_load(&g_on_main), 0);
  assert_int_equal(atomic_load(&g_from_self), 1); /* the real siginfo */
  /* an ignored one is dropped */
  signal(SIGHUP, SIG_IGN);
  kill(getpid(), SIGHUP);
  struct timespec ts = {0, 50000000};
  nanosleep(&ts, NULL);
  assert_int_equal(atomic_load(&g_count), 1);
  ct_signals_restore(&old);
  signal(SIGHUP, SIG_DFL);
}

/* The default action still ends the process, killed by the signal. */
static void test_relay_takes_the_default_action(void **state) {
  (void)state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    signal(SIGTERM, SIG_DFL);
    if (!ct_signals_start_relay()) _exit(3);
    ct_signals_block_async(NULL);
    kill(getpid(), SIGTERM);
    sleep(10);
    _exit(0);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGTERM);
}

static atomic_int g_stop;

static void *storm(void *arg) {
  int *sent = arg;
  while (!atomic_load(&g_stop)) {
    kill(getpid(), SIGINT);
    (*sent)++;
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* SIGINTs without pause while the CPU context's GEMMs run on this thread
 * and OpenMP's team: every one handled on the relay, the heap intact, the
 * products unchanged. */
static void test_signal_storm_during_gemm(void **state) {
  (void)state;
  g_main = pthread_self();
  atomic_store(&g_count, 0);
  atomic_store(&g_on_main, 0);
  install(SIGINT);
  ct_context ctx;
  ct_error err;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, &err), CT_OK);
  assert_true(ct_signals_start_relay());
  sigset_t old;
  ct_signals_block_async(&old); /* what the command and cortado.h's calls do */
  const int M = 64, N = 500, K = 800;
  float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
  float *c0 = malloc(sizeof(float) * M * N), *c = malloc(sizeof(float) * M * N);
  for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
  for (int i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
  ct_conv_dnnl_gemm(false, false, M, N, K, 1.0f, a, b, 0.0f, c0);
  int sent = 0;
  atomic_store(&g_stop, 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, storm, &sent), 0);
  const double until = ct_monotonic_s() + 1.5;
  int rounds = 0;
  while (ct_monotonic_s() < until) {
    ct_conv_dnnl_gemm(false, true, N, M, K, 1.0f, b, a, 0.0f, c); /* another kernel: c^T */
    ct_conv_dnnl_gemm(false, false, M, N, K, 1.0f, a, b, 0.0f, c);
    for (int i = 0; i < M * N; i += 97) assert_true(fabsf(c[i] - c0[i]) <= 1e-4f * (1.0f + fabsf(c0[i])));
    void *p = malloc(4096 + (size_t)(rounds % 7) * 1024); /* the heap is used and checked */
    free(p);
    rounds++;
  }
  atomic_store(&g_stop, 1);
  pthread_join(t, NULL);
  wait_count(1);
  assert_true(sent > 100);
  assert_true(atomic_load(&g_count) >= 1);
  assert_int_equal(atomic_load(&g_on_main), 0);
  ct_signals_restore(&old);
  signal(SIGINT, SIG_DFL);
  free(a);
  free(b);
  free(c0);
  free(c);
  ct_context_free(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_relay_runs_the_handler_off_the_blocked_thread),
      cmocka_unit_test(test_relay_takes_the_default_action),
      cmocka_unit_test(test_signal_storm_during_gemm),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
