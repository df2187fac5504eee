/* Traces of real training: Chrome's trace event format (JSON), which
 * Perfetto (ui.perfetto.dev) and chrome://tracing open.
 *
 * What is recorded: complete ("X") events, each a span of host time on a
 * track of a process.  A process is a rank of the run (pid = rank); its
 * tracks (tid) are:
 *
 *   compute        the thread that runs the iterations' steps: an event per
 *                  iteration, enclosing one per layer forward and backward
 *                  (name: the layer's, args.type: its type), the update
 *                  and the program's other steps; tests; data waits inside
 *                  a data layer's forward
 *   communication  each gradient bucket's all-reduce (args: bytes, bucket,
 *                  algbw_GBps, busbw_GBps); on the CPU the compute thread
 *                  runs it, blocking, and the event shows it apart
 *   host           host work between iterations (snapshots)
 *   data N         the data pipelines' worker threads (a record loaded)
 *
 * GPU runs add a track per CUDA stream (runtime/trace_gpu.h): the compute
 * stream (an iteration's span from its first step to its last, each step
 * inside it), the gradient stream (weight gradients) and the communication
 * stream (each bucket's all-reduce).  Their events carry device times
 * (CUDA events, also inside replayed CUDA graphs) turned into this
 * process's clock; the writer needs nothing else.  On a GPU the compute
 * track shows when the host thread launched each step, which is not when
 * the GPU ran it.
 *
 * Cost.  Off (no ct_trace_start), a hook is one relaxed load of a global
 * flag and a branch that is never taken: no allocation, no clock read.  On,
 * an event is two clock reads and a store into the recording thread's own
 * buffer (no lock; names are interned per thread); the JSON is written at
 * the end.  Events are recorded only inside the window of iterations
 * asked for (ct_trace_start's first..last): from the start of iteration
 * `first` to the end of iteration `last`.
 *
 * Ranks.  Each process records its own events on its monotonic clock.
 * Ranks in other processes align their clocks with rank 0's and send their
 * events to rank 0 (parallel/trace_ranks.h), which writes the one file.
 * Worker threads of one process share its clock and buffers; each records
 * under its own pid (ct_trace_set_thread_rank). */
#ifndef CT_CORE_TRACE_H
#define CT_CORE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_trace_track {
  CT_TRACE_COMPUTE = 1,       /* the thread running the iteration's steps */
  CT_TRACE_COMM = 2,          /* all-reduces */
  CT_TRACE_HOST = 3,          /* host work between iterations: snapshots */
  CT_TRACE_GPU_COMPUTE = 4,   /* the GPU's compute stream (device times) */
  CT_TRACE_GPU_GRADIENTS = 5, /* the GPU's parameter-gradient stream */
  CT_TRACE_GPU_COMM = 6,      /* the GPU's communication stream */
  CT_TRACE_DATA = 16,         /* data threads: each thread its own tid from here on */
  CT_TRACE_TIDS = 64          /* tids are below this */
} ct_trace_track;

/* Optional arguments of an event (zero: none). */
typedef struct ct_trace_args {
  const char *type;  /* a layer's type, or NULL */
  uint64_t bytes;    /* data the event moved (an all-reduce's bucket); with a duration the
                        writer adds the achieved bandwidth */
  const char *index_name; /* with static storage: "bucket", "iter", "net"; NULL: no index */
  long long index;
} ct_trace_args;

/* Set while events are being recorded (read with ct_trace_on); private. */
extern int ct_trace_recording_;
/* Set between ct_trace_start and ct_trace_free; private. */
extern int ct_trace_enabled_;

/* Whether events are recorded now.  The hooks' test: cheap and almost
 * always false. */
static inline bool ct_trace_on(void) {
  return __builtin_expect(__atomic_load_n(&ct_trace_recording_, __ATOMIC_RELAXED), 0);
}
/* Whether a trace was started (the window may not be open yet). */
static inline bool ct_trace_enabled(void) {
  return __builtin_expect(__atomic_load_n(&ct_trace_enabled_, __ATOMIC_RELAXED), 0);
}

/* Starts tracing in this process: events of iterations first..last
 * (inclusive; last < 0: to the end) will be recorded.  Drops what an
 * earlier trace held.  rank is this process's pid in the trace (its first
 * rank; 0 alone). */
void ct_trace_start(long long first, long long last, int rank);
/* Stops and frees everything (a no-op when not started). */
void ct_trace_free(void);

/* This process's clock, in microseconds since the trace started. */
double ct_trace_now(void);

/* Records an event of the calling thread on `track` (for CT_TRACE_DATA the
 * thread's own data tid) from t0 to t1 (ct_trace_now values).  cat: a
 * string with static storage ("forward", "allreduce", ...); name and
 * args->type are copied.  args may be NULL.  Call only when ct_trace_on(). */
void ct_trace_complete(ct_trace_track track, const char *cat, const char *name, double t0,
                       double t1, const ct_trace_args *args);

/* The iteration window, driven by whoever launches iterations (the
 * runtime): iteration_begin opens the window when first <= iter <= last
 * (closes it otherwise) and returns the start time; iteration_end records
 * the event "iteration N" from t0 to now on the compute track when
 * first <= iter <= last (the next iteration, launched ahead, may have
 * opened or closed the window since), then closes it after iteration
 * `last`.  Call only when ct_trace_enabled(). */
double ct_trace_iteration_begin(long long iter);
void ct_trace_iteration_end(long long iter, double t0);
/* Whether iteration iter is inside the window asked for (whether it is
 * recorded, unless the events were taken already). */
bool ct_trace_wants(long long iter);

/* The calling thread's events go under pid `rank` (a data-parallel worker
 * thread). */
void ct_trace_set_thread_rank(int rank);

/* Ranks in several processes (parallel/trace_ranks.c): shift_us is added to
 * this process's times to put them on rank 0's timeline; world is the rank
 * count (for the all-reduce bus bandwidth). */
void ct_trace_set_alignment(double shift_us, int world);
/* This process's clock as absolute monotonic microseconds and its trace
 * origin on that clock (for the clock exchange). */
double ct_trace_clock_abs(void);
double ct_trace_origin_abs(void);
/* This process's events as JSON objects separated by ",\n" (no brackets),
 * times shifted by the alignment; *len gets the length.  Closes the window
 * for good (events recorded after it would be lost).  Caller frees. */
char *ct_trace_take_json(size_t *len);
/* Adds another process's ct_trace_take_json text (copied) to what
 * ct_trace_write writes. */
void ct_trace_add_json(const char *text, size_t len);
/* This process's events were handed to rank 0 (ct_trace_write writes
 * nothing here). */
void ct_trace_mark_sent(void);

/* Writes the trace to path (JSON object with "traceEvents", process and
 * thread names as metadata events), replacing the file atomically.  A no-op
 * returning CT_OK when this process sent its events to rank 0.  Logs how
 * many events were written (and dropped, past the per-thread limit).
 * Errors: CT_ERR_IO naming the path. */
ct_status ct_trace_write(const char *path, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
