/* The runtime: one training iteration as one program of steps.
 *
 * A runtime is built for a train net, the passes of an iteration
 * (iter_size), the solver's update step and, under data parallelism, a
 * reducer.  Its program (program.h) is, in order:
 *
 *   clock          the device's iteration count (slots.h)
 *   begin          clear the flat gradient and the loss sum
 *   iter_size x    feed / forward, layer by layer, then backward in
 *                  reverse; in the last pass each gradient bucket's
 *                  all-reduce follows the backward of the layer that
 *                  finalises it (reduce.h), or with parameter servers
 *                  each shard's push (parallel/ps.h)
 *   reduce join    the update waits for every bucket
 *   callback       the solver's on_gradients callbacks (host code)
 *   update         the solver's update step (not with parameter servers
 *                  that update for the workers: ssp, async)
 *   pull           parameter servers: the weights (or a BMUF block's sync)
 *   readback       the loss sum and the check word into the iteration's slot
 *   prefetch       the GPU data layers' next batches staged
 *
 * The CPU runs it step by step.  A GPU runs it plainly twice, then captures
 * each run of capturable steps into a CUDA graph and replays the graphs
 * (program.c), and may launch iteration n + 1 before n is finished: every
 * value the host exchanges with an iteration sits in that iteration's slot.
 * The host launches an iteration (ct_runtime_launch) and later finishes it
 * (ct_runtime_finish: the wait, under the communicator's watchdog when
 * reducing, the loss and the agreed requests).
 *
 * Requests (stop, snapshot) from signals are sampled by the runtime and,
 * under data parallelism, agreed on by every worker, so that all act after
 * the same iteration.  The runtime knows nets, layers and the reducer; it
 * never sees the solver, whose update and callbacks are steps it was given. */
#ifndef CT_RUNTIME_RUNTIME_H
#define CT_RUNTIME_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "net/net.h"
#include "parallel/comm.h"
#include "parallel/ps.h"
#include "runtime/program.h"
#include "runtime/reduce.h"
#include "runtime/slots.h"
#include "runtime/stages.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Requests from outside the loop, as bit flags. */
enum {
  CT_RT_STOP = 1 << 0,    /* finish the iteration, then stop */
  CT_RT_SNAPSHOT = 1 << 1 /* snapshot after the iteration */
};

typedef struct ct_runtime ct_runtime;

typedef struct ct_rt_opts {
  int iter_size;             /* forward and backward passes per iteration (>= 1; 0: 1) */
  /* The update step (NULL: none), run after the gradients are final:
   * update(update_user, 0, err) enqueues the update of the iteration under
   * way, reading what changes between iterations from slots the caller
   * filled before ct_runtime_launch.  Capturable. */
  ct_program_fn update;
  void *update_user;
  bool no_graphs;            /* every run plain (CORTADO_CUDA_GRAPHS=0 does the same) */
  bool no_launch_ahead;      /* finish each iteration before launching the next
                                (CORTADO_LAUNCH_AHEAD=0 does the same) */
} ct_rt_opts;

/* What a finished iteration gives back. */
typedef struct ct_rt_result {
  double loss;   /* the weighted loss summed over the iteration's passes (the CPU adds each
                    pass's in single precision, as Caffe does; a GPU in double) */
  int actions;   /* CT_RT_* requests to act on after this iteration (agreed by every worker);
                    0 while the iteration after it is in flight: they come with that one */
} ct_rt_result;

/* A runtime for net (borrowed; it must outlive the runtime) on its
 * context's device.  The program is built at the first launch.  Errors:
 * CT_ERR_INVALID for a bad iter_size. */
ct_status ct_runtime_new(ct_runtime **out, ct_net *net, const ct_rt_opts *opts, ct_error *err);
/* Waits for what is in flight, then frees. */
void ct_runtime_free(ct_runtime *rt);

/* Host code after the gradients are final and reduced, before the update
 * (NULL: none): fn(user, 0, err) runs after a wait for the device, every
 * iteration, never inside a graph.  The program is rebuilt at the next
 * launch.  Nothing may be in flight. */
void ct_runtime_set_gradients_callback(ct_runtime *rt, ct_program_fn fn, void *user);

/* Data parallelism: gradients are averaged over comm's workers by a
 * reducer (reduce.h) built with opts (with a pipeline, set before: D x P,
 * comm holds the replicas of this stage, whose parameters the buckets
 * cover, placed in the last micro-batch's backward); rank 0 logs its timing when
 * log_timing.  requests: where this worker's stop and snapshot wishes are
 * read (the process's signal word on rank 0, which all workers then agree
 * on); NULL: the runtime's own (ct_runtime_request).  The program is
 * rebuilt at the next launch.  Nothing may be in flight.  Errors: the
 * reducer's. */
ct_status ct_runtime_set_reduce(ct_runtime *rt, ct_comm *comm, const ct_reduce_opts *opts,
                                bool log_timing, int *requests, ct_error *err);
/* Parameter servers (parallel/ps.h): this worker pushes its gradient's
 * shards to the servers as backward finalises them and pulls the weights
 * at the iteration's end instead of updating (ssp, async), or updates
 * locally and syncs at each block's end (bmuf); a stop the servers
 * announce (the root stopped) stops this worker after the iteration.
 * requests: where this worker's stop and snapshot wishes are read (NULL:
 * its own); the root acts on them and on those the servers relay to it,
 * the other workers send theirs along with their pulls.  The program is rebuilt at the next
 * launch.  Nothing may be in flight.  Errors: CT_ERR_UNSUPPORTED with a
 * reducer or a pipeline. */
ct_status ct_runtime_set_ps(ct_runtime *rt, ct_ps_client *ps, int *requests, ct_error *err);
/* The parameter server's worker side, or NULL. */
ct_ps_client *ct_runtime_ps(const ct_runtime *rt);
/* Pipeline parallelism (stages.h): this process runs stage comm->rank of
 * the net cut after the layers named in after[0 .. nafter) (after NULL:
 * where the layers' pipeline_stage fields say; the net built with
 * ct_stages_part of the same cuts), the iteration's iter_size passes being
 * the micro-batches, run as opts says (stages.h); the loss and the requests
 * are agreed on by every stage at each finish.  The program is rebuilt at
 * the next launch.  Nothing may be in flight.  Errors: ct_stages_create's;
 * CT_ERR_UNSUPPORTED with parameter servers or a reducer already set (set
 * the reducer after the pipeline: D x P). */
ct_status ct_runtime_set_pipeline(ct_runtime *rt, ct_comm *comm, const char *const *after,
                                  int nafter, const ct_stages_opts *opts, ct_error *err);
/* One forward of the net outside the iterations (a display's last one):
 * ct_net_forward, or with a pipeline a forward through every stage (each
 * must call it) with the loss and the net's outputs agreed on by all.
 * Nothing may be in flight.  Errors: a layer's; the communicator's. */
ct_status ct_runtime_forward(ct_runtime *rt, double *loss, ct_error *err);
/* This process's pipeline stage (0 without a pipeline). */
int ct_runtime_stage(const ct_runtime *rt);
/* The pipeline's stages (stages.h: snapshots, timing), or NULL. */
ct_stages *ct_runtime_stages(const ct_runtime *rt);
/* The reducer's: replaces the parameters by rank root's (blocking; nothing
 * without a reducer). */
ct_status ct_runtime_broadcast_params(ct_runtime *rt, int root, ct_error *err);
/* One line on the bucket plan (empty without a reducer). */
void ct_runtime_describe_reduce(const ct_runtime *rt, char *buf, size_t size);
/* Workers whose gradients are averaged (1 without a reducer). */
int ct_runtime_workers(const ct_runtime *rt);
/* values (count) become their mean over the workers (nothing for one).
 * Errors: the communicator's. */
ct_status ct_runtime_average(ct_runtime *rt, double *values, size_t count, ct_error *err);

/* The iteration clock: slots for what the update reads and writes are made
 * and indexed with it. */
const ct_iter_clock *ct_runtime_clock(const ct_runtime *rt);
/* Where the iteration's loss sum lives while the iteration runs (what an
 * update step that skips non-finite losses reads): device memory on a GPU,
 * host memory filled after each pass on the CPU. */
const double *ct_runtime_loss_sum(const ct_runtime *rt);

/* The number the next launch will get (the caller fills that iteration's
 * slots first). */
unsigned ct_runtime_next(const ct_runtime *rt);
/* Traces (core/trace.h): the next launch is iteration `iter` (the
 * solver's count), and those after it count on from there; by default the
 * first launch is iteration 0.  A traced iteration is an event from its
 * launch to its finish enclosing its steps' events; with iteration n + 1
 * launched before n is finished (a GPU) they would overlap, which is for
 * the GPU trace to settle. */
void ct_runtime_set_trace_iter(ct_runtime *rt, long long iter);
/* Launches the next iteration without waiting for it (on the CPU it has
 * run on return); *seq gets its number.  At most two iterations are in
 * flight: the one before may still be running.  Errors: a step's, or
 * CT_ERR_INTERRUPTED when the communicator was told that another worker
 * failed; nothing is left in flight then. */
ct_status ct_runtime_launch(ct_runtime *rt, unsigned *seq, ct_error *err);
/* Finishes launched iteration seq (the older one when two are in flight):
 * waits for it (under the communicator's watchdog when reducing), then
 * fills *res.  Errors: the reducer's, or a failed deferred check with its
 * layer's message; nothing is left in flight then. */
ct_status ct_runtime_finish(ct_runtime *rt, unsigned seq, ct_rt_result *res, ct_error *err);
/* Whether the runtime allows launching an iteration before the last one
 * launched is finished: an asynchronous device, launch-ahead not turned
 * off, the program steady (no watch or capture run next), no request or
 * agreed action waiting, and the reducer not sampling its timing.  The
 * caller adds what only it knows (the host needs the net in between). */
bool ct_runtime_may_launch_ahead(const ct_runtime *rt);
/* Waits for every launched iteration's work (the device idles on return);
 * iterations not finished yet are dropped (their loss and requests are not
 * read): what a caller does that gives up after an error. */
void ct_runtime_drain(ct_runtime *rt);

/* Asks for CT_RT_* actions (bit flags).  Async-signal-safe: it only sets
 * bits of a word that ct_runtime_finish samples. */
void ct_runtime_request(ct_runtime *rt, int actions);

/* Requests that may be acted on at once, between a test's passes (taken):
 * the asked ones when this worker trains alone; none under data
 * parallelism, where workers act only on agreed requests, at iteration
 * ends. */
int ct_runtime_poll(ct_runtime *rt);

/* The program's statistics (all zero before the first launch). */
void ct_runtime_stats(const ct_runtime *rt, ct_program_stats *st);
/* One line on how the iterations run, e.g. "CUDA graphs: 18 of 20 steps in
 * 2 graphs (120 nodes), 2 steps launched plainly". */
void ct_runtime_describe(const ct_runtime *rt, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
