/* Signals of the command line: what a signal that the process raised itself
 * means.  OpenBLAS raises SIGINT when it cannot start its threads (too
 * little memory, too many threads); the default action would end Cortado
 * without a word of its own, and train's --sigint_effect would take it for
 * Ctrl-C and stop as if asked to. */
#ifndef CT_CLI_SIGNALS_H
#define CT_CLI_SIGNALS_H

#include <signal.h>
#include <stdbool.h>

/* Whether si describes a signal this process sent itself (raise, kill of
 * its own pid), not one from a terminal, a user or a scheduler. */
bool ct_cli_signal_from_self(const siginfo_t *si);

/* Async-signal-safe: writes "cortado: error: SIGINT was raised inside this
 * process by a library ..." to stderr and ends the process with status 1
 * (_exit: no destructors, which can hang in the state that raised it). */
void ct_cli_die_self_signal(int sig);

/* For every command: SIGINT that the process raised itself ends it with
 * that message; any other SIGINT does what it did when the process started
 * (nothing when ignored, as in a script's background job; else the default
 * action).  Installed before the shared libraries' constructors run (from
 * the executable's .preinit_array), since OpenBLAS raises its SIGINT in
 * its constructor, before main; safe to call again.  (The same early hook
 * ignores SIGXFSZ, so that a write past a file size limit is an error
 * naming the file, as a full disk is, not a silent death.) */
void ct_cli_install_self_signal_guard(void);

#endif
