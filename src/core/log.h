/* Logging in glog's line format, so that Caffe's log parsers keep working:
 *
 *   I1122 10:15:01.123456 12345 solver.c:210] Iteration 100, loss = 0.3
 *
 * severity letter, month and day, wall time with microseconds, thread id,
 * the source file's base name and line.  Lines go to stderr and, when a log
 * file is set, to that file too.  Messages under the minimum level are
 * dropped (--log_level, or GLOG_minloglevel in the environment). */
#ifndef CT_CORE_LOG_H
#define CT_CORE_LOG_H

#include <stdarg.h>
#include <stdbool.h>

#include "core/status.h"

typedef enum ct_log_level {
  CT_LOG_INFO = 0,
  CT_LOG_WARNING = 1,
  CT_LOG_ERROR = 2,
  CT_LOG_FATAL = 3
} ct_log_level;

/* Reads GLOG_minloglevel and GLOG_log_dir-free defaults; call once at start.
 * Safe to call again. */
void ct_log_init_from_env(void);
void ct_log_set_level(ct_log_level min_level);
ct_log_level ct_log_get_level(void);
/* Also write every line to path (appending).  Returns CT_ERR_IO with a message
 * when the file cannot be opened.  NULL closes the current log file. */
ct_status ct_log_set_file(const char *path, ct_error *err);
/* Distributed runs silence INFO lines on ranks other than 0, unless
 * CORTADO_LOG_ALL_RANKS=1 was in the environment at ct_log_init_from_env
 * (every rank's lines then go out, each with its own thread id). */
void ct_log_set_quiet(bool quiet_info);
/* The same for the calling thread only (data-parallel worker threads other
 * than rank 0's). */
void ct_log_set_thread_quiet(bool quiet_info);

void ct_log_write(ct_log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void ct_log_writev(ct_log_level level, const char *file, int line, const char *fmt, va_list ap);

#define LOG_INFO(...) ct_log_write(CT_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define LOG_WARNING(...) ct_log_write(CT_LOG_WARNING, __FILE__, __LINE__, __VA_ARGS__)
#define LOG_ERROR(...) ct_log_write(CT_LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__)

#endif
