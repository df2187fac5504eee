/* Status and error reporting.
 *
 * Two kinds of failure, two mechanisms:
 *  - a bug (a broken invariant inside Cortado) is caught by CT_ASSERT, which
 *    logs file:line and goes through the one abort path (ct_abort), whose hook
 *    a distributed run replaces with MPI_Abort or ncclCommAbort;
 *  - bad input (a file, a flag, a prototxt field, a failed library call) is
 *    returned as a ct_status with a message in a ct_error, never an abort.
 *
 * Functions that can fail on input take a `ct_error *err` last and return a
 * ct_status; on failure err->msg holds one human-readable line naming the file,
 * line and field where that is known.  err may be NULL when the caller does not
 * want the message. */
#ifndef CT_CORE_STATUS_H
#define CT_CORE_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
#define CT_NORETURN [[noreturn]]
extern "C" {
#else
#define CT_NORETURN _Noreturn
#endif

typedef enum ct_status {
  CT_OK = 0,
  CT_ERR_INVALID,     /* malformed input: a bad field, shape, flag or value */
  CT_ERR_PARSE,       /* a file that does not parse */
  CT_ERR_IO,          /* open/read/write/fsync/rename failed */
  CT_ERR_NOMEM,       /* an allocation failed */
  CT_ERR_UNSUPPORTED, /* valid input that this build cannot do */
  CT_ERR_DEVICE,      /* CUDA, cuBLAS, cuDNN or NCCL failed */
  CT_ERR_COMM,        /* a collective or rendezvous failed or timed out */
  CT_ERR_NOTFOUND,    /* a named thing (layer, blob, key, file) does not exist */
  CT_ERR_NUMERIC,     /* a NaN or infinite value where one must not be */
  CT_ERR_INTERRUPTED  /* stopped by a signal or by another worker */
} ct_status;

#define CT_ERROR_MSG_MAX 1024

typedef struct ct_error {
  ct_status code;
  char msg[CT_ERROR_MSG_MAX];
} ct_error;

/* Sets err (when not NULL) to code and the printf-style message; returns code
 * so that `return ct_error_set(err, CT_ERR_IO, "...")` reads naturally. */
ct_status ct_error_set(ct_error *err, ct_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
ct_status ct_error_setv(ct_error *err, ct_status code, const char *fmt, va_list ap);

/* Puts "prefix: " in front of the message already in err (e.g. a file name);
 * returns err->code.  A no-op when err is NULL. */
ct_status ct_error_prefix(ct_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears err to CT_OK with an empty message. */
void ct_error_clear(ct_error *err);

/* A short name for a status code ("invalid input", "I/O error", ...). */
const char *ct_status_name(ct_status code);

/* The one abort path.  Logs msg at FATAL level, calls the hook if one is set
 * (distributed runs use it to take the other workers down), then abort(). */
typedef void (*ct_abort_hook)(const char *msg);
void ct_set_abort_hook(ct_abort_hook hook);
CT_NORETURN void ct_abort(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A failure that no status can carry back (out of memory inside a
 * function that cannot fail): logs msg at FATAL level, calls the abort hook
 * (distributed runs take the other workers down), prints
 * "cortado: error: <msg>" and ends the process with status 1 through
 * ct_exit_now.  Not a bug, so no core dump; and no library destructors,
 * which can hang when memory is short (OpenBLAS joining threads that never
 * started). */
CT_NORETURN void ct_fatal(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Ends the process now with `code`: flushes every stdio stream (the logs,
 * CSV logs) and leaves through _exit, without atexit handlers or library
 * destructors.  The way out of every failing command (cli/main.c).  In
 * sanitizer builds the leak check runs first, as exit() would run it. */
CT_NORETURN void ct_exit_now(int code);

/* Bugs only: a broken invariant.  Never for input validation. */
#define CT_ASSERT(cond)                                                    \
  do {                                                                     \
    if (__builtin_expect(!(cond), 0))                                      \
      ct_abort(__FILE__, __LINE__, "Check failed: %s", #cond);             \
  } while (0)
#define CT_ASSERTF(cond, ...)                                              \
  do {                                                                     \
    if (__builtin_expect(!(cond), 0)) ct_abort(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/* Propagates a failed status from a call that already filled err. */
#define CT_TRY(expr)                         \
  do {                                       \
    ct_status ct_try_s_ = (expr);            \
    if (ct_try_s_ != CT_OK) return ct_try_s_; \
  } while (0)

/* calloc that treats exhaustion as fatal (ct_fatal: a message with the
 * size and status 1, never an abort); allocation sizes are bounded by
 * validated shapes, so running out is not recoverable input. */
void *ct_xcalloc(size_t n, size_t size);
void *ct_xrealloc(void *p, size_t size);
char *ct_xstrdup(const char *s);

#ifdef __cplusplus
}
#endif

#endif
