/* A training log in the CSV form of Caffe2's experiment_util.ModelTrainerLog,
 * as its resnet50_trainer writes it, so that the plots and scripts made for
 * those logs read Cortado's:
 *
 *   # Namespace(base_learning_rate=0.1, batch_size=256, ...)
 *   time_spent,cumulative_time_spent,input_count,cumulative_input_count,cumulative_batch_count,inputs_per_sec,accuracy,epoch,learning_rate,loss,test_accuracy
 *   41.2,41.2,1280000,1280000,5000,31067.9,0.12,0,0.1,5.31,0.10
 *
 * The first line holds the run's parameters; the header follows at once
 * (Caffe2 writes it with the first row); then one row per report:
 *   time_spent, input_count, inputs_per_sec: since the previous row (or since
 *     the log was opened, and the iteration training started at);
 *   cumulative_*: since the log was opened (time) or since iteration 0
 *     (inputs and batches: a resumed run goes on counting);
 *   accuracy: the train net's output blob "accuracy" (else the first output
 *     whose name contains "accuracy"), -1 when it has none;
 *   epoch: the 0-based epoch the row's last input belongs to, so the row that
 *     closes the first epoch says 0, as Caffe2's does; -1 when the epoch
 *     size is unknown;
 *   learning_rate: the rate of the latest update; loss: the smoothed loss;
 *   test_accuracy: the first test net's accuracy output of the latest test,
 *     -1 without test nets (or before the first test).
 * Unlike Caffe2, whose rows say epoch * iterations for the inputs of epoch
 * epoch + 1, the counts are exact: after N updates of B inputs,
 * cumulative_batch_count is N and cumulative_input_count is N * B.
 *
 * The file is named like Caffe2's, <expname>_<YYYYmmdd_HHMMSS>.csv (Caffe2
 * wrote .log), when a directory is given; a file path is used as it is.
 * Every line is flushed as it is written. */
#ifndef CT_SOLVERS_CSV_LOG_H
#define CT_SOLVERS_CSV_LOG_H

#include <stddef.h>
#include <time.h>

#include "core/status.h"
#include "solvers/solver.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The header line (without its newline). */
#define CT_CSV_LOG_HEADER                                                                      \
  "time_spent,cumulative_time_spent,input_count,cumulative_input_count,cumulative_batch_count," \
  "inputs_per_sec,accuracy,epoch,learning_rate,loss,test_accuracy"

typedef struct ct_csv_log ct_csv_log;

typedef struct ct_csv_log_opts {
  /* Where to write: a directory (a path ending in '/' or naming an existing
   * directory) gets the generated name inside it (the directory itself is
   * created when missing, not its parents); anything else is the file
   * itself (created or truncated). */
  const char *path;
  const char *expname;     /* the run's name in generated file names, e.g.
                              "resnet50_gpu2_b256_L1000_lr0.10" */
  const char *params;      /* the first line's text after "# " (may be NULL: empty) */
  long long epoch_size;    /* inputs per epoch, for the epoch column; <= 0: unknown */
  time_t start_time;       /* the timestamp of generated names (local time); 0: now */
  double (*clock)(void);   /* seconds on a monotonic clock; NULL: CLOCK_MONOTONIC */
  /* Two more columns after test_accuracy (CT_CSV_LOG_LOSS_SCALE_COLUMNS):
   * loss scaling's scale after the row's last update (0: no loss scaling)
   * and the updates it skipped since the start of training. */
  bool loss_scale;
} ct_csv_log_opts;

#define CT_CSV_LOG_LOSS_SCALE_COLUMNS ",loss_scale,skipped_updates"

/* One row's values; the writer adds the times and the counts since the
 * previous row. */
typedef struct ct_csv_log_row {
  long long cumulative_input_count;
  long long cumulative_batch_count;
  double accuracy;       /* -1: none */
  long long epoch;       /* -1: unknown */
  double learning_rate;
  double loss;
  double test_accuracy;  /* -1: none */
  double loss_scale;     /* written with ct_csv_log_opts.loss_scale only */
  unsigned skipped_updates;
} ct_csv_log_row;

/* The generated file name "<expname>_YYYYmmdd_HHMMSS.csv" for time t (local
 * time) into buf (of size len; truncated to fit). */
void ct_csv_log_name(const char *expname, time_t t, char *buf, size_t len);

/* Opens the log as o says, writes the parameter line and the header, and
 * starts the clock.  Errors: CT_ERR_INVALID for an empty path (or an empty
 * expname with a directory); CT_ERR_IO naming the file when it cannot be
 * created or written.  Free with ct_csv_log_close. */
ct_status ct_csv_log_open(ct_csv_log **out, const ct_csv_log_opts *o, ct_error *err);

/* The path of the file being written (owned by the log). */
const char *ct_csv_log_path(const ct_csv_log *log);

/* Sets the input count the first row's input_count is taken from (a
 * resumed run: iteration x inputs per iteration).  Default 0. */
void ct_csv_log_set_start(ct_csv_log *log, long long input_count);

/* Appends one row.  Errors: CT_ERR_IO naming the file. */
ct_status ct_csv_log_write(ct_csv_log *log, const ct_csv_log_row *row, ct_error *err);

/* Closes the file; NULL is allowed.  A failure to close is logged. */
void ct_csv_log_close(ct_csv_log *log);

/* The solver observer (ct_solver_opts.on_display with display_user = the
 * log): a row for each display after the run's first iteration, with the
 * values described above.  Its first call sets the start from
 * d->start_iter.  Errors: those of ct_csv_log_write. */
ct_status ct_csv_log_on_display(void *log, const ct_solver_display *d, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
