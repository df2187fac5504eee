/* A sharded parameter server for data-parallel training beyond the
 * all-reduce: stale-synchronous (SSP), asynchronous and BMUF modes
 * (docs/distributed.md).
 *
 * Roles.  W worker ranks train as the all-reduce's workers do (their own
 * solver, their own shard of the data, rank 0 the root that logs and
 * snapshots); K server ranks, the last K of the communicator, each hold one
 * shard of the flat parameter buffer: the parameters [first_param,
 * end_param) of the net's flat order, cut at parameter boundaries into K
 * runs of about equal size (ct_ps_plan).  A server is a rank of its own
 * (not a thread of a worker) so that it serves while every worker computes
 * and needs no threaded MPI.
 *
 * Servers apply the solver's own update: each builds the same solver as the
 * workers and runs its update step (solver_update.c, every solver type,
 * lr_policy, momentum, weight decay) on its shard's parameters
 * (ct_solver_update_params).  Nothing here does update math.
 *
 *   ssp    per-worker clocks (iterations pushed).  A server keeps the
 *          gradients of each clock from every worker and, once all W are
 *          in, applies one update with their mean (summed in rank order,
 *          then divided by W: the all-reduce's arithmetic) as iteration
 *          `clock` of the schedule.  A worker starting clock c pulls the
 *          weights after clock c - S - 1 at least: its pull waits while
 *          fewer than c - S clocks are applied, i.e. while it is more than
 *          S clocks ahead of the slowest worker.  S = 0 is bulk
 *          synchronous and gives the all-reduce's weights bit for bit.
 *   async  no bound: each push is applied at once as its own update with
 *          the gradient divided by W (W pushes make about one all-reduce
 *          step), iteration base + pushes / W of the schedule; pulls are
 *          answered at once.
 *   bmuf   workers update locally with their solver and every `period`
 *          iterations push their weights; once all are in, the server
 *          filters the block: G = mean(w_i) - start (where the block
 *          began), D = m D + lr_b G, w_g += D, and the workers go on from
 *          start = w_g + m D (Nesterov) or w_g.
 *
 * Requests: the root decides.  Stop and snapshot wishes (signals) of the
 * other workers' and the servers' processes travel to the servers with the
 * pulls and on to the root with its next answer; the root acts on them as
 * on its own (a snapshot from the servers; a stop, which the servers then
 * announce to every worker in its next answer).
 *
 * Messages (ct_comm send/recv/probe with the tags below; any back end with
 * point to point and probe carries them): a header of CT_PS_HEADER 32-bit
 * integers, stored bit for bit in the first floats, then the payload.
 * Workers send requests (push, pull, block, fetch, init, done); a server
 * answers pulls, blocks and fetches, deferring those it cannot answer yet
 * and sending every answer without blocking.  Server 0 logs a line per
 * answered pull with the clock gap (a test parses them):
 *   PS clock: worker 2 at clock 17, slowest at 16, gap 1 (bound 2)
 *
 * The last pull of a run (the clock reaching max_iter) waits for every
 * worker's last update in every mode, so every worker ends with the
 * servers' final weights; a snapshot fetches the servers' state at the
 * root's clock (SSP: every clock before it applied; async: what is
 * applied now; BMUF: the global model of the last block). */
#ifndef CT_PARALLEL_PS_H
#define CT_PARALLEL_PS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"
#include "net/net.h"
#include "parallel/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How data-parallel workers combine their work (--dp_mode). */
typedef enum ct_dp_mode {
  CT_DP_ALLREDUCE = 0, /* gradients averaged by an all-reduce every iteration (runtime/reduce.h) */
  CT_DP_SSP,           /* parameter server, bounded staleness */
  CT_DP_ASYNC,         /* parameter server, no bound */
  CT_DP_BMUF           /* local updates, blocks filtered by the servers */
} ct_dp_mode;

/* The mode's name ("allreduce", "ssp", "async", "bmuf"). */
const char *ct_dp_mode_name(ct_dp_mode mode);
/* The mode of a name; CT_ERR_INVALID naming the known ones for others. */
ct_status ct_dp_mode_parse(const char *name, ct_dp_mode *mode, ct_error *err);

typedef struct ct_ps_opts {
  ct_dp_mode mode;
  int staleness;          /* ssp: S >= 0 */
  int num_servers;        /* K >= 1 */
  float block_lr;         /* bmuf: the block learning rate (1: Caffe2's default) */
  float block_momentum;   /* bmuf: in [0, 1); < 0: 1 - 1/W (Caffe2's default) */
  bool nesterov;          /* bmuf: workers start a block from w_g + m D */
  int sync_period;        /* bmuf: iterations per block (>= 1) */
} ct_ps_opts;

/* The tags of the parameter server's messages. */
enum { CT_PS_TAG_REQUEST = 32001, CT_PS_TAG_REPLY = 32002 };
/* 32-bit integers of a message's header. */
#define CT_PS_HEADER 4

/* One server's part of the flat buffers: values [lo, hi), parameters
 * [first_param, end_param) of net->params. */
typedef struct ct_ps_shard {
  size_t lo, hi;
  int first_param, end_param;
} ct_ps_shard;

/* Cuts net's parameters into k shards of about flat_count / k values each,
 * at parameter boundaries, in flat order (the order backward finalises
 * them): out[i] for i < k.  A shard may be empty when the net has fewer
 * parameters than k. */
void ct_ps_plan(const ct_net *net, int k, ct_ps_shard *out);

/* ------------------------------------------------------------ workers */

typedef struct ct_ps_client ct_ps_client;

/* The worker side for rank comm->rank (< workers) of net (borrowed; its
 * flat buffers are what is pushed and pulled), the servers being ranks
 * workers .. comm->size - 1; the clock starts at start_clock (the solver's
 * iteration: 0, or where a resumed run goes on), and the pull that reaches
 * max_iter is the run's last.  Errors: CT_ERR_INVALID when comm->size is
 * not workers + opts->num_servers. */
ct_status ct_ps_client_new(ct_ps_client **out, ct_comm *comm, const ct_ps_opts *opts, int workers,
                           ct_net *net, int start_clock, int max_iter, ct_error *err);
void ct_ps_client_free(ct_ps_client *c);
const ct_ps_opts *ct_ps_client_opts(const ct_ps_client *c);
/* Shards, and where shard k ends in the flat buffer (for placing pushes in
 * backward: shard k is final once that prefix is). */
int ct_ps_client_shards(const ct_ps_client *c);
size_t ct_ps_client_shard_end(const ct_ps_client *c, int k);
/* Whether the worker updates its own weights (bmuf) instead of pulling the
 * servers' every iteration. */
bool ct_ps_client_local_update(const ct_ps_client *c);
/* Before training, on every worker: rank 0 gives the servers their shards
 * of the net's weights and of history (nslots arrays laid out as the flat
 * buffer, e.g. a restored solver's; NULL with nslots 0: zeros), then every
 * worker pulls the weights of its start clock.  Errors: the communicator's. */
ct_status ct_ps_client_start(ct_ps_client *c, const float *history, int nslots, ct_error *err);
/* Step: pushes shard k of the gradient of this clock (ssp, async). */
ct_status ct_ps_push(ct_ps_client *c, int k, ct_error *err);
/* Step at the end of an iteration: the clock advances; ssp and async pull
 * the weights of the new clock (waiting as the mode says); bmuf at a block's
 * end (or the run's) sends its weights and takes the filtered ones.
 * Requests travel with it: a worker other than the root sends `wish` (its
 * process's stop and snapshot bits, CT_RT_*), and the root gets in
 * *relayed the union of what the others and the servers' processes wished
 * since its last pull (0 elsewhere), to act on as its own.  Errors: the
 * communicator's. */
ct_status ct_ps_pull(ct_ps_client *c, int wish, int *relayed, ct_error *err);
/* This worker's rank (0: the root). */
int ct_ps_client_rank(const ct_ps_client *c);
/* True once a server said the run stops (the root stopped early): the
 * worker stops after this iteration. */
bool ct_ps_stop_seen(const ct_ps_client *c);
/* The servers' state at this worker's clock (see the top) into flat (the
 * weights) and, unless bmuf, history (nslots arrays).  Errors: the
 * communicator's. */
ct_status ct_ps_fetch(ct_ps_client *c, float *flat, float *history, int nslots, ct_error *err);
/* After training: tells the servers this worker is done (stopped early
 * when `stopped`, which makes them stop the others).  Errors: the
 * communicator's. */
ct_status ct_ps_client_finish(ct_ps_client *c, bool stopped, ct_error *err);

/* Whether the launcher lets the other ranks go on when one dies: Open
 * MPI's mpirun does only when started with --enable-recovery (its
 * orte_enable_recovery, which it passes to every rank's environment);
 * otherwise a dead worker ends the job, as under the all-reduce.  True
 * for processes not started by mpirun (Gloo shards). */
bool ct_ps_launcher_keeps_survivors(void);

/* ------------------------------------------------------------ servers */

/* What a server needs of the solver it borrows: its net (the layout, and
 * flat_data / flat_diff / history as the shard's storage) and a way to run
 * the solver's update on the shard's parameters as iteration iter. */
typedef struct ct_ps_update {
  ct_net *net;
  float *history;   /* nslots arrays of net->flat_count */
  int nslots;
  bool clip;        /* the solver clips gradients (global norm: one shard only) */
  /* The solver's update of parameters [first, end) from net->flat_diff,
   * as iteration iter (ct_solver_update_params). */
  void (*apply)(void *solver, int iter, int first, int end);
  void *solver;
  /* The server process's stop and snapshot wishes (its signal word, taken
   * atomically), relayed to the root with the workers' (may be NULL). */
  int *requests;
} ct_ps_update;

/* Serves shard comm->rank - workers until every worker is done.  Errors:
 * the communicator's (a worker that died: CT_ERR_COMM after the timeout);
 * CT_ERR_INVALID for gradient clipping with more than one server. */
ct_status ct_ps_serve(ct_comm *comm, const ct_ps_opts *opts, int workers, const ct_ps_update *u,
                      ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
