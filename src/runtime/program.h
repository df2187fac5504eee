/* Running one iteration as a program of steps, with CUDA graphs.
 *
 * A program is a list of steps (a layer's forward, its backward, the solver
 * update, the loss read back, ...), each a function that enqueues device
 * work on the context's stream.  ct_program_run runs them in order:
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
#ifndef CT_RUNTIME_PROGRAM_H
#define CT_RUNTIME_PROGRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/context.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef ct_status (*ct_program_fn)(void *user, int arg, ct_error *err);

/* What a step does, for messages, statistics and traces.  A new kind of
 * work in an iteration (a cast, a loss-scale check, a send to the next
 * pipeline stage, a push to a parameter server) is a new kind here and a
 * step function where its subsystem lives; the program runs it like any
 * other. */
typedef enum ct_step_kind {
  CT_STEP_CLOCK = 0,    /* the device's iteration count (runtime/slots.h) */
  CT_STEP_BEGIN,        /* clear the gradient and the loss sum */
  CT_STEP_FEED,         /* a data layer's batch copied in (runtime/steps.c) */
  CT_STEP_FORWARD,      /* one layer's forward */
  CT_STEP_LOSS,         /* the CPU: a pass's loss added to the iteration's */
  CT_STEP_BACKWARD,     /* one layer's backward */
  CT_STEP_REDUCE_BEGIN, /* the start of the reduced backward pass */
  CT_STEP_REDUCE,       /* one gradient bucket's all-reduce */
  CT_STEP_REDUCE_JOIN,  /* the update waits for every bucket */
  CT_STEP_CALLBACK,     /* host code between device work (waits for the device first) */
  CT_STEP_UPDATE,       /* the solver's update of the parameters */
  CT_STEP_READBACK,     /* the loss and the check word into the iteration's slot */
  CT_STEP_PREFETCH,     /* a data layer's next batch staged */
  CT_STEP_SEND,         /* a blob (or its diff) to another pipeline stage (runtime/stages.h) */
  CT_STEP_RECV,         /* a blob (or its diff) from another pipeline stage */
  CT_STEP_STASH,        /* a micro-batch's stage input kept for its backward */
  CT_STEP_RESTORE,      /* a micro-batch's stage inputs put back before its recomputation */
  CT_STEP_PUSH,         /* a gradient shard to its parameter server (parallel/ps.h) */
  CT_STEP_PULL,         /* the weights from the parameter servers (or a BMUF block's sync) */
  CT_STEP_SEED,         /* loss scaling: a loss top's backward seed set (solvers/loss_scale.h) */
  CT_STEP_MARK,         /* a pipeline stage's timing mark (runtime/stages.h) */
  CT_STEP_KINDS
} ct_step_kind;

/* The kind's name ("forward", "reduce", ...). */
const char *ct_step_kind_name(ct_step_kind kind);

/* Traces (core/trace.h): while events are recorded, each step that runs on
 * the host is an event named by `what`, its category the kind's name, on
 * the communication track for a CPU's all-reduces and the compute track for
 * the rest.  Steps replayed inside a CUDA graph are not seen by the host: on
 * a GPU, while a trace is on, the program times every step on the device
 * (runtime/trace_gpu.h), graphs or not, and ct_program_trace_collect turns
 * an ended iteration's times into events of the GPU's tracks. */

typedef struct ct_program_step {
  ct_program_fn run;   /* enqueues the step's work; may run inside a capture */
  void *user;
  int arg;             /* passed to run: a layer index, a bucket, ... */
  bool capturable;     /* false: always run plainly */
  const char *what;    /* for messages, e.g. the layer name (borrowed) */
  ct_step_kind kind;
  const char *type;    /* a layer step's layer type, for traces (borrowed; NULL: none) */
  size_t bytes;        /* data the step moves (an all-reduce's bucket), for traces; 0: none */
  bool idle;           /* enqueues no device work (a layer pass another layer computes): a
                          GPU trace times nothing after it */
} ct_program_step;

typedef struct ct_program ct_program;

/* Statistics of the current plan. */
typedef struct ct_program_stats {
  int steps;          /* in the program */
  int graph_steps;    /* inside captured segments */
  int graphs;         /* captured segments */
  int plain_steps;    /* run on the host every time */
  size_t graph_nodes; /* nodes over all graphs */
  bool replaying;     /* the graphs are captured and replayed */
} ct_program_stats;

/* A new empty program for ctx.  graphs = false (or the environment) keeps
 * every run plain. */
ct_program *ct_program_new(ct_context *ctx, bool graphs);
void ct_program_free(ct_program *ex);
/* Appends a step (copied). */
void ct_program_add(ct_program *ex, ct_program_step step);
/* fn(user, 0, err) runs at the end of every captured segment, inside the
 * capture: it must enqueue only capturable work, e.g. join streams that the
 * segment's steps forked (a capture cannot end with unjoined work).  NULL
 * removes it. */
void ct_program_set_capture_end(ct_program *ex, ct_program_fn fn, void *user);
/* Runs the program once (see above).  signature identifies where the
 * program's storage lives; when it differs from the one of the captured
 * graphs, they are dropped and made again.  Errors: the first failing
 * step's, as it gave it; a capture that CUDA refuses (CT_ERR_DEVICE) turns
 * graphs off for this program with a warning and the run goes on plainly. */
ct_status ct_program_run(ct_program *ex, uint64_t signature, ct_error *err);
/* Drops the graphs; the next run watches the steps again. */
void ct_program_invalidate(ct_program *ex);
void ct_program_get_stats(const ct_program *ex, ct_program_stats *st);
/* The program's steps in order (borrowed until the next ct_program_add);
 * *n gets their count. */
const ct_program_step *ct_program_steps(const ct_program *ex, int *n);
/* Whether the next run runs as every later one will (its graphs replayed,
 * or plain launches without graphs): it neither watches nor captures, so
 * it may be launched while an earlier run is still on the device. */
bool ct_program_steady(const ct_program *ex);
/* Makes the program time its steps on the device while a trace is on (a
 * GPU program; the runtime's iterations, not the test passes).  The marks
 * alternate between two sets (0, 1: ct_program_trace_set before each run),
 * each with its own CUDA graphs, so that a run may be launched while the
 * one before it, of the other set, is still to be read. */
void ct_program_trace_device(ct_program *ex);
void ct_program_trace_set(ct_program *ex, int set);
/* After a run of set `set` has ended on the device, and before the next
 * run of that set: its device times as trace events of iteration iter (a
 * GPU program while a trace is on; a no-op otherwise).  Errors:
 * CT_ERR_DEVICE. */
ct_status ct_program_trace_collect(ct_program *ex, int set, long long iter, ct_error *err);
/* True unless CORTADO_CUDA_GRAPHS=0 is in the environment. */
bool ct_program_graphs_allowed(void);

#ifdef __cplusplus
}
#endif

#endif
