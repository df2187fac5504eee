/* cortado plot: training curves from logs, drawn to a PNG or SVG file. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/plot.h"
#include "core/log.h"
#include "core/mem.h"

/* Most logs one plot overlays. */
#define MAX_RUNS 64

static const ct_flag_spec plot_flags[] = {
    {"out", CT_FLAG_STRING, NULL,
     "The image to write (required): a PNG, or an SVG when the name ends in .svg.",
     .meta = "FILE.png|FILE.svg"},
    {"x", CT_FLAG_STRING, "iters", "What the horizontal axis counts.", .choices = "iters|seconds"},
    {"y", CT_FLAG_STRING, "loss,accuracy",
     "The charts, one under the other, separated by ',': loss (train, and the test loss "
     "dashed), accuracy (test), lr (the learning rate), rate (iterations per second).",
     .meta = "LIST"},
};

/* --y into ys; CT_ERR_INVALID naming a bad entry. */
static ct_status parse_ys(const char *text, plot_y *ys, int *nys, ct_error *err) {
  *nys = 0;
  char *copy = ct_xstrdup(text);
  ct_status st = CT_OK;
  for (char *save = NULL, *w = strtok_r(copy, ",", &save); w && st == CT_OK; w = strtok_r(NULL, ",", &save)) {
    int y = 0;
    while (y < PLOT_NY && strcmp(w, plot_y_name((plot_y)y)) != 0) y++;
    if (y == PLOT_NY)
      st = ct_error_set(err, CT_ERR_INVALID, "--y: unknown chart '%.40s' (loss, accuracy, lr or rate)", w);
    else if (*nys < PLOT_NY)
      ys[(*nys)++] = (plot_y)y;
  }
  free(copy);
  if (st == CT_OK && *nys == 0) st = ct_error_set(err, CT_ERR_INVALID, "--y: no chart named");
  return st;
}

static int plot_run_cmd(const ct_cli_args *args) {
  ct_error err;
  const char *out = ct_cli_string(args, "out");
  if (!out || !*out) return ct_cli_error(CT_EXIT_USAGE, "'cortado plot' needs --out=FILE.png or --out=FILE.svg");
  plot_y ys[PLOT_NY];
  int nys;
  if (parse_ys(ct_cli_string(args, "y"), ys, &nys, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  const int nruns = (int)args->n_positional;
  plot_run *runs = ct_xcalloc((size_t)nruns, sizeof *runs);
  int rc = CT_EXIT_OK, read = 0;
  for (; read < nruns; read++)
    if (plot_run_read(args->positional[read], &runs[read], &err) != CT_OK) {
      rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
      break;
    }
  const bool seconds = strcmp(ct_cli_string(args, "x"), "seconds") == 0;
  /* runs of one name (run.log and run.csv) are told apart by their paths */
  bool *same = ct_xcalloc((size_t)nruns + 1, sizeof *same);
  for (int r = 0; r < read && rc == CT_EXIT_OK; r++)
    for (int o = 0; o < read; o++) same[r] |= o != r && strcmp(runs[r].label, runs[o].label) == 0;
  for (int r = 0; r < read && rc == CT_EXIT_OK; r++)
    if (same[r]) {
      free(runs[r].label);
      runs[r].label = ct_xstrdup(args->positional[r]);
    }
  free(same);
  for (int r = 0; r < read && rc == CT_EXIT_OK; r++)
    LOG_INFO("%s: %zu loss, %zu test loss, %zu accuracy, %zu lr, %zu rate points", runs[r].label,
             runs[r].curve[PLOT_LOSS].n, runs[r].test_loss.n, runs[r].curve[PLOT_ACCURACY].n,
             runs[r].curve[PLOT_LR].n, runs[r].curve[PLOT_RATE].n);
  if (rc == CT_EXIT_OK) {
    if (plot_draw(out, runs, nruns, ys, nys, seconds, &err) != CT_OK)
      rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
    else
      LOG_INFO("Plotted %d run%s (%d chart%s) to %s", nruns, nruns == 1 ? "" : "s", nys,
               nys == 1 ? "" : "s", out);
  }
  for (int r = 0; r < read; r++) plot_run_free(&runs[r]);
  free(runs);
  return rc;
}

const ct_cli_command ct_cli_cmd_plot = {
    .name = "plot",
    .summary = "Plot training curves (loss, accuracy, learning rate, speed) from logs.",
    .usage = "cortado plot LOG_OR_CSV... --out=FILE.png|FILE.svg [--x=iters|seconds] "
             "[--y=loss,accuracy,lr,rate]",
    .description = "Reads Caffe-format training logs (Cortado's and BVLC Caffe's) and Caffe2 "
                   "CSV logs (--csv_log), and draws one chart per --y entry, one under the "
                   "other, with every log a curve of its own, named in a legend: the charts of "
                   "Caffe's plot_training_log.py (test accuracy, test and train loss, learning "
                   "rate against iterations or seconds), and the training speed.",
    .flags = plot_flags,
    .n_flags = sizeof plot_flags / sizeof plot_flags[0],
    .min_args = 1,
    .max_args = MAX_RUNS,
    .run = plot_run_cmd,
};
