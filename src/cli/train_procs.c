/* `cortado train --gpu=0,1,...` as one process per GPU (see train.h).
 *
 * The launching process makes the NCCL id and starts its own executable
 * again, once per GPU, with the same arguments and two environment
 * variables:
 *
 *   CORTADO_DP_WORKER   "RANK,COUNT,PARENT_PID"
 *   CORTADO_DP_NCCL_ID  the NCCL unique id, in hex
 *
 * Each child then trains as worker RANK (ct_dp_train_process); rank 0 logs
 * and writes snapshots and the CSV log.  The launcher only waits: when a
 * worker fails it stops the others (SIGTERM, then SIGKILL after the stop
 * grace), and it passes on SIGTERM, and SIGINT/SIGHUP that a process sent
 * it alone (a terminal's Ctrl-C reaches the children directly). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/train.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/status.h"

extern char **environ;

static int g_argc;
static char **g_argv;

void ct_cli_set_argv(int argc, char **argv) {
  g_argc = argc;
  g_argv = argv;
}

#define WORKER_ENV "CORTADO_DP_WORKER"
#define ID_ENV "CORTADO_DP_NCCL_ID"

bool ct_cli_dp_worker(int *rank, int *count, ct_nccl_id *id) {
  const char *w = getenv(WORKER_ENV), *hex = getenv(ID_ENV);
  if (!w || !hex) return false;
  int r = -1, n = 0;
  long parent = 0;
  if (sscanf(w, "%d,%d,%ld", &r, &n, &parent) != 3 || n < 1 || r < 0 || r >= n ||
      strlen(hex) != 2 * sizeof id->bytes)
    return false;
  for (size_t i = 0; i < sizeof id->bytes; i++) {
    unsigned v;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return false;
    id->bytes[i] = (unsigned char)v;
  }
  /* end with the launcher, even when it is killed outright */
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if ((long)getppid() != parent) _exit(1);
  *rank = r;
  *count = n;
  return true;
}

/* ------------------------------------------------------------------ launcher */

static pid_t *g_pids;
static int g_n;

static void forward(int sig, siginfo_t *info, void *ctx) {
  (void)ctx;
  /* a terminal's signal went to the whole foreground group already */
  if (sig != SIGTERM && info && info->si_code > 0) return;
  for (int i = 0; i < g_n; i++)
    if (g_pids[i] > 0) kill(g_pids[i], sig);
}

static void install_forwarding(struct sigaction *old) {
  const int sigs[3] = {SIGINT, SIGHUP, SIGTERM};
  for (int i = 0; i < 3; i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sigs[i], &sa, &old[i]);
  }
}

static void restore_signals(const struct sigaction *old) {
  const int sigs[3] = {SIGINT, SIGHUP, SIGTERM};
  for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
}

/* environ without our variables, plus ours for worker `rank`; caller frees
 * the array and the two strings it made (the last two entries). */
static char **child_env(int rank, int n, const char *hex) {
  size_t count = 0;
  while (environ[count]) count++;
  char **env = ct_xcalloc(count + 3, sizeof *env);
  size_t k = 0;
  for (size_t i = 0; i < count; i++)
    if (strncmp(environ[i], WORKER_ENV "=", sizeof WORKER_ENV) != 0 &&
        strncmp(environ[i], ID_ENV "=", sizeof ID_ENV) != 0)
      env[k++] = environ[i];
  char buf[64];
  snprintf(buf, sizeof buf, WORKER_ENV "=%d,%d,%ld", rank, n, (long)getpid());
  env[k++] = ct_xstrdup(buf);
  char *id = ct_xcalloc(strlen(ID_ENV) + strlen(hex) + 2, 1);
  sprintf(id, ID_ENV "=%s", hex);
  env[k++] = id;
  env[k] = NULL;
  return env;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double grace_s(void) {
  const char *env = getenv("CORTADO_STOP_GRACE");
  double v = env ? atof(env) : 0.0;
  return v > 0 ? v : 20.0;
}

static void describe_exit(int status, char *buf, size_t size) {
  if (WIFEXITED(status)) snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(buf, size, "was ended by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else snprintf(buf, size, "ended (status 0x%x)", (unsigned)status);
}

int ct_cli_train_processes(const int *gpus, int n) {
  CT_ASSERT(g_argv != NULL && n >= 1);
  ct_error err;
  ct_nccl_id id;
  if (ct_nccl_unique_id(&id, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  char hex[2 * sizeof id.bytes + 1];
  for (size_t i = 0; i < sizeof id.bytes; i++) snprintf(hex + 2 * i, 3, "%02x", id.bytes[i]);
  fflush(NULL);

  g_pids = ct_xcalloc((size_t)n, sizeof *g_pids);
  g_n = n;
  struct sigaction old[3];
  install_forwarding(old);
  int failed = -1, failed_status = 0, running = 0;
  char why[160] = "";
  for (int r = 0; r < n; r++) {
    char **env = child_env(r, n, hex);
    int e = posix_spawn(&g_pids[r], "/proc/self/exe", NULL, NULL, g_argv, env);
    size_t k = 0;
    while (env[k]) k++;
    free(env[k - 1]);
    free(env[k - 2]);
    free(env);
    if (e != 0) {
      g_pids[r] = 0;
      failed = r;
      snprintf(why, sizeof why, "could not be started: %s", strerror(e));
      break;
    }
    running++;
  }
  double deadline = 0;
  bool killed = false;
  if (failed >= 0) {
    for (int i = 0; i < n; i++)
      if (g_pids[i] > 0) kill(g_pids[i], SIGTERM);
    deadline = now_s() + grace_s();
  }
  while (running > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, failed >= 0 ? WNOHANG : 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break; /* ECHILD: none left */
    }
    if (pid == 0) { /* stopping after a failure: the others have a grace */
      if (!killed && now_s() > deadline) {
        for (int i = 0; i < n; i++)
          if (g_pids[i] > 0) kill(g_pids[i], SIGKILL);
        killed = true;
      }
      struct timespec ts = {0, 10000000};
      nanosleep(&ts, NULL);
      continue;
    }
    int r = 0;
    while (r < n && g_pids[r] != pid) r++;
    if (r == n) continue;
    g_pids[r] = 0;
    running--;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && failed < 0) {
      failed = r;
      failed_status = status;
      describe_exit(status, why, sizeof why);
      for (int i = 0; i < n; i++)
        if (g_pids[i] > 0) kill(g_pids[i], SIGTERM);
      deadline = now_s() + grace_s();
    }
  }
  restore_signals(old);
  free(g_pids);
  g_pids = NULL;
  g_n = 0;
  if (failed < 0) return CT_EXIT_OK;
  (void)failed_status;
  return ct_cli_error(CT_EXIT_FAILURE, "worker %d (GPU %d) %s%s", failed, gpus[failed], why,
                      n > 1 ? "; the other workers were stopped" : "");
}
