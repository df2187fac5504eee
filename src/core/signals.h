/* Asynchronous signals (SIGINT, SIGHUP, SIGTERM) never run a handler on a
 * thread that computes.
 *
 * A handler runs on the stack of whichever thread the kernel picks, below
 * that thread's stack pointer.  oneDNN's generated GEMM kernels (Debian 12
 * ships oneDNN 2.7; fixed upstream in 3.11, oneDNN issue #4845) point rsp
 * into a heap buffer while they run: a handler frame written there
 * corrupts the heap, and Ctrl-C during training aborted with "corrupted
 * size vs. prev_size" a few times in a hundred.  So:
 *  - threads that compute (OpenMP's workers, data-parallel workers, data
 *    threads) block these signals for good (ct_signals_block_async);
 *  - a thread that installs handlers and computes itself (the `cortado`
 *    command's main thread, Python's during a call into Cortado) blocks
 *    them too and starts the relay: a thread of its own that takes the
 *    signals with sigwaitinfo and carries out their current disposition on
 *    its own stack (a handler is called there with the real siginfo; the
 *    default action is taken; an ignored signal is dropped).
 * Threads Cortado does not start (OpenBLAS's workers, made before main)
 * may still take them: they do not run oneDNN's kernels. */
#ifndef CT_CORE_SIGNALS_H
#define CT_CORE_SIGNALS_H

#include <signal.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The signals this module keeps away from computing threads: SIGINT,
 * SIGHUP, SIGTERM. */
void ct_signals_async_set(sigset_t *set);

/* Blocks the asynchronous signals in the calling thread (and, by
 * inheritance, in the threads it creates from now on); the previous mask
 * into old when not NULL. */
void ct_signals_block_async(sigset_t *old);

/* Restores a mask saved by ct_signals_block_async. */
void ct_signals_restore(const sigset_t *old);

/* Starts the relay thread once per process (later calls return true at
 * once): from then on an asynchronous signal that reaches no thread with
 * it unblocked is taken by the relay and its disposition carried out there.
 * False (with a warning logged) when the thread cannot start: signals then
 * keep reaching handlers on whichever thread does not block them. */
bool ct_signals_start_relay(void);

#ifdef __cplusplus
}
#endif

#endif
