#include "core/fault_guard.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <string.h>

#include "core/status.h"

static _Thread_local sigjmp_buf *t_guard;
static struct sigaction g_prev_segv, g_prev_bus;

static void on_fault(int sig, siginfo_t *si, void *uc) {
  sigjmp_buf *g = t_guard;
  if (g) {
    t_guard = NULL;
    siglongjmp(*g, sig);
  }
  /* not a guarded call: what was there before */
  const struct sigaction *prev = sig == SIGBUS ? &g_prev_bus : &g_prev_segv;
  if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
    prev->sa_sigaction(sig, si, uc);
    return;
  }
  if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
    prev->sa_handler(sig);
    return;
  }
  /* the default action: returning re-runs the faulting access */
  signal(sig, SIG_DFL);
}

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static bool is_ours(int sig) {
  struct sigaction cur;
  return sigaction(sig, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fault;
}

void ct_fault_guard_arm(void) {
  if (is_ours(SIGSEGV) && is_ours(SIGBUS)) return;
  pthread_mutex_lock(&g_mu);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  /* whoever replaced ours (a test harness, MPI) becomes what we chain to */
  if (!is_ours(SIGSEGV)) CT_ASSERT(sigaction(SIGSEGV, &sa, &g_prev_segv) == 0);
  if (!is_ours(SIGBUS)) CT_ASSERT(sigaction(SIGBUS, &sa, &g_prev_bus) == 0);
  pthread_mutex_unlock(&g_mu);
}

int ct_fault_guard_run(void (*fn)(void *arg), void *arg) {
  CT_ASSERTF(t_guard == NULL, "ct_fault_guard_run: guards do not nest");
  sigjmp_buf jb;
  int sig = sigsetjmp(jb, 1);
  if (sig != 0) return sig; /* unwound from on_fault, which cleared t_guard */
  t_guard = &jb;
  fn(arg);
  t_guard = NULL;
  return 0;
}

const char *ct_fault_guard_describe(int sig) {
  if (sig == SIGBUS) return "SIGBUS (a read past the end of a mapped file)";
  if (sig == SIGSEGV) return "SIGSEGV (a bad memory access)";
  return "a signal";
}
