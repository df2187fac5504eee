/* Reading training logs for `cortado plot` (see plot.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/plot.h"
#include "core/fileio.h"

/* Logs larger than this are refused (a year of training logs a few MB). */
#define MAX_LOG_BYTES ((size_t)1 << 30)

const char *plot_y_name(plot_y y) {
  static const char *const names[PLOT_NY] = {"loss", "accuracy", "lr", "rate"};
  return y >= 0 && y < PLOT_NY ? names[y] : "?";
}

static void add_point(plot_series *s, double iter, double sec, double y) {
  if (!isfinite(y)) return;
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 64;
    s->iter = ct_xrealloc(s->iter, s->cap * sizeof *s->iter);
    s->sec = ct_xrealloc(s->sec, s->cap * sizeof *s->sec);
    s->y = ct_xrealloc(s->y, s->cap * sizeof *s->y);
  }
  s->iter[s->n] = iter;
  s->sec[s->n] = sec;
  s->y[s->n++] = y;
}

static void series_free(plot_series *s) {
  free(s->iter);
  free(s->sec);
  free(s->y);
  memset(s, 0, sizeof *s);
}

void plot_run_free(plot_run *run) {
  for (int y = 0; y < PLOT_NY; y++) series_free(&run->curve[y]);
  series_free(&run->test_loss);
  free(run->label);
  run->label = NULL;
}

/* --------------------------------------------------------------- Caffe logs */

/* Seconds of glog's "Lmmdd hh:mm:ss.uuuuuu" prefix (days of a 31-day month
 * grid: differences within a run are right across a month's end except by
 * whole days, which do not occur in one training log); NAN without one. */
static double glog_seconds(const char *line) {
  int mon, day, h, m;
  double s;
  if (!strchr("IWEF", line[0]) || sscanf(line + 1, "%2d%2d %d:%d:%lf", &mon, &day, &h, &m, &s) != 5)
    return NAN;
  return ((mon * 31.0 + day) * 24.0 + h) * 3600.0 + m * 60.0 + s;
}

typedef struct caffe_state {
  double t0;          /* the first timestamp (NAN: none yet) */
  double test_iter;   /* the iteration of the test being read (-1: none) */
  double test_sec;
  bool test_loss_seen, test_acc_seen; /* in the test being read */
} caffe_state;

static void caffe_line(plot_run *run, caffe_state *st, const char *line) {
  double t = glog_seconds(line);
  if (!isnan(t) && isnan(st->t0)) st->t0 = t;
  const double sec = isnan(t) ? NAN : t - st->t0;
  const char *p = strstr(line, "] ");
  p = p ? p + 2 : line;
  while (*p == ' ') p++;
  double it, v, rate;
  int n = 0;
  if (sscanf(p, "Iteration %lf, Testing net (#%*d)%n", &it, &n) == 1 && n > 0) {
    st->test_iter = it;
    st->test_sec = sec;
    st->test_loss_seen = st->test_acc_seen = false;
    return;
  }
  if (sscanf(p, "Iteration %lf, lr = %lf", &it, &v) == 2) {
    add_point(&run->curve[PLOT_LR], it, sec, v);
    return;
  }
  /* "Iteration N (R iter/s, Ss/K iters), loss = X" (Caffe 1.0, Cortado) or
   * "Iteration N, loss = X" (older Caffe) */
  if (sscanf(p, "Iteration %lf (%lf iter/s", &it, &rate) == 2) {
    if (rate > 0) add_point(&run->curve[PLOT_RATE], it, sec, rate); /* not iteration 0's */
    const char *l = strstr(p, "), loss = ");
    if (l && sscanf(l, "), loss = %lf", &v) == 1) add_point(&run->curve[PLOT_LOSS], it, sec, v);
    return;
  }
  if (sscanf(p, "Iteration %lf, loss = %lf", &it, &v) == 2) {
    add_point(&run->curve[PLOT_LOSS], it, sec, v);
    return;
  }
  char name[128];
  if (st->test_iter >= 0 && sscanf(p, "Test net output #%*d: %127s = %lf", name, &v) == 2) {
    if (strstr(name, "acc") && !st->test_acc_seen) {
      add_point(&run->curve[PLOT_ACCURACY], st->test_iter, st->test_sec, v);
      st->test_acc_seen = true;
    } else if (strstr(name, "loss") && !st->test_loss_seen) {
      add_point(&run->test_loss, st->test_iter, st->test_sec, v);
      st->test_loss_seen = true;
    }
  }
}

/* ----------------------------------------------------------------- CSV logs */

static const char *const csv_columns[] = {"cumulative_time_spent", "cumulative_batch_count",
                                          "time_spent", "accuracy", "learning_rate", "loss",
                                          "test_accuracy"};
enum { C_CUM_TIME, C_BATCHES, C_TIME, C_ACC, C_LR, C_LOSS, C_TEST_ACC, C_N };

static ct_status csv_read(const char *path, char *text, plot_run *run, ct_error *err) {
  int col[C_N];
  for (int c = 0; c < C_N; c++) col[c] = -1;
  bool header = false;
  double last_batches = 0;
  int lineno = 0;
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    lineno++;
    line[strcspn(line, "\r")] = '\0';
    if (line[0] == '#' || line[0] == '\0') continue;
    char *fields[64];
    int nf = 0;
    for (char *f = line; nf < 64; f++) {
      fields[nf++] = f;
      f = strchr(f, ',');
      if (!f) break;
      *f = '\0';
    }
    if (!header) {
      for (int c = 0; c < C_N; c++)
        for (int k = 0; k < nf; k++)
          if (strcmp(fields[k], csv_columns[c]) == 0) col[c] = k;
      for (int c = 0; c < C_N; c++)
        if (col[c] < 0)
          return ct_error_set(err, CT_ERR_INVALID, "%s:%d: the CSV log's header has no column %s", path,
                              lineno, csv_columns[c]);
      header = true;
      continue;
    }
    double v[C_N];
    for (int c = 0; c < C_N; c++) {
      char *end;
      v[c] = col[c] < nf ? strtod(fields[col[c]], &end) : NAN;
      if (col[c] >= nf || end == fields[col[c]] || *end)
        return ct_error_set(err, CT_ERR_INVALID, "%s:%d: column %s: expected a number", path, lineno,
                            csv_columns[c]);
    }
    const double it = v[C_BATCHES], sec = v[C_CUM_TIME];
    add_point(&run->curve[PLOT_LOSS], it, sec, v[C_LOSS]);
    add_point(&run->curve[PLOT_LR], it, sec, v[C_LR]);
    const double acc = v[C_TEST_ACC] >= 0 ? v[C_TEST_ACC] : v[C_ACC];
    if (acc >= 0) add_point(&run->curve[PLOT_ACCURACY], it, sec, acc);
    if (v[C_TIME] > 0) add_point(&run->curve[PLOT_RATE], it, sec, (it - last_batches) / v[C_TIME]);
    last_batches = it;
  }
  return CT_OK;
}

/* ------------------------------------------------------------------- runs */

static char *label_of(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  char *label = ct_xstrdup(base);
  char *dot = strrchr(label, '.');
  if (dot && dot != label) *dot = '\0';
  return label;
}

ct_status plot_run_read(const char *path, plot_run *run, ct_error *err) {
  memset(run, 0, sizeof *run);
  char *text;
  size_t len;
  CT_TRY(ct_file_read_all(path, &text, &len, MAX_LOG_BYTES, err));
  run->label = label_of(path);
  const char *first = text + strspn(text, " \t\r\n");
  ct_status st = CT_OK;
  if (strncmp(first, "# Namespace", 11) == 0 || strncmp(first, "time_spent,", 11) == 0) {
    st = csv_read(path, text, run, err);
  } else {
    caffe_state cs = {.t0 = NAN, .test_iter = -1};
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
      caffe_line(run, &cs, line);
  }
  free(text);
  if (st == CT_OK && run->curve[PLOT_LOSS].n == 0 && run->curve[PLOT_ACCURACY].n == 0 &&
      run->curve[PLOT_LR].n == 0)
    st = ct_error_set(err, CT_ERR_INVALID,
                      "%s: no training iterations found (a Caffe log or a Caffe2 CSV log)", path);
  if (st != CT_OK) plot_run_free(run);
  return st;
}
