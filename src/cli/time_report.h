/* `cortado time`'s report (time_report.c): per layer its mean forward and
 * backward times with their standard deviations over the iterations, FLOPs
 * (net/net_cost.h), achieved GFLOP/s and memory; per layer type the
 * summed time per iteration (mean and standard deviation, as Caffe2's
 * profiled nets printed), share and GFLOP/s; and the totals.  As a table,
 * CSV (one row per layer, then per type, then the total; a `kind` column
 * says which) or JSON. */
#ifndef CT_CLI_TIME_REPORT_H
#define CT_CLI_TIME_REPORT_H

#include <stdio.h>

#include "cli/cli.h"
#include "net/net.h"

typedef struct ct_time_report {
  const ct_net *net;
  const char *device;  /* "CPU", "GPU 0" */
  int iters;
  const double *fwd;   /* (iters, net->nlayers) milliseconds of each layer's forward */
  const double *bwd;   /* (iters, net->nlayers) ... and backward (0 without one) */
} ct_time_report;

/* The formats of --format. */
#define CT_TIME_REPORT_FORMATS "table|csv|json"

/* Writes r to out in format (one of CT_TIME_REPORT_FORMATS).  Returns false
 * when a write failed. */
bool ct_time_report_write(const ct_time_report *r, const char *format, FILE *out);

/* `mpirun -np P cortado time --pipeline=...` (time_pipeline.c): pipelined
 * iterations on CPU ranks and every stage's timing and memory, logged by
 * stage 0.  Returns a CT_EXIT_* status. */
int ct_cli_time_pipeline(const ct_cli_args *args);

#endif
