/* Local worker processes (see launch.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "parallel/launch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/settings.h"
#include "core/signals.h"

extern char **environ;

/* The running launch's workers, for the signal handler. */
static pid_t *volatile g_pids;
static volatile int g_n;

static void signal_all(const pid_t *pids, int n, int sig) {
  for (int i = 0; pids && i < n; i++)
    if (pids[i] > 0) kill(pids[i], sig);
}

static void forward(int sig, siginfo_t *info, void *ctx) {
  (void)ctx;
  /* a terminal's SIGINT/SIGHUP (si_code > 0: from the kernel) went to the
   * whole foreground group, the workers included */
  if (sig != SIGTERM && info && info->si_code > 0) return;
  /* marked, so that a worker tells it from the launcher's own SIGTERM */
  const union sigval v = {.sival_int = CT_LAUNCH_FORWARDED};
  pid_t *pids = g_pids;
  for (int i = 0; pids && i < g_n; i++)
    if (pids[i] > 0) sigqueue(pids[i], sig, v);
}

static const int k_forwarded[3] = {SIGINT, SIGHUP, SIGTERM};

static void install_forwarding(struct sigaction old[3]) {
  for (int i = 0; i < 3; i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(k_forwarded[i], &sa, &old[i]);
  }
}

static void restore_signals(const struct sigaction old[3]) {
  for (int i = 0; i < 3; i++) sigaction(k_forwarded[i], &old[i], NULL);
}

/* "NAME" of "NAME=VALUE" equals the one of `var`. */
static bool same_name(const char *entry, const char *var) {
  const char *eq = strchr(var, '=');
  size_t len = eq ? (size_t)(eq - var) : strlen(var);
  return strncmp(entry, var, len) == 0 && entry[len] == '=';
}

/* environ less the variables we set, then ours: extra's, and the worker
 * variable in *worker_var (caller frees the array only). */
static char **child_env(const char *const *extra, char *worker_var) {
  size_t count = 0, nextra = 0;
  while (environ[count]) count++;
  while (extra && extra[nextra]) nextra++;
  char **env = ct_xcalloc(count + nextra + 2, sizeof *env);
  size_t k = 0;
  for (size_t i = 0; i < count; i++) {
    bool ours = same_name(environ[i], worker_var);
    for (size_t j = 0; j < nextra && !ours; j++) ours = same_name(environ[i], extra[j]);
    if (!ours) env[k++] = environ[i];
  }
  for (size_t j = 0; j < nextra; j++) env[k++] = (char *)extra[j];
  env[k++] = worker_var;
  env[k] = NULL;
  return env;
}

static void describe_exit(int status, char *buf, size_t size) {
  if (WIFEXITED(status)) snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(buf, size, "was ended by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else snprintf(buf, size, "ended (status 0x%x)", (unsigned)status);
}

bool ct_launch_workers(const char *path, char *const *argv, int n, const char *const *extra,
                       double grace_s, ct_launch_failure *failure) {
  CT_ASSERT(path && argv && argv[0] && n >= 1 && failure);
  failure->rank = -1;
  failure->why[0] = '\0';
  fflush(NULL); /* nothing buffered twice */
  pid_t *pids = ct_xcalloc((size_t)n, sizeof *pids);
  g_n = n;
  g_pids = pids;
  struct sigaction old[3];
  install_forwarding(old);
  /* the workers start with SIGINT/SIGHUP/SIGTERM unblocked, whatever this
   * thread blocks (core/signals.h) */
  posix_spawnattr_t attr;
  sigset_t child_mask, async;
  posix_spawnattr_init(&attr);
  pthread_sigmask(SIG_BLOCK, NULL, &child_mask);
  ct_signals_async_set(&async);
  for (int sig = 1; sig < NSIG; sig++)
    if (sigismember(&async, sig)) sigdelset(&child_mask, sig);
  posix_spawnattr_setsigmask(&attr, &child_mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  int running = 0;
  double deadline = 0;
  bool killed = false;
  for (int r = 0; r < n; r++) {
    char var[96];
    snprintf(var, sizeof var, CT_LAUNCH_WORKER_ENV "=%d,%d,%ld", r, n, (long)getpid());
    char **env = child_env(extra, var);
    int e = posix_spawn(&pids[r], path, NULL, &attr, argv, env);
    free(env);
    if (e != 0) {
      pids[r] = 0;
      failure->rank = r;
      snprintf(failure->why, sizeof failure->why, "could not be started: %s", strerror(e));
      signal_all(pids, n, SIGTERM);
      deadline = ct_monotonic_s() + grace_s;
      break;
    }
    running++;
  }
  /* each worker by its pid (never waitpid(-1): the caller's other
   * children are not ours to reap), polled every 10 ms */
  while (running > 0) {
    bool reaped = false;
    for (int r = 0; r < n; r++) {
      if (pids[r] <= 0) continue;
      int status = 0;
      pid_t pid = waitpid(pids[r], &status, WNOHANG);
      if (pid == 0 || (pid < 0 && errno == EINTR)) continue;
      pids[r] = 0; /* ended (or, pid < 0, not ours any more) */
      running--;
      reaped = true;
      const bool ok = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && failure->rank < 0) {
        failure->rank = r;
        if (pid > 0) describe_exit(status, failure->why, sizeof failure->why);
        else snprintf(failure->why, sizeof failure->why, "could not be waited for: %s", strerror(errno));
        signal_all(pids, n, SIGTERM);
        deadline = ct_monotonic_s() + grace_s;
      }
    }
    if (reaped) continue;
    if (failure->rank >= 0 && !killed && ct_monotonic_s() > deadline) { /* the grace is over */
      signal_all(pids, n, SIGKILL);
      killed = true;
    }
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  posix_spawnattr_destroy(&attr);
  restore_signals(old);
  g_pids = NULL;
  g_n = 0;
  free(pids);
  return failure->rank < 0;
}

bool ct_launched_worker(int *rank, int *count) {
  const char *w = ct_setting_text(CT_LAUNCH_WORKER_ENV);
  if (!w) return false;
  int r = -1, n = 0;
  long launcher = 0;
  if (sscanf(w, "%d,%d,%ld", &r, &n, &launcher) != 3 || n < 1 || r < 0 || r >= n) return false;
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if ((long)getppid() != launcher) _exit(1); /* the launcher died before the line above */
  *rank = r;
  *count = n;
  return true;
}
