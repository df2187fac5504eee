/* The Caffe2-style CSV training log (see csv_log.h). */
#include "solvers/csv_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"

struct ct_csv_log {
  FILE *f;
  char *path;
  long long epoch_size;
  double (*clock)(void);
  double start_s, last_s;   /* clock readings at open and at the last row */
  long long last_inputs;    /* cumulative_input_count of the last row (or the start) */
  long long last_batches;   /* cumulative_batch_count of the last row, -1 before any */
  bool started;             /* the observer has seen its first display */
  bool loss_scale;          /* ct_csv_log_opts.loss_scale */
};

void ct_csv_log_name(const char *expname, time_t t, char *buf, size_t len) {
  struct tm tm;
  localtime_r(&t, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d_%H%M%S", &tm);
  snprintf(buf, len, "%s_%s.csv", expname, stamp);
}

static bool is_directory(const char *path) {
  size_t n = strlen(path);
  if (n > 0 && path[n - 1] == '/') return true;
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The file to write: path itself, or the generated name inside it. */
static ct_status resolve_path(const ct_csv_log_opts *o, char **out, ct_error *err) {
  if (!o->path || !*o->path) return ct_error_set(err, CT_ERR_INVALID, "CSV log: no file or directory given");
  if (!is_directory(o->path)) {
    *out = ct_xstrdup(o->path);
    return CT_OK;
  }
  if (!o->expname || !*o->expname)
    return ct_error_set(err, CT_ERR_INVALID, "CSV log: a run name is needed to name a file in %s", o->path);
  if (mkdir(o->path, 0777) != 0 && errno != EEXIST)
    return ct_error_set(err, CT_ERR_IO, "CSV log: cannot create the directory %s: %s", o->path, strerror(errno));
  char name[512];
  ct_csv_log_name(o->expname, o->start_time ? o->start_time : time(NULL), name, sizeof name);
  size_t n = strlen(o->path);
  const char *sep = o->path[n - 1] == '/' ? "" : "/";
  size_t len = n + strlen(sep) + strlen(name) + 1;
  *out = ct_xcalloc(len, 1);
  snprintf(*out, len, "%s%s%s", o->path, sep, name);
  return CT_OK;
}

/* Flushes after a line and reports a failed write. */
static ct_status flush_line(ct_csv_log *log, int printed, ct_error *err) {
  if (printed < 0 || fflush(log->f) != 0 || ferror(log->f))
    return ct_error_set(err, CT_ERR_IO, "CSV log %s: write failed: %s", log->path, strerror(errno));
  return CT_OK;
}

ct_status ct_csv_log_open(ct_csv_log **out, const ct_csv_log_opts *o, ct_error *err) {
  *out = NULL;
  char *path;
  CT_TRY(resolve_path(o, &path, err));
  FILE *f = fopen(path, "w");
  if (!f) {
    ct_status st = ct_error_set(err, CT_ERR_IO, "CSV log %s: cannot create the file: %s", path, strerror(errno));
    free(path);
    return st;
  }
  ct_csv_log *log = ct_xcalloc(1, sizeof *log);
  log->f = f;
  log->path = path;
  log->epoch_size = o->epoch_size;
  log->clock = o->clock ? o->clock : ct_monotonic_s;
  log->last_batches = -1;
  log->loss_scale = o->loss_scale;
  int printed = fprintf(f, "# %s\n%s%s\n", o->params ? o->params : "", CT_CSV_LOG_HEADER,
                        o->loss_scale ? CT_CSV_LOG_LOSS_SCALE_COLUMNS : "");
  ct_status st = flush_line(log, printed, err);
  if (st != CT_OK) {
    ct_csv_log_close(log);
    return st;
  }
  log->start_s = log->last_s = log->clock();
  *out = log;
  return CT_OK;
}

const char *ct_csv_log_path(const ct_csv_log *log) { return log->path; }

void ct_csv_log_set_start(ct_csv_log *log, long long input_count) { log->last_inputs = input_count; }

ct_status ct_csv_log_write(ct_csv_log *log, const ct_csv_log_row *row, ct_error *err) {
  const double now = log->clock();
  const double spent = now - log->last_s, total = now - log->start_s;
  const long long inputs = row->cumulative_input_count - log->last_inputs;
  const double per_sec = spent > 0 ? (double)inputs / spent : 0.0;
  log->last_s = now;
  log->last_inputs = row->cumulative_input_count;
  log->last_batches = row->cumulative_batch_count;
  int printed = fprintf(log->f, "%.6f,%.6f,%lld,%lld,%lld,%.3f,%.7g,%lld,%.7g,%.7g,%.7g", spent, total,
                        inputs, row->cumulative_input_count, row->cumulative_batch_count, per_sec,
                        row->accuracy, row->epoch, row->learning_rate, row->loss, row->test_accuracy);
  if (printed >= 0 && log->loss_scale)
    printed = fprintf(log->f, ",%.7g,%u", row->loss_scale, row->skipped_updates);
  if (printed >= 0) printed = fputc('\n', log->f) == EOF ? -1 : 1;
  return flush_line(log, printed, err);
}

void ct_csv_log_close(ct_csv_log *log) {
  if (!log) return;
  if (log->f && fclose(log->f) != 0) LOG_ERROR("CSV log %s: close failed: %s", log->path, strerror(errno));
  free(log->path);
  free(log);
}

/* ------------------------------------------------------------------ observer */

/* The index of net's output blob called "accuracy", else of the first
 * whose name contains "accuracy", else -1 (an index into net->output_ids). */
static int accuracy_output(const ct_net *net) {
  int loose = -1;
  for (int j = 0; j < net->noutputs; j++) {
    const char *name = net->blobs[net->output_ids[j]]->name;
    if (strcmp(name, "accuracy") == 0) return j;
    if (loose < 0 && strstr(name, "accuracy")) loose = j;
  }
  return loose;
}

static double train_accuracy(const ct_net *net) {
  int j = accuracy_output(net);
  if (j < 0) return -1.0;
  const ct_tensor *t = net->blobs[net->output_ids[j]];
  if (t->count == 0) return -1.0;
  float *v = ct_xcalloc(t->count, sizeof(float));
  ct_tensor_download(t, v);
  double a = v[0];
  free(v);
  return a;
}

/* The latest test's accuracy of the first test net: test_scores hold one
 * value per output value, in output order. */
static double test_accuracy(const ct_solver *s) {
  if (s->ntest_nets < 1 || s->ntest_scores[0] == 0) return -1.0;
  const ct_net *net = s->test_nets[0];
  int want = accuracy_output(net);
  if (want < 0) return -1.0;
  int idx = 0;
  for (int j = 0; j < want; j++) idx += (int)net->blobs[net->output_ids[j]]->count;
  return idx < s->ntest_scores[0] ? s->test_scores[0][idx] : -1.0;
}

ct_status ct_csv_log_on_display(void *user, const ct_solver_display *d, ct_error *err) {
  ct_csv_log *log = user;
  const long long inputs = (long long)d->iter * d->inputs_per_iter;
  if (!log->started) {
    log->started = true;
    if (log->last_batches < 0) ct_csv_log_set_start(log, (long long)d->start_iter * d->inputs_per_iter);
  }
  if (d->iter <= d->start_iter || d->iter <= log->last_batches) return CT_OK;
  ct_csv_log_row row = {.cumulative_input_count = inputs,
                        .cumulative_batch_count = d->iter,
                        .accuracy = train_accuracy(d->solver->net),
                        .epoch = log->epoch_size > 0 && inputs > 0 ? (inputs - 1) / log->epoch_size : -1,
                        .learning_rate = d->lr,
                        .loss = d->loss,
                        .test_accuracy = test_accuracy(d->solver),
                        .loss_scale = d->loss_scale,
                        .skipped_updates = d->skipped};
  return ct_csv_log_write(log, &row, err);
}
