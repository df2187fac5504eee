/* Running a call that reads memory-mapped files under a guard against
 * SIGSEGV and SIGBUS.
 *
 * A mapped file that is truncated (SIGBUS past its end) or damaged (a
 * library follows a garbage offset: SIGSEGV) would kill the process inside
 * the library that reads it.  ct_fault_guard_run runs fn(arg) with a
 * handler armed for the calling thread only: a fault while fn runs unwinds
 * (siglongjmp) back into ct_fault_guard_run, which returns the signal, and
 * the caller turns that into an error naming the file.  A fault anywhere
 * else (another thread, or this one outside a guarded call) goes on to the
 * handler that was installed before (AddressSanitizer's, or the default
 * action), so real bugs still crash with their report.
 *
 * Only for calls that read: an unwound call leaves whatever it was doing
 * unfinished (a read transaction is then aborted; nothing it wrote is
 * trusted).  Guards do not nest. */
#ifndef CT_CORE_FAULT_GUARD_H
#define CT_CORE_FAULT_GUARD_H

#ifdef __cplusplus
extern "C" {
#endif

/* Installs the process's SIGSEGV and SIGBUS handlers when they are not
 * installed (any more: a library or test harness may have replaced them
 * since; the replacement is what faults outside guards go to).  Call it
 * where guarded reading starts (a database open, a reader's start): a
 * syscall each, too slow for every read. */
void ct_fault_guard_arm(void);

/* Runs fn(arg); returns 0 when it returned, or SIGSEGV / SIGBUS when it
 * faulted (fn did not finish).  Without ct_fault_guard_arm before, a fault
 * is not caught. */
int ct_fault_guard_run(void (*fn)(void *arg), void *arg);

/* "SIGSEGV (a bad memory access)" / "SIGBUS (a read past the end of a
 * mapped file)" for messages (a static string). */
const char *ct_fault_guard_describe(int sig);

#ifdef __cplusplus
}
#endif

#endif
