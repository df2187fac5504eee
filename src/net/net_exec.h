/* Running one iteration as a program of steps, with CUDA graphs.
 *
 * A program is a list of steps (a layer's forward, its backward, the solver
 * update, the loss read back, ...), each a function that enqueues device
 * work on the context's stream.  ct_exec_run runs them in order:
 *
 *   run 1  plainly (first calls may allocate or tune: cuDNN, workspaces);
 *   run 2  plainly, watching each step: a step that made the host wait
 *          (ct_gpu_host_waits) or that its maker marked not capturable
 *          (e.g. a data layer reading host memory) runs plainly from then on;
 *   run 3  each maximal run of capturable steps (a segment) is captured
 *          into a CUDA graph, instantiated and launched; the others run
 *          plainly between them;
 *   run 4+ the graphs are replayed; no step function of a captured segment
 *          runs on the host any more.
 *
 * A step inside a segment must therefore enqueue the same work every time
 * (device pointers and scalars that do not change; whatever changes lives in
 * device memory, e.g. the solver's learning rate, copied from pinned host
 * memory by a captured copy).  When storage moves (a reshape), the caller
 * passes a new signature and the graphs are dropped and captured again.
 *
 * Graphs are off on the CPU, when the program is made with graphs = false,
 * and when CORTADO_CUDA_GRAPHS=0 is in the environment: then every run is
 * plain (still without host waits of the runtime's own). */
#ifndef CT_NET_NET_EXEC_H
#define CT_NET_NET_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/context.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef ct_status (*ct_exec_fn)(void *user, int arg, ct_error *err);

typedef struct ct_exec_step {
  ct_exec_fn run;   /* enqueues the step's work; may run inside a capture */
  void *user;
  int arg;
  bool capturable;  /* false: always run plainly */
  const char *what; /* for messages, e.g. the layer name (borrowed) */
} ct_exec_step;

typedef struct ct_exec ct_exec;

/* Statistics of the current plan. */
typedef struct ct_exec_stats {
  int steps;          /* in the program */
  int graph_steps;    /* inside captured segments */
  int graphs;         /* captured segments */
  int plain_steps;    /* run on the host every time */
  size_t graph_nodes; /* nodes over all graphs */
  bool replaying;     /* the graphs are captured and replayed */
} ct_exec_stats;

/* A new empty program for ctx.  graphs = false (or the environment) keeps
 * every run plain. */
ct_exec *ct_exec_new(ct_context *ctx, bool graphs);
void ct_exec_free(ct_exec *ex);
/* Appends a step (copied). */
void ct_exec_add(ct_exec *ex, ct_exec_step step);
/* fn(user, 0, err) runs at the end of every captured segment, inside the
 * capture: it must enqueue only capturable work, e.g. join streams that the
 * segment's steps forked (a capture cannot end with unjoined work).  NULL
 * removes it. */
void ct_exec_set_capture_end(ct_exec *ex, ct_exec_fn fn, void *user);
/* Runs the program once (see above).  signature identifies where the
 * program's storage lives; when it differs from the one of the captured
 * graphs, they are dropped and made again.  Errors: the first failing
 * step's, as it gave it; a capture that CUDA refuses (CT_ERR_DEVICE) turns
 * graphs off for this program with a warning and the run goes on plainly. */
ct_status ct_exec_run(ct_exec *ex, uint64_t signature, ct_error *err);
/* Drops the graphs; the next run watches the steps again. */
void ct_exec_invalidate(ct_exec *ex);
void ct_exec_get_stats(const ct_exec *ex, ct_exec_stats *st);
/* Whether the next run runs as every later one will (its graphs replayed,
 * or plain launches without graphs): it neither watches nor captures, so
 * it may be launched while an earlier run is still on the device. */
bool ct_exec_steady(const ct_exec *ex);
/* True unless CORTADO_CUDA_GRAPHS=0 is in the environment. */
bool ct_exec_graphs_allowed(void);

#ifdef __cplusplus
}
#endif

#endif
