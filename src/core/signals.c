#include "core/signals.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

void ct_signals_async_set(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGHUP);
  sigaddset(set, SIGTERM);
}

void ct_signals_block_async(sigset_t *old) {
  sigset_t set;
  ct_signals_async_set(&set);
  pthread_sigmask(SIG_BLOCK, &set, old);
}

void ct_signals_restore(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

/* ------------------------------------------------------------------ relay */

/* Carries out sig's disposition of now on this thread, as the kernel would
 * have on the thread it picked. */
static void deliver(int sig, siginfo_t *si) {
  struct sigaction cur;
  if (sigaction(sig, NULL, &cur) != 0) return;
  if (cur.sa_flags & SA_SIGINFO) {
    if (cur.sa_flags & SA_RESETHAND) signal(sig, SIG_DFL);
    if (cur.sa_sigaction) cur.sa_sigaction(sig, si, NULL);
    return;
  }
  if (cur.sa_handler == SIG_IGN) return;
  if (cur.sa_handler == SIG_DFL) {
    /* the default action of all three ends the process, killed by sig:
     * raised on this thread with sig unblocked, it is taken at once */
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    pthread_sigmask(SIG_BLOCK, &one, NULL);
    return;
  }
  if (cur.sa_flags & SA_RESETHAND) signal(sig, SIG_DFL);
  cur.sa_handler(sig);
}

#define RELAY_STACK_BYTES (256u * 1024u)

static void *relay_main(void *arg) {
  (void)arg;
  sigset_t set;
  ct_signals_async_set(&set);
  for (;;) {
    siginfo_t si;
    const int sig = sigwaitinfo(&set, &si);
    if (sig > 0) deliver(sig, &si);
  }
  return NULL;
}

/* The process whose relay runs (0: none): a child of fork has no relay
 * thread, and starts its own. */
static pid_t g_relay_pid;
static pthread_mutex_t g_relay_mu = PTHREAD_MUTEX_INITIALIZER;

static bool start_relay(void) {
  /* the relay blocks what it waits for (sigwaitinfo takes only blocked
   * signals): it inherits the mask of this moment */
  sigset_t old;
  ct_signals_block_async(&old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  /* a small stack: the handlers it runs are signal handlers, and under a
   * tight ulimit -v the default 8 MB would be taken from the pools that
   * need it (libgomp's team, OpenBLAS's buffers) */
  pthread_attr_setstacksize(&attr, RELAY_STACK_BYTES);
  pthread_t t;
  const int rc = pthread_create(&t, &attr, relay_main, NULL);
  pthread_attr_destroy(&attr);
  ct_signals_restore(&old);
  if (rc != 0) {
    LOG_WARNING("cannot start the thread that takes SIGINT/SIGHUP/SIGTERM (%s): their handlers may "
                "run on computing threads",
                strerror(rc));
    return false;
  }
  return true;
}

bool ct_signals_start_relay(void) {
  const pid_t self = getpid();
  if (__atomic_load_n(&g_relay_pid, __ATOMIC_ACQUIRE) == self) return true;
  pthread_mutex_lock(&g_relay_mu);
  bool ok = g_relay_pid == self || start_relay();
  if (ok) __atomic_store_n(&g_relay_pid, self, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_relay_mu);
  return ok;
}
