/* `cortado plot` (cmd_plot.c): training curves read from logs
 * (plot_logs.c) and drawn with cairo (plot_draw.c).
 *
 * A run is one log file.  Its curves, each against iterations and seconds:
 *   loss      the train loss (Caffe's "Iteration N ..., loss = X"; a CSV
 *             log's `loss`), and the test net's loss output (dashed);
 *   accuracy  the test net's accuracy output ("Test net output #k: NAME =
 *             V" whose NAME holds "acc"); a CSV log's `test_accuracy`
 *             (its `accuracy` when it has no test);
 *   lr        the learning rate ("Iteration N, lr = X"; `learning_rate`);
 *   rate      iterations per second ("(R iter/s, ..."; a CSV row's batches
 *             over its time_spent).
 * Seconds: from the first timestamped line of a Caffe log (glog's
 * "I1127 21:08:44.819004" prefix); a CSV log's cumulative_time_spent. */
#ifndef CT_CLI_PLOT_H
#define CT_CLI_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

typedef enum plot_y { PLOT_LOSS = 0, PLOT_ACCURACY, PLOT_LR, PLOT_RATE, PLOT_NY } plot_y;

/* Points of one curve. */
typedef struct plot_series {
  double *iter;  /* (n) */
  double *sec;   /* (n); NaN where the log gives no time */
  double *y;     /* (n) */
  size_t n, cap;
} plot_series;

typedef struct plot_run {
  char *label;              /* the file's base name without its extension */
  plot_series curve[PLOT_NY];
  plot_series test_loss;    /* drawn dashed on the loss chart */
} plot_run;

/* "loss", "accuracy", "lr", "rate". */
const char *plot_y_name(plot_y y);

/* Reads a Caffe-format log (Cortado's or BVLC Caffe's) or a Caffe2 CSV log
 * (csv_log.h: the "# Namespace" line or the header first) into run.
 * Errors: the file's (ct_file_read_all); CT_ERR_INVALID "PATH: no training
 * iterations found (a Caffe log or a Caffe2 CSV log)"; for a CSV log,
 * "PATH:LINE: ..." naming a missing column or a bad number. */
ct_status plot_run_read(const char *path, plot_run *run, ct_error *err);
void plot_run_free(plot_run *run);

/* Draws the charts ys[0..nys) (one under the other) of runs[0..nruns)
 * overlaid, each with axes and a legend, to path: a PNG or an SVG by its
 * extension; x in seconds when seconds, else iterations.  Errors:
 * CT_ERR_IO naming the path and cairo's message; CT_ERR_UNSUPPORTED in a
 * build without cairo. */
ct_status plot_draw(const char *path, const plot_run *runs, int nruns, const plot_y *ys, int nys,
                    bool seconds, ct_error *err);

/* The size of the image: width, and height per chart. */
#define PLOT_WIDTH 960
#define PLOT_CHART_HEIGHT 320

#endif
