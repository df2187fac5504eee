#include "core/log.h"

#include "core/settings.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static ct_log_level g_min_level = CT_LOG_INFO;
static bool g_quiet_info;
static bool g_all_ranks; /* CORTADO_LOG_ALL_RANKS=1: quiet settings are ignored */
static _Thread_local bool t_quiet_info;
static FILE *g_log_file;
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;

void ct_log_init_from_env(void) {
  const char *v = getenv("GLOG_minloglevel");
  if (v && *v) {
    int lvl = atoi(v);
    if (lvl < 0) lvl = 0;
    if (lvl > CT_LOG_FATAL) lvl = CT_LOG_FATAL;
    g_min_level = (ct_log_level)lvl;
  }
  g_all_ranks = ct_setting_bool("CORTADO_LOG_ALL_RANKS");
}

void ct_log_set_level(ct_log_level min_level) { g_min_level = min_level; }
ct_log_level ct_log_get_level(void) { return g_min_level; }
void ct_log_set_quiet(bool quiet_info) { g_quiet_info = quiet_info; }
void ct_log_set_thread_quiet(bool quiet_info) { t_quiet_info = quiet_info; }

ct_status ct_log_set_file(const char *path, ct_error *err) {
  pthread_mutex_lock(&g_log_mu);
  if (g_log_file) fclose(g_log_file);
  g_log_file = NULL;
  if (path) {
    g_log_file = fopen(path, "a");
    if (!g_log_file) {
      pthread_mutex_unlock(&g_log_mu);
      return ct_error_set(err, CT_ERR_IO, "%s: cannot open log file: %s", path, strerror(errno));
    }
  }
  pthread_mutex_unlock(&g_log_mu);
  return CT_OK;
}

void ct_log_writev(ct_log_level level, const char *file, int line, const char *fmt, va_list ap) {
  if (level < g_min_level && level != CT_LOG_FATAL) return;
  if (level == CT_LOG_INFO && !g_all_ranks && (g_quiet_info || t_quiet_info)) return;
  static const char letters[] = "IWEF";
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char head[128];
  snprintf(head, sizeof head, "%c%02d%02d %02d:%02d:%02d.%06ld %5ld %s:%d] ", letters[level],
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec,
           (long)syscall(SYS_gettid), base, line);
  char body[4096];
  vsnprintf(body, sizeof body, fmt, ap);
  pthread_mutex_lock(&g_log_mu);
  fprintf(stderr, "%s%s\n", head, body);
  fflush(stderr);
  if (g_log_file) {
    fprintf(g_log_file, "%s%s\n", head, body);
    fflush(g_log_file);
  }
  pthread_mutex_unlock(&g_log_mu);
}

void ct_log_write(ct_log_level level, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ct_log_writev(level, file, line, fmt, ap);
  va_end(ap);
}
