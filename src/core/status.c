#include "core/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#include <unistd.h>

/* exit() runs LeakSanitizer's check; ct_exit_now runs it itself. */
#if defined(__SANITIZE_ADDRESS__)
#define CT_LEAK_CHECK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CT_LEAK_CHECK 1
#endif
#endif
#ifndef CT_LEAK_CHECK
#define CT_LEAK_CHECK 0
#endif
#if CT_LEAK_CHECK
#include <sanitizer/lsan_interface.h>
#endif

ct_status ct_error_setv(ct_error *err, ct_status code, const char *fmt, va_list ap) {
  if (err) {
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  }
  return code;
}

ct_status ct_error_set(ct_error *err, ct_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ct_error_setv(err, code, fmt, ap);
  va_end(ap);
  return code;
}

ct_status ct_error_prefix(ct_error *err, const char *fmt, ...) {
  if (!err) return CT_ERR_INVALID;
  char prefix[CT_ERROR_MSG_MAX / 2], old[CT_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, err->msg, sizeof old);
  size_t n = strlen(prefix);
  memcpy(err->msg, prefix, n);
  err->msg[n] = ':';
  err->msg[n + 1] = ' ';
  size_t room = sizeof err->msg - n - 3, m = strlen(old);
  if (m > room) m = room;
  memcpy(err->msg + n + 2, old, m);
  err->msg[n + 2 + m] = 0;
  return err->code;
}

void ct_error_clear(ct_error *err) {
  if (err) {
    err->code = CT_OK;
    err->msg[0] = '\0';
  }
}

const char *ct_status_name(ct_status code) {
  switch (code) {
    case CT_OK: return "ok";
    case CT_ERR_INVALID: return "invalid input";
    case CT_ERR_PARSE: return "parse error";
    case CT_ERR_IO: return "I/O error";
    case CT_ERR_NOMEM: return "out of memory";
    case CT_ERR_UNSUPPORTED: return "unsupported";
    case CT_ERR_DEVICE: return "device error";
    case CT_ERR_COMM: return "communication error";
    case CT_ERR_NOTFOUND: return "not found";
    case CT_ERR_NUMERIC: return "non-finite value";
    case CT_ERR_INTERRUPTED: return "interrupted";
  }
  return "unknown status";
}

static ct_abort_hook g_abort_hook;

void ct_set_abort_hook(ct_abort_hook hook) { g_abort_hook = hook; }

/* What both fatal paths do first: the message into msg, a FATAL line, the
 * hook (once: a hook that fails must not recurse). */
static void fatal_begin(const char *file, int line, const char *fmt, va_list ap, char *msg, size_t cap) {
  vsnprintf(msg, cap, fmt, ap);
  ct_log_write(CT_LOG_FATAL, file, line, "%s", msg);
  ct_abort_hook hook = g_abort_hook;
  g_abort_hook = NULL;
  if (hook) hook(msg);
}

CT_NORETURN void ct_abort(const char *file, int line, const char *fmt, ...) {
  char msg[CT_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  fatal_begin(file, line, fmt, ap, msg, sizeof msg);
  va_end(ap);
  abort();
}

CT_NORETURN void ct_exit_now(int code) {
  ct_log_set_file(NULL, NULL);
  fflush(NULL);
#if CT_LEAK_CHECK
  __lsan_do_leak_check();
#endif
  _exit(code);
}

CT_NORETURN void ct_fatal(const char *file, int line, const char *fmt, ...) {
  char msg[CT_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  fatal_begin(file, line, fmt, ap, msg, sizeof msg);
  va_end(ap);
  fprintf(stderr, "cortado: error: %s\n", msg);
  ct_exit_now(1);
}

void *ct_xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p) ct_fatal(__FILE__, __LINE__, "out of memory allocating %zu x %zu bytes", n, size);
  return p;
}

void *ct_xrealloc(void *p, size_t size) {
  void *q = realloc(p, size ? size : 1);
  if (!q) ct_fatal(__FILE__, __LINE__, "out of memory reallocating %zu bytes", size);
  return q;
}

char *ct_xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = ct_xcalloc(n, 1);
  memcpy(d, s, n);
  return d;
}
