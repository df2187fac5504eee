/* Data-parallel training: W workers, each a full solver on its own device
 * and its own shard of the data, kept identical by averaging gradients.
 *
 * Workers are either the threads of one process (one per GPU, NCCL between
 * them; or CPU workers through the "threads" communicator), the processes
 * of an MPI job (one per rank: NCCL between GPUs, MPI between CPU workers),
 * or Caffe2-style shards: processes that meet through a file or Redis
 * store, each driving its GPUs as threads (NCCL across all of them) or one
 * CPU worker (Gloo between the shards).
 * The same worker code runs in both; per worker:
 *
 *   - its own ct_context with rank/world set, so data layers read only
 *     their shard (positions g with g % world == rank);
 *   - its own ct_solver; rank 0 is the root (logs, snapshots), the others
 *     are replicas (quiet, never snapshot);
 *   - after --weights / resume, the parameters are broadcast from rank 0 so
 *     that all replicas start equal;
 *   - gradients are averaged in buckets (25 MB by default) in flat-buffer
 *     order, which is the order gradients become final in backward: the
 *     solver's runtime places each bucket's all-reduce in the iteration's
 *     program right after the layer that finalises it (runtime/reduce.h),
 *     on GPUs on a dedicated stream ordered after the compute stream by an
 *     event, so it overlaps the rest of backward and is a node of the
 *     iteration's CUDA graph; the update waits for every bucket, and the
 *     host waits for the iteration under the communicator's watchdog.  With
 *     iter_size > 1 only the last pass reduces: one reduction per iteration;
 *   - tests run on every worker and their outputs are averaged;
 *   - stop/snapshot requests (signals) are sampled by one worker of each
 *     process and agreed on by all workers every iteration (a request of
 *     any process counts), so all act on the same iteration.
 *
 * Failure: a worker that fails (a forward error, a NaN loss, a CUDA or NCCL
 * error, a communicator timeout) records the first failure, raises the
 * shared cancel flag and aborts its communicator; the other workers give up
 * at their next wait, and the run returns that failure naming the worker
 * ("worker 1 (GPU 1) failed: ...").  A worker that has not stopped
 * CORTADO_STOP_GRACE seconds (20) after a failure is stuck where no
 * watchdog reaches, and the process ends (status 1) after logging the
 * failure.  Under MPI the failing rank logs its
 * error and the caller ends the job (ct_mpi_abort_job).  Snapshots are
 * written atomically, so the last one stays intact. */
#ifndef CT_PARALLEL_DP_H
#define CT_PARALLEL_DP_H

#include <stdbool.h>
#include <stddef.h>

#include "caffe.pb-c.h"
#include "core/status.h"
#include "parallel/comm_nccl.h"
#include "parallel/ps.h"
#include "parallel/shards.h"
#include "solvers/solver.h"

#ifdef __cplusplus
extern "C" {
#endif


/* What to train: the same for every worker. */
typedef struct ct_dp_job {
  const Caffe__SolverParameter *solver_param; /* borrowed */
  ct_solver_opts solver_opts; /* `replica` and `quiet_nets` are set per worker */
  const char *weights;        /* comma-separated .caffemodel files to start from, or NULL */
  const char *resume;         /* a .solverstate to resume from, or NULL */
  bool global_batch;          /* the net's batch sizes are global: divide them by world */
  bool strict_fp32;           /* GPU math without TF32 (--math=fp32) */
  ct_dtype precision;         /* 16-bit type of layers that have one (--precision), CT_F32: none */
  bool precision_given;       /* --precision was set (overrides the nets' default_forward_type) */
  ct_reduce_opts dp;
  /* How workers combine their work: the all-reduce (mode CT_DP_ALLREDUCE,
   * zeroed: the default), or parameter servers (ps.h; ct_dp_train_mpi on
   * CPU ranks only: the last num_servers ranks serve, the others train). */
  ct_ps_opts ps;
  /* Called on each worker's thread once its solver is built, its weights
   * loaded or its state restored, before the parameters are broadcast from
   * rank 0 and training starts (a failure ends the worker with it); and
   * before that solver is freed.  Both may be NULL.  (The Python package
   * adds its callbacks to each worker's solver here.) */
  ct_status (*on_solver)(void *user, ct_solver *s, ct_error *err);
  void (*on_solver_end)(void *user, ct_solver *s);
  void *user;
} ct_dp_job;

/* Trains with `n` worker threads in this process: worker i on GPU gpus[i],
 * or, when gpus is NULL, n CPU workers (the "threads" communicator).  The
 * calling thread waits for all of them.  Returns CT_OK when every worker
 * finished (including a requested stop), else the first failure, prefixed
 * "worker R (GPU G) failed: " (or "worker R (CPU) failed: ").  Errors before
 * training (a --global_batch that does not divide, no NCCL) name their
 * cause. */
ct_status ct_dp_train_threads(const ct_dp_job *job, const int *gpus, int n, ct_error *err);

/* Trains as worker `rank` of `n` processes on this host, one per GPU (the
 * processes that `cortado train --gpu=...` starts; see
 * src/cli/train_procs.c): this one drives gpus[rank], and all join one NCCL
 * communicator whose id the launching process made.  Ranks other than 0
 * silence their INFO lines; the Data layers share the host's cores among
 * the n processes.  On failure returns the error prefixed "worker R (GPU G)
 * failed at iteration I: "; the launcher then stops the other processes. */
ct_status ct_dp_train_process(const ct_dp_job *job, const int *gpus, int n, int rank,
                              const ct_nccl_id *id, ct_error *err);
/* Seconds the other workers (threads or processes) get to stop after one
 * failed: CORTADO_STOP_GRACE (> 0) from the environment, else 20. */
double ct_dp_stop_grace_s(void);
/* Async-signal-safe: makes the running ct_dp_train_process stop at its next
 * wait for the other workers (CT_ERR_INTERRUPTED), as a worker thread stops
 * when another fails; what it was doing on the host (a snapshot) finishes
 * first.  Does nothing outside ct_dp_train_process. */
void ct_dp_cancel(void);

/* Trains as one rank of an MPI job (started by mpirun; MPI is initialised
 * here).  With parameter servers (job->ps) the last num_servers ranks each
 * serve a shard (building the same solver for its update) and the others
 * are the workers, ranks 0 .. W - 1, data shards and --global_batch counted
 * over W; errors every rank meets alike: a GPU, no worker left, gradient
 * clipping with several servers (CT_ERR_UNSUPPORTED / CT_ERR_INVALID).  node_gpus lists the GPUs of each node (n_node_gpus > 0): the rank
 * with local rank L takes node_gpus[L] and all ranks join one NCCL
 * communicator (its id shared by MPI); n_node_gpus == 0 trains on the CPU
 * with gradients through MPI.  Ranks other than 0 silence their INFO lines.
 * On failure returns the error prefixed "rank R (GPU G) failed: "; the
 * caller should then end the job with ct_mpi_abort_job so that the other
 * ranks stop at once.  CT_ERR_UNSUPPORTED in a build without MPI. */
ct_status ct_dp_train_mpi(const ct_dp_job *job, const int *node_gpus, int n_node_gpus,
                          ct_error *err);

/* What parameter servers (job->ps) cannot run on `ranks` MPI ranks, the
 * same on every rank: no worker left beside the servers, gradient clipping
 * (a global norm) over several servers (CT_ERR_INVALID, the message
 * starting "--dp_mode=").  CT_OK for the all-reduce. */
ct_status ct_dp_check_ps(const ct_dp_job *job, int ranks, ct_error *err);

/* Trains as shard `shard->shard_id` of `shard->num_shards` processes that
 * meet through a rendezvous store (see shards.h), without MPI.  With
 * n_gpus > 0 the shard drives gpus[0..n_gpus) as worker threads: the world
 * is num_shards x n_gpus ranks, global rank = shard_id x n_gpus + local
 * index, all in one NCCL communicator whose id global rank 0 makes and
 * shares through the store (every shard must drive the same number of
 * GPUs).  With n_gpus == 0 the shard is one CPU worker of rank shard_id and
 * gradients go through the "gloo" communicator (TCP, bound as
 * shard->gloo_iface / gloo_host say).  Rank 0 logs the world and the
 * effective batch.  Errors: the rendezvous's (a shard that never arrived,
 * a reused run id, a store that cannot be reached); a worker's failure,
 * prefixed "shard K of N: worker R (CPU) failed at iteration I: ";
 * CT_ERR_UNSUPPORTED in a build without Gloo.  A dead or stopped shard makes
 * the others fail within the communicator's timeout. */
ct_status ct_dp_train_shards(const ct_dp_job *job, const ct_shard_opts *shard, const int *gpus,
                             int n_gpus, ct_error *err);

/* Asks the running data-parallel job of this process to stop and/or
 * snapshot (ct_solver_action bits).  Async-signal-safe.  One worker of this
 * process samples the request once per iteration and all workers of the
 * job act on it together. */
void ct_dp_request(int actions);

/* Makes the net's batch sizes global: every data layer of the train net
 * (Data, ImageData, HDF5Data, MemoryData, WindowData, DummyData, Input)
 * that takes part in the TRAIN phase gets batch / world.  Net files named
 * by the solver are read into its *_param fields first.  Errors:
 * CT_ERR_INVALID "--global_batch: layer 'data' (Data) has batch_size 250,
 * which 3 workers do not divide", or when no such layer exists; the
 * readers' errors for net files. */
ct_status ct_dp_divide_batch(Caffe__SolverParameter *sp, int world, ct_error *err);

/* Reads the net files a solver names (net, train_net, test_net) into the
 * matching *_param fields, so that callers can edit the nets in memory.
 * Errors: the reader's, naming the file. */
ct_status ct_dp_inline_nets(Caffe__SolverParameter *sp, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
