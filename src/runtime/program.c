/* The step program and its CUDA graphs (see program.h). */
#include "runtime/program.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/settings.h"
#include "core/trace.h"
#include "gpu/gpu.h"
#include "runtime/graph.h"
#include "runtime/trace_gpu.h"

typedef enum {
  PROGRAM_WARMUP = 0, /* the next run is plain */
  PROGRAM_WATCH,      /* the next run is plain and watches the steps */
  PROGRAM_CAPTURE,    /* the next run captures the segments */
  PROGRAM_REPLAY      /* the graphs exist */
} program_state;

/* Graph sets: one, or two while the device times of a trace are taken,
 * whose event marks alternate between iterations (trace_gpu.h) so that an
 * iteration may be launched while the one before it is read. */
#define GRAPH_SETS 2

typedef struct {
  int begin, end;    /* steps [begin, end) */
  bool graph;        /* a capturable segment */
  ct_graph *g[GRAPH_SETS]; /* its graphs once captured (NULL: captured nothing) */
} segment;

struct ct_program {
  ct_context *ctx;
  bool graphs;
  int nsteps, cap;
  ct_program_step *steps;
  bool *waited;      /* (nsteps) the step made the host wait when watched */
  program_state state;
  uint64_t signature;
  int nsegs;
  segment *segs;
  ct_program_fn capture_end; /* enqueued last in every capture (may be NULL) */
  void *capture_end_user;
  bool device_times;         /* ct_program_trace_device was called */
  ct_trace_gpu *tracer;      /* the device timeline while a trace is on (GPU only), or NULL */
  int set;                   /* the graph and event set of this run (0 without a tracer) */
  int next_set;              /* ct_program_trace_set's */
  bool captured[GRAPH_SETS]; /* the set's graphs were captured */
};

const char *ct_step_kind_name(ct_step_kind kind) {
  static const char *const names[CT_STEP_KINDS] = {
      "clock", "begin", "feed", "forward", "loss", "backward", "reduce begin", "reduce", "reduce join",
      "callback", "update", "readback", "prefetch", "send", "receive", "stash", "restore",
      "push", "pull", "seed", "mark"};
  return kind >= 0 && kind < CT_STEP_KINDS ? names[kind] : "?";
}

bool ct_program_graphs_allowed(void) {
  return ct_setting_bool("CORTADO_CUDA_GRAPHS");
}

ct_program *ct_program_new(ct_context *ctx, bool graphs) {
  ct_program *ex = ct_xcalloc(1, sizeof *ex);
  ex->ctx = ctx;
  ex->graphs = graphs && ctx->device != CT_DEVICE_CPU && ct_program_graphs_allowed();
  return ex;
}

static void drop_graphs(ct_program *ex) {
  bool any = false;
  for (int i = 0; i < ex->nsegs; i++)
    for (int k = 0; k < GRAPH_SETS; k++) any |= ex->segs[i].g[k] != NULL;
  if (any) ct_context_sync(ex->ctx); /* no launch of them is still running */
  for (int i = 0; i < ex->nsegs; i++)
    for (int k = 0; k < GRAPH_SETS; k++) ct_graph_free(ex->segs[i].g[k]);
  free(ex->segs);
  ex->segs = NULL;
  ex->nsegs = 0;
  for (int k = 0; k < GRAPH_SETS; k++) ex->captured[k] = false;
}

void ct_program_free(ct_program *ex) {
  if (!ex) return;
  drop_graphs(ex);
  ct_trace_gpu_free(ex->tracer);
  free(ex->steps);
  free(ex->waited);
  free(ex);
}

void ct_program_set_capture_end(ct_program *ex, ct_program_fn fn, void *user) {
  ex->capture_end = fn;
  ex->capture_end_user = user;
  ct_program_invalidate(ex);
}

void ct_program_add(ct_program *ex, ct_program_step step) {
  if (ex->nsteps == ex->cap) {
    ex->cap = ex->cap ? 2 * ex->cap : 32;
    ex->steps = ct_xrealloc(ex->steps, (size_t)ex->cap * sizeof *ex->steps);
    ex->waited = ct_xrealloc(ex->waited, (size_t)ex->cap * sizeof *ex->waited);
  }
  ex->waited[ex->nsteps] = false;
  ex->steps[ex->nsteps++] = step;
  ct_program_invalidate(ex);
}

void ct_program_invalidate(ct_program *ex) {
  drop_graphs(ex);
  if (ex->state != PROGRAM_WARMUP) ex->state = PROGRAM_WATCH;
}

/* Runs step s as an event of the trace (program.h).  On a GPU the host
 * only launches the step's work: every step is on the compute track. */
static ct_status run_traced(const ct_program *ex, const ct_program_step *s, ct_error *err) {
  const double t0 = ct_trace_now();
  const ct_status st = s->run(s->user, s->arg, err);
  const double t1 = ct_trace_now();
  const bool reduce = s->kind == CT_STEP_REDUCE;
  const bool comm = ex->ctx->device == CT_DEVICE_CPU &&
                    (reduce || s->kind == CT_STEP_SEND || s->kind == CT_STEP_RECV ||
                     s->kind == CT_STEP_PUSH || s->kind == CT_STEP_PULL);
  const ct_trace_args a = {.type = s->type, .bytes = s->bytes, .index_name = reduce ? "bucket" : NULL,
                           .index = s->arg};
  const char *kind = ct_step_kind_name(s->kind);
  ct_trace_complete(comm ? CT_TRACE_COMM : CT_TRACE_COMPUTE, kind, s->what ? s->what : kind, t0, t1,
                    &a);
  return st;
}

static ct_status run_plain(ct_program *ex, int begin, int end, bool watch, ct_error *err) {
  for (int i = begin; i < end; i++) {
    const ct_program_step *s = &ex->steps[i];
    unsigned long before = ct_gpu_host_waits();
    if (ex->tracer) ct_trace_gpu_enter(ex->tracer, i);
    if (ct_trace_on()) CT_TRY(run_traced(ex, s, err));
    else CT_TRY(s->run(s->user, s->arg, err));
    /* an all-reduce's compute-stream part is an event record: its time is
     * the communication stream's */
    if (ex->tracer) ct_trace_gpu_leave(ex->tracer, i, !s->idle && s->kind != CT_STEP_REDUCE);
    if (watch) ex->waited[i] = ct_gpu_host_waits() != before;
  }
  return CT_OK;
}

/* Cuts the program into maximal runs of capturable steps and the rest. */
static void make_segments(ct_program *ex) {
  drop_graphs(ex);
  ex->segs = ct_xcalloc((size_t)ex->nsteps + 1, sizeof *ex->segs);
  for (int i = 0; i < ex->nsteps; i++) {
    bool cap = ex->steps[i].capturable && !ex->waited[i];
    segment *last = ex->nsegs ? &ex->segs[ex->nsegs - 1] : NULL;
    if (last && last->graph == cap) {
      last->end = i + 1;
    } else {
      segment *s = &ex->segs[ex->nsegs++];
      s->begin = i;
      s->end = i + 1;
      s->graph = cap;
    }
  }
}

/* Captures segment s.  *refused tells a capture CUDA would not make from a
 * failing step (whose error is returned as it is). */
static ct_status capture_segment(ct_program *ex, segment *s, bool *refused, ct_error *err) {
  *refused = false;
  ct_status st = ct_graph_capture_begin(ex->ctx, err);
  if (st != CT_OK) {
    *refused = true;
    return st;
  }
  ex->ctx->capturing = true;
  st = run_plain(ex, s->begin, s->end, false, err);
  if (st == CT_OK && ex->capture_end) st = ex->capture_end(ex->capture_end_user, 0, err);
  /* a capture must end with every stream it forked to joined */
  ct_context_grad_join(ex->ctx);
  ex->ctx->capturing = false;
  if (st != CT_OK) {
    ct_graph_capture_abandon(ex->ctx);
    return st;
  }
  st = ct_graph_capture_end(ex->ctx, &s->g[ex->set], err);
  if (st != CT_OK) *refused = true;
  return st;
}

/* Captures every graph segment (into the run's set) and runs the whole
 * program once. */
static ct_status capture_and_run(ct_program *ex, ct_error *err) {
  for (int k = 0; k < ex->nsegs; k++) {
    segment *s = &ex->segs[k];
    if (!s->graph) {
      CT_TRY(run_plain(ex, s->begin, s->end, false, err));
      continue;
    }
    ct_error cerr;
    bool refused;
    ct_status st = capture_segment(ex, s, &refused, &cerr);
    if (refused) {
      /* CUDA refused the capture: finish this run plainly, and stay plain. */
      const ct_program_step *first = &ex->steps[s->begin], *last = &ex->steps[s->end - 1];
      LOG_WARNING("CUDA graphs turned off for this net: %s (steps '%s' (%s) to '%s' (%s))",
                  cerr.msg, first->what ? first->what : "?", ct_step_kind_name(first->kind),
                  last->what ? last->what : "?", ct_step_kind_name(last->kind));
      ex->graphs = false;
      drop_graphs(ex);
      return run_plain(ex, s->begin, ex->nsteps, false, err);
    }
    if (st != CT_OK) {
      if (err) *err = cerr;
      return st;
    }
    if (s->g[ex->set]) ct_graph_launch(ex->ctx, s->g[ex->set]);
  }
  ex->captured[ex->set] = true;
  return CT_OK;
}

static ct_status replay(ct_program *ex, ct_error *err) {
  if (!ex->captured[ex->set]) return capture_and_run(ex, err); /* the other set's first run */
  for (int k = 0; k < ex->nsegs; k++) {
    segment *s = &ex->segs[k];
    if (s->graph) {
      if (s->g[ex->set]) ct_graph_launch(ex->ctx, s->g[ex->set]);
    } else {
      CT_TRY(run_plain(ex, s->begin, s->end, false, err));
    }
  }
  return CT_OK;
}

/* A trace of a GPU run times the steps on the device (trace_gpu.h): the
 * timeline's marks are part of the steps' work, so graphs captured without
 * them (or for other steps) are made again. */
static ct_status trace_setup(ct_program *ex, ct_error *err) {
  ex->set = 0;
  if (!ex->device_times || !ct_trace_enabled() || ex->ctx->device == CT_DEVICE_CPU) return CT_OK;
  if (!ex->tracer || ct_trace_gpu_steps(ex->tracer) != ex->nsteps) {
    ct_program_invalidate(ex);
    ct_trace_gpu_free(ex->tracer);
    ex->tracer = NULL;
    CT_TRY(ct_trace_gpu_new(&ex->tracer, ex->ctx, ex->nsteps, err));
  }
  ex->ctx->trace_gpu = ex->tracer; /* the steps' side marks go to it while they run */
  ex->set = ex->next_set;
  ct_trace_gpu_use(ex->tracer, ex->set);
  ct_trace_gpu_start(ex->tracer);
  return CT_OK;
}

void ct_program_trace_device(ct_program *ex) { ex->device_times = true; }

void ct_program_trace_set(ct_program *ex, int set) {
  CT_ASSERT(set >= 0 && set < GRAPH_SETS);
  ex->next_set = set;
}

ct_status ct_program_trace_collect(ct_program *ex, int set, long long iter, ct_error *err) {
  if (!ex->tracer) return CT_OK;
  return ct_trace_gpu_collect(ex->tracer, set, ex->steps, ex->nsteps, iter, err);
}

static ct_status run(ct_program *ex, uint64_t signature, ct_error *err);

ct_status ct_program_run(ct_program *ex, uint64_t signature, ct_error *err) {
  CT_TRY(trace_setup(ex, err));
  const ct_status st = run(ex, signature, err);
  ex->ctx->trace_gpu = NULL;
  return st;
}

static ct_status run(ct_program *ex, uint64_t signature, ct_error *err) {
  if (!ex->graphs) return run_plain(ex, 0, ex->nsteps, false, err);
  if (ex->state == PROGRAM_REPLAY && signature != ex->signature) ct_program_invalidate(ex);
  switch (ex->state) {
    case PROGRAM_WARMUP:
      CT_TRY(run_plain(ex, 0, ex->nsteps, false, err));
      ex->state = PROGRAM_WATCH;
      return CT_OK;
    case PROGRAM_WATCH:
      CT_TRY(run_plain(ex, 0, ex->nsteps, true, err));
      make_segments(ex);
      ex->state = PROGRAM_CAPTURE;
      return CT_OK;
    case PROGRAM_CAPTURE:
      ex->signature = signature;
      CT_TRY(capture_and_run(ex, err));
      if (ex->graphs) ex->state = PROGRAM_REPLAY;
      return CT_OK;
    case PROGRAM_REPLAY:
      return replay(ex, err);
  }
  return CT_OK;
}

const ct_program_step *ct_program_steps(const ct_program *ex, int *n) {
  *n = ex->nsteps;
  return ex->steps;
}

bool ct_program_steady(const ct_program *ex) {
  if (!ex->graphs) return true;
  /* with a tracer, the second set's first run captures it */
  return ex->state == PROGRAM_REPLAY && (!ex->tracer || (ex->captured[0] && ex->captured[1]));
}

void ct_program_get_stats(const ct_program *ex, ct_program_stats *st) {
  memset(st, 0, sizeof *st);
  st->steps = ex->nsteps;
  st->replaying = ex->graphs && ex->state == PROGRAM_REPLAY;
  if (!st->replaying) {
    st->plain_steps = ex->nsteps;
    return;
  }
  for (int k = 0; k < ex->nsegs; k++) {
    const segment *s = &ex->segs[k];
    int n = s->end - s->begin;
    if (s->graph) {
      st->graph_steps += n;
      if (s->g[0]) st->graphs++;
      st->graph_nodes += ct_graph_nodes(s->g[0]);
    } else {
      st->plain_steps += n;
    }
  }
}
