/* The gradient reducer of one data-parallel worker (dp_reduce.c): the bucket
 * plan over the net's flat gradient and the gradient hook that launches
 * buckets during backward (on a GPU asynchronously, on the CPU as blocking
 * host all-reduces).  Internal to src/parallel. */
#ifndef CT_PARALLEL_DP_REDUCE_H
#define CT_PARALLEL_DP_REDUCE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "net/net.h"
#include "parallel/comm.h"
#include "parallel/dp.h"

typedef struct ct_dp_reducer ct_dp_reducer;

/* A reducer for net (borrowed) on ctx's device over comm.  The flat
 * gradient is cut into buckets of opts->bucket_bytes (0: 25 MB; rounded
 * down to a multiple of 256 bytes, at least 256).  Timing (GPU, opts->timing_iters) is
 * logged when log_timing.  Errors: those of ct_dp_gpu_create. */
ct_status ct_dp_reducer_create(ct_dp_reducer **out, ct_net *net, ct_context *ctx, ct_comm *comm,
                               const ct_dp_options *opts, bool log_timing, ct_error *err);
void ct_dp_reducer_free(ct_dp_reducer *r);

/* Replaces the net's parameters by rank root's (blocking). */
ct_status ct_dp_reducer_broadcast_params(ct_dp_reducer *r, int root, ct_error *err);
/* Before backward pass `pass` of `npasses`: arms the gradient hook on the
 * last pass, disarms it otherwise. */
void ct_dp_reducer_before_backward(ct_dp_reducer *r, int pass, int npasses);
/* After the iteration's backward passes: launches the buckets the hook has
 * not.  On a GPU this only enqueues work and makes the compute stream's
 * later work (the update) wait for every bucket; it is capturable, so that
 * a CUDA graph of the whole iteration holds the all-reduces, each ordered
 * after the layers that finalise its bucket.  On the CPU the gradient is
 * the mean over workers on return.  Errors: the communicator's, or a launch
 * failure from the hook. */
ct_status ct_dp_reducer_launch_rest(ct_dp_reducer *r, ct_error *err);
/* At the end of each captured CUDA graph segment (GPU): joins the bucket
 * launches the segment forked, so that the capture can end; a bucket
 * launched before a step that cannot be captured is thus waited for there.
 * Errors: CT_ERR_DEVICE. */
ct_status ct_dp_reducer_capture_end(ct_dp_reducer *r, ct_error *err);
/* Blocks until solver iteration seq (ctx->seq numbering; 0: all the work
 * enqueued so far) is done (GPU, under the communicator's watchdog; the
 * iteration after it may be running) and logs the bucket timing of the
 * iterations asked for; a no-op wait on the CPU.  Errors: the
 * communicator's (CT_ERR_COMM / CT_ERR_INTERRUPTED). */
ct_status ct_dp_reducer_wait(ct_dp_reducer *r, unsigned seq, ct_error *err);
/* Whether the requests travel inside the iterations (a GPU reducer with
 * buckets): then ct_dp_reducer_carry gives each iteration its wish before
 * it is launched, and ct_dp_reducer_agree reads what it carried. */
bool ct_dp_reducer_carries_requests(const ct_dp_reducer *r);
/* Before iteration seq is launched: the wish it carries (rank 0: its
 * pending signals as CT_SOLVER_ACTION_* bits; the others: 0). */
void ct_dp_reducer_carry(ct_dp_reducer *r, unsigned seq, int requests);
/* After ct_dp_reducer_wait(seq): agrees with the other workers on the solver
 * actions that rank 0 was asked for, so that all act after the same
 * iteration; *agreed is the union of the wishes over workers.  When the
 * requests travel inside the iterations, *agreed is what iteration seq
 * carried and `requests` is not used (no host round trip); otherwise (the
 * CPU, or a net without a gradient to launch) `requests` is this worker's
 * wish and the union is a host all-reduce now.  Errors: the
 * communicator's. */
ct_status ct_dp_reducer_agree(ct_dp_reducer *r, unsigned seq, int requests, int *agreed,
                              ct_error *err);
/* Whether the solver may launch an iteration before it finished the one
 * before (ct_solver_hooks.may_launch_ahead): not while the bucket timing is
 * being sampled, whose events one iteration at a time are read.  The same
 * answer on every worker. */
bool ct_dp_reducer_may_launch_ahead(const ct_dp_reducer *r);
/* launch_rest then wait: the flat gradient is the mean over workers on
 * return. */
ct_status ct_dp_reducer_finish(ct_dp_reducer *r, ct_error *err);
/* One line describing the plan, e.g. "10 buckets of up to 25.0 MB over
 * 60965224 parameters (232.56 MB), launched during backward on a dedicated
 * stream". */
void ct_dp_reducer_describe(const ct_dp_reducer *r, char *buf, size_t size);

#endif
