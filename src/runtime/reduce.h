/* The data-parallel reduce step of a training iteration (reduce.c): the
 * bucket plan over the net's flat gradient and the work the runtime's
 * program places in it.
 *
 * The plan cuts the flat gradient into buckets.  The flat layout runs in
 * reverse layer order of when gradients become final (net.h), so each
 * bucket is final after the backward of one layer: the program launches the
 * bucket's all-reduce right after that layer's backward step, in the last
 * backward pass of the iteration (iter_size passes accumulate first).  On a
 * GPU a launch only enqueues the all-reduce on a communication stream
 * ordered after the compute stream by an event, so it overlaps the rest of
 * backward and is a node of the iteration's CUDA graph; on the CPU it is the
 * blocking all-reduce itself.  The join step makes the update wait for
 * every bucket; at the iteration's end the host waits for it under the
 * communicator's watchdog (ct_reducer_wait).
 *
 * The reducer also carries the workers' agreement on stop and snapshot
 * requests, averages test results, and broadcasts the parameters at the
 * start.  Internal to the runtime: the solver and the data-parallel drivers
 * reach it through runtime.h. */
#ifndef CT_RUNTIME_REDUCE_H
#define CT_RUNTIME_REDUCE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "net/net.h"
#include "parallel/comm.h"
#include "runtime/slots.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tuning of the reduction (and of the communicators the drivers make). */
typedef struct ct_reduce_opts {
  size_t bucket_bytes;  /* all-reduce bucket size; 0: CT_REDUCE_DEFAULT_BUCKET_BYTES */
  double timeout_s;     /* communicator watchdog; <= 0: ct_comm_default_timeout() */
  int timing_iters;     /* GPU: rank 0 logs per-bucket timing of this many iterations */
  int timing_skip;      /* ... after this many warm-up iterations (0: 5) */
  int nccl_max_ctas;    /* GPU: thread blocks per NCCL kernel (<= 0: NCCL's choice) */
  /* GPU: the type gradients are all-reduced in when dtype_given; else the
   * 16-bit type the net's layers compute in (half the bytes), float32 for
   * a float32 net.  The CPU's back ends always reduce float32. */
  ct_dtype dtype;
  bool dtype_given;
} ct_reduce_opts;

/* The default bucket size (25 MB). */
#define CT_REDUCE_DEFAULT_BUCKET_BYTES ((size_t)25 << 20)

typedef struct ct_reducer ct_reducer;

/* A reducer for net (borrowed) on the clock's device over comm (borrowed).
 * The flat gradient is cut into buckets of opts->bucket_bytes (rounded down
 * to a multiple of 256 bytes, at least 256).  Timing (GPU,
 * opts->timing_iters) is logged when log_timing.  Errors: CT_ERR_DEVICE
 * naming the GPU; CT_ERR_UNSUPPORTED for a GPU in a build without CUDA. */
ct_status ct_reducer_create(ct_reducer **out, ct_net *net, const ct_iter_clock *clock,
                            ct_comm *comm, const ct_reduce_opts *opts, bool log_timing,
                            ct_error *err);
void ct_reducer_free(ct_reducer *r);

/* The plan: nbuckets buckets, bucket b ends at ct_reducer_bucket_end(r, b)
 * in the flat gradient (the next starts there). */
int ct_reducer_buckets(const ct_reducer *r);
size_t ct_reducer_bucket_end(const ct_reducer *r, int b);
/* Workers in the reduction. */
int ct_reducer_world(const ct_reducer *r);

/* Steps of the program (on a GPU they enqueue capturable work only):
 *   begin       before the last backward pass (the timing's start);
 *   launch      bucket b, whose gradients are final (the CPU: averaged on
 *               return);
 *   join        after the last pass: the compute stream's later work (the
 *               update) waits for every bucket;
 *   capture_end at the end of each captured graph segment: joins the
 *               launches the segment forked (a capture cannot end with
 *               unjoined work).
 * Errors: the communicator's; CT_ERR_DEVICE. */
void ct_reducer_begin(ct_reducer *r);
ct_status ct_reducer_launch(ct_reducer *r, int b, ct_error *err);
ct_status ct_reducer_join(ct_reducer *r, ct_error *err);
ct_status ct_reducer_capture_end(ct_reducer *r, ct_error *err);

/* Blocks until iteration seq (the clock's numbering) is done (GPU: under
 * the communicator's watchdog; the iteration after it may be running) and
 * logs the bucket timing of the iterations asked for; at once on the CPU.
 * Errors: the communicator's (CT_ERR_COMM / CT_ERR_INTERRUPTED). */
ct_status ct_reducer_wait(ct_reducer *r, unsigned seq, ct_error *err);
/* Whether the requests travel inside the iterations (a GPU reducer with
 * buckets): then ct_reducer_carry gives each iteration its wish before it
 * is launched, and ct_reducer_agree reads what it carried. */
bool ct_reducer_carries_requests(const ct_reducer *r);
/* Before iteration seq is launched: the wish it carries (CT_RT_STOP /
 * CT_RT_SNAPSHOT bits). */
void ct_reducer_carry(ct_reducer *r, unsigned seq, int requests);
/* After ct_reducer_wait(seq): *agreed is the union of the workers' wishes,
 * so that all act after the same iteration.  When the requests travel
 * inside the iterations it is what iteration seq carried and `requests` is
 * not used (no host round trip); otherwise `requests` is this worker's
 * wish and the union is a host all-reduce now (every worker must call it).
 * Errors: the communicator's. */
ct_status ct_reducer_agree(ct_reducer *r, unsigned seq, int requests, int *agreed, ct_error *err);
/* Whether the next iteration may be launched before the current one is
 * finished: not while the bucket timing is being sampled, whose events are
 * read one iteration at a time.  The same answer on every worker. */
bool ct_reducer_may_launch_ahead(const ct_reducer *r);
/* Whether the communicator was told that another worker failed. */
bool ct_reducer_cancelled(const ct_reducer *r);

/* Replaces the net's parameters by rank root's (blocking). */
ct_status ct_reducer_broadcast_params(ct_reducer *r, int root, ct_error *err);
/* values (count) become their mean over the workers (blocking).  Errors:
 * the communicator's. */
ct_status ct_reducer_average_host(ct_reducer *r, double *values, size_t count, ct_error *err);
/* One line describing the plan, e.g. "10 buckets of up to 25.0 MB over
 * 60965224 parameters (232.56 MB), launched during backward on a dedicated
 * stream". */
void ct_reducer_describe(const ct_reducer *r, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
