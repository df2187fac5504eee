#include "cli/signals.h"

#include <string.h>
#include <unistd.h>

bool ct_cli_signal_from_self(const siginfo_t *si) {
  return si && (si->si_code == SI_TKILL || si->si_code == SI_USER) && si->si_pid == getpid();
}

void ct_cli_die_self_signal(int sig) {
  static const char head[] = "cortado: error: ";
  static const char tail[] =
      " was raised inside this process by a library, not sent to it (OpenBLAS raises SIGINT when it "
      "cannot start its threads: too little memory, e.g. under ulimit -v, or too many threads; see "
      "its lines above)\n";
  const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
  (void)!write(2, head, sizeof head - 1);
  (void)!write(2, name, strlen(name));
  (void)!write(2, tail, sizeof tail - 1);
  _exit(1);
}

/* SIGINT's disposition when the process started: SIG_IGN in a background
 * job of a shell script, which a SIGINT from outside must keep. */
static volatile sig_atomic_t g_sigint_ignored;

static void on_sigint(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  if (ct_cli_signal_from_self(si)) ct_cli_die_self_signal(sig);
  if (g_sigint_ignored) return;
  signal(sig, SIG_DFL);
  raise(sig);
}

void ct_cli_install_self_signal_guard(void) {
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigint;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGINT, &sa, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
    g_sigint_ignored = 1;
}

/* Before the shared libraries' constructors (the executable's
 * .preinit_array runs first): OpenBLAS starts its threads in its
 * constructor and raises SIGINT when it cannot, before main. */
static void preinit(int argc, char **argv, char **envp) {
  (void)argc;
  (void)argv;
  (void)envp;
  ct_cli_install_self_signal_guard();
  /* a write past a file size limit (ulimit -f) fails with EFBIG and is
   * reported naming the file, instead of killing the process silently */
  signal(SIGXFSZ, SIG_IGN);
}
__attribute__((section(".preinit_array"), used)) static void (*const k_preinit)(int, char **, char **) = preinit;
