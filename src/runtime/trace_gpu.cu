/* Device timelines for traces of GPU runs (see trace_gpu.h). */
#include "runtime/trace_gpu.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/mem.h"
#include "core/trace.h"
#include "gpu/gpu.h"

/* The side streams' marks of one step: its first start and last end. */
typedef struct side_marks {
  cudaEvent_t ev[2];
  bool seen[2];
} side_marks;

/* One set of marks: every iteration of one parity records into its set. */
typedef struct mark_set {
  cudaEvent_t *compute;   /* (nsteps + 1): [0] before the first step, [i + 1] after step i */
  bool *compute_seen;     /* (nsteps + 1) recorded at least once */
  side_marks *side[CT_TRACE_GPU_STREAMS]; /* (nsteps) for the gradient and communication streams */
} mark_set;

#define SETS 2

struct ct_trace_gpu {
  ct_context *ctx;
  int nsteps;
  mark_set sets[SETS];
  int set;                /* the set the running program marks */
  cudaStream_t clock;     /* an idle stream: its events run as soon as they are recorded */
  cudaEvent_t now;        /* the clock reading's event */
  int step;               /* the step whose body runs, or -1 */
  bool begun[CT_TRACE_GPU_STREAMS]; /* the current step's first start was marked */
};

static bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(s, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusActive;
}

/* Records ev on s: as an external event-record node of the graph being
 * captured (replays record it again), plainly otherwise. */
static void mark(cudaEvent_t ev, cudaStream_t s) {
  if (capturing(s)) CT_CUDA_CHECK(cudaEventRecordWithFlags(ev, s, cudaEventRecordExternal));
  else CT_CUDA_CHECK(cudaEventRecord(ev, s));
}

static cudaError_t make_events(cudaEvent_t *ev, int n) {
  for (int i = 0; i < n; i++) {
    cudaError_t e = cudaEventCreate(&ev[i]);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

extern "C" ct_status ct_trace_gpu_new(ct_trace_gpu **out, ct_context *ctx, int nsteps, ct_error *err) {
  CT_ASSERT(ctx->device != CT_DEVICE_CPU && nsteps >= 0);
  ct_trace_gpu *t = (ct_trace_gpu *)ct_xcalloc(1, sizeof *t);
  *out = t;
  t->ctx = ctx;
  t->nsteps = nsteps;
  t->step = -1;
  cudaError_t e = cudaSetDevice(ctx->device);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&t->clock, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = make_events(&t->now, 1);
  for (int k = 0; k < SETS; k++) {
    mark_set *m = &t->sets[k];
    m->compute = (cudaEvent_t *)ct_xcalloc((size_t)nsteps + 1, sizeof(cudaEvent_t));
    m->compute_seen = (bool *)ct_xcalloc((size_t)nsteps + 1, sizeof(bool));
    if (e == cudaSuccess) e = make_events(m->compute, nsteps + 1);
    for (int s = CT_TRACE_GPU_ON_GRADIENTS; s < CT_TRACE_GPU_STREAMS; s++) {
      m->side[s] = (side_marks *)ct_xcalloc((size_t)nsteps, sizeof(side_marks));
      for (int i = 0; e == cudaSuccess && i < nsteps; i++) e = make_events(m->side[s][i].ev, 2);
    }
  }
  if (e != cudaSuccess)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: cannot make the trace's CUDA events: %s",
                        ctx->device, cudaGetErrorString(e));
  return CT_OK;
}

static void destroy_events(cudaEvent_t *ev, int n) {
  for (int i = 0; i < n; i++)
    if (ev[i]) cudaEventDestroy(ev[i]);
}

extern "C" void ct_trace_gpu_free(ct_trace_gpu *t) {
  if (!t) return;
  if (t->ctx->trace_gpu == t) t->ctx->trace_gpu = NULL;
  for (int k = 0; k < SETS; k++) {
    mark_set *m = &t->sets[k];
    destroy_events(m->compute, t->nsteps + 1);
    for (int s = 0; s < CT_TRACE_GPU_STREAMS; s++) {
      for (int i = 0; m->side[s] && i < t->nsteps; i++) destroy_events(m->side[s][i].ev, 2);
      free(m->side[s]);
    }
    free(m->compute);
    free(m->compute_seen);
  }
  destroy_events(&t->now, 1);
  if (t->clock) cudaStreamDestroy(t->clock);
  free(t);
}

extern "C" int ct_trace_gpu_steps(const ct_trace_gpu *t) { return t->nsteps; }

static cudaStream_t compute_stream(const ct_trace_gpu *t) { return (cudaStream_t)t->ctx->stream; }

extern "C" void ct_trace_gpu_use(ct_trace_gpu *t, int set) {
  CT_ASSERT(set >= 0 && set < SETS);
  t->set = set;
}

extern "C" void ct_trace_gpu_start(ct_trace_gpu *t) {
  mark_set *m = &t->sets[t->set];
  mark(m->compute[0], compute_stream(t));
  m->compute_seen[0] = true;
}

extern "C" void ct_trace_gpu_enter(ct_trace_gpu *t, int step) {
  CT_ASSERT(step >= 0 && step < t->nsteps);
  t->step = step;
  for (int s = 0; s < CT_TRACE_GPU_STREAMS; s++) t->begun[s] = false;
}

extern "C" void ct_trace_gpu_leave(ct_trace_gpu *t, int step, bool marked) {
  CT_ASSERT(step == t->step);
  if (marked) {
    mark_set *m = &t->sets[t->set];
    mark(m->compute[step + 1], compute_stream(t));
    m->compute_seen[step + 1] = true;
  }
  t->step = -1;
}

extern "C" void ct_trace_gpu_side(ct_context *ctx, ct_trace_gpu_stream which, bool end, void *stream) {
  ct_trace_gpu *t = (ct_trace_gpu *)ctx->trace_gpu;
  if (!t || t->step < 0) return;
  CT_ASSERT(which > CT_TRACE_GPU_ON_COMPUTE && which < CT_TRACE_GPU_STREAMS);
  if (!end && t->begun[which]) return; /* a step's first start counts */
  side_marks *m = &t->sets[t->set].side[which][t->step];
  mark(m->ev[end], (cudaStream_t)stream);
  m->seen[end] = true;
  if (!end) t->begun[which] = true;
}

/* Microseconds from `from` to `to`, or false (and the error cleared) when
 * either was never recorded or has not run. */
static bool elapsed_us(cudaEvent_t from, cudaEvent_t to, double *us) {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, from, to) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  *us = 1000.0 * (double)ms;
  return true;
}

extern "C" ct_status ct_trace_gpu_collect(ct_trace_gpu *t, int set, const ct_program_step *steps,
                                          int nsteps, long long iter, ct_error *err) {
  CT_ASSERT(nsteps == t->nsteps && set >= 0 && set < SETS);
  const mark_set *ms = &t->sets[set];
  if (!ms->compute_seen[0]) return CT_OK;
  /* the clock: a fresh event on an idle stream (the next iteration may be
   * running on the compute stream), waited for */
  cudaError_t e = cudaEventRecord(t->now, t->clock);
  if (e == cudaSuccess) e = cudaEventSynchronize(t->now);
  if (e != cudaSuccess)
    return ct_error_set(err, CT_ERR_DEVICE, "GPU %d: the trace's clock event failed: %s",
                        t->ctx->device, cudaGetErrorString(e));
  const double host_now = ct_trace_now();
  double back;
  if (!elapsed_us(ms->compute[0], t->now, &back)) return CT_OK;
  const double base = host_now - back; /* the trace clock at the first mark */
  cudaEvent_t origin = ms->compute[0];

  double prev = base, last = base;
  for (int i = 0; i < nsteps; i++) {
    const ct_program_step *s = &steps[i];
    double at;
    if (ms->compute_seen[i + 1] && elapsed_us(origin, ms->compute[i + 1], &at)) {
      at += base;
      const ct_trace_args a = {.type = s->type};
      const char *kind = ct_step_kind_name(s->kind);
      ct_trace_complete(CT_TRACE_GPU_COMPUTE, kind, s->what ? s->what : kind, prev, at, &a);
      prev = last = at;
    }
    for (int w = CT_TRACE_GPU_ON_GRADIENTS; w < CT_TRACE_GPU_STREAMS; w++) {
      const side_marks *m = &ms->side[w][i];
      double t0, t1;
      if (!m->seen[0] || !m->seen[1] || !elapsed_us(origin, m->ev[0], &t0) ||
          !elapsed_us(origin, m->ev[1], &t1))
        continue;
      if (w == CT_TRACE_GPU_ON_COMM) {
        const ct_trace_args a = {.bytes = s->bytes, .index_name = "bucket", .index = s->arg};
        ct_trace_complete(CT_TRACE_GPU_COMM, "reduce", "all-reduce", base + t0, base + t1, &a);
      } else {
        const ct_trace_args a = {.type = s->type};
        ct_trace_complete(CT_TRACE_GPU_GRADIENTS, "weight gradient", s->what ? s->what : "?",
                          base + t0, base + t1, &a);
      }
    }
  }
  char name[48];
  snprintf(name, sizeof name, "iteration %lld", iter);
  const ct_trace_args a = {.index_name = "iter", .index = iter};
  ct_trace_complete(CT_TRACE_GPU_COMPUTE, "iteration", name, base, last, &a);
  return CT_OK;
}
