/* Device timelines for traces of GPU runs (trace_gpu.cu; trace_gpu_none.c
 * in CPU-only builds).  Internal to the runtime: the program (program.c)
 * makes one while a trace is on (core/trace.h), and the step bodies that
 * enqueue work on other streams mark it through their context.
 *
 * What is timed.  Each step of the iteration's program gets CUDA events:
 *
 *   compute stream  one event after the step's work (and one before the
 *                   program's first step): step i ran from the mark before
 *                   it to its own, waits for the other streams included
 *                   (steps with no work of their own are not marked: a
 *                   marker costs about 2 us of the GPU's time);
 *   gradient stream a layer's weight-gradient work, from the first
 *                   ct_context_grad_begin of its step to its last
 *                   ct_context_grad_step;
 *   communication   a bucket's all-reduce, from the end of its waits for
 *                   the compute and gradient streams to the end of the
 *                   all-reduce (with its 16-bit conversions).
 *
 * Inside a capture the events are recorded as external event-record nodes
 * of the graph, so that every replay records them again: iterations
 * replayed from CUDA graphs are timed like plain ones.  The marks come in
 * two sets, which iterations use in turn (the program keeps a set of
 * graphs for each): an iteration's set is read after it has ended, while
 * the next one, launched ahead of that end, marks the other set.
 *
 * Clocks.  Device times become this process's trace clock (ct_trace_now)
 * at each collection: the host waits for a fresh event on a stream of its
 * own that has no other work (so the event runs at once) and reads its
 * clock; every event of the iteration is placed by its elapsed time from
 * the iteration's first mark, which sits that far before the fresh one.
 * The error is the wait's wake-up latency (microseconds). */
#ifndef CT_RUNTIME_TRACE_GPU_H
#define CT_RUNTIME_TRACE_GPU_H

#include <stdbool.h>

#include "core/context.h"
#include "core/status.h"
#include "runtime/program.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_trace_gpu_stream {
  CT_TRACE_GPU_ON_COMPUTE = 0,
  CT_TRACE_GPU_ON_GRADIENTS,
  CT_TRACE_GPU_ON_COMM,
  CT_TRACE_GPU_STREAMS
} ct_trace_gpu_stream;

typedef struct ct_trace_gpu ct_trace_gpu;

/* A timeline for a program of nsteps steps on ctx's GPU.  While its
 * program runs, ctx->trace_gpu points to it (the side marks' way in).
 * Errors: CT_ERR_DEVICE naming the GPU; CT_ERR_UNSUPPORTED without CUDA. */
ct_status ct_trace_gpu_new(ct_trace_gpu **out, ct_context *ctx, int nsteps, ct_error *err);
/* Also clears ctx->trace_gpu when it points to t.  NULL: a no-op. */
void ct_trace_gpu_free(ct_trace_gpu *t);
int ct_trace_gpu_steps(const ct_trace_gpu *t);

/* The set (0 or 1) the next run marks. */
void ct_trace_gpu_use(ct_trace_gpu *t, int set);
/* The program's run begins: the mark before its first step. */
void ct_trace_gpu_start(ct_trace_gpu *t);
/* Step i is about to enqueue its work: side marks go to it. */
void ct_trace_gpu_enter(ct_trace_gpu *t, int step);
/* Step i has enqueued its work: the compute stream's mark after it, unless
 * !mark (a step with no compute-stream work of its own: the next step's
 * span starts at the mark before it, and it has no span of its own). */
void ct_trace_gpu_leave(ct_trace_gpu *t, int step, bool mark);

/* From a step's body: the start (end = false) or the end of its work on a
 * side stream (cudaStream_t).  A step's first start and last end count.
 * A no-op when ctx has no timeline. */
void ct_trace_gpu_side(ct_context *ctx, ct_trace_gpu_stream which, bool end, void *stream);

/* After the iteration that marked `set` has ended (and before another
 * marks it): its events as trace events of iteration iter (an
 * "iteration N" span on the GPU compute track enclosing the steps, weight
 * gradients, all-reduces with bytes and bucket).  Steps that marked
 * nothing are left out.  Errors: CT_ERR_DEVICE. */
ct_status ct_trace_gpu_collect(ct_trace_gpu *t, int set, const ct_program_step *steps,
                               int nsteps, long long iter, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
