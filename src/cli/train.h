/* The training path shared by `cortado train` and `cortado resnet50_trainer`
 * (cmd_train.c), and the CSV training log's command-line side
 * (train_csv.c). */
#ifndef CT_CLI_TRAIN_H
#define CT_CLI_TRAIN_H

#include <stdbool.h>

#include "caffe.pb-c.h"
#include "cli/cli.h"
#include "parallel/comm_nccl.h"
#include "parallel/ps.h"
#include "parallel/shards.h"
#include "solvers/csv_log.h"
#include "solvers/solver.h"

/* What a --csv_log file says beyond its rows; NULL fields are worked out
 * from the train flags and the solver (ct_cli_csv_open). */
typedef struct ct_cli_csv_info {
  const char *expname;  /* the run's name in generated file names */
  const char *params;   /* the first line after "# " */
  long long epoch_size; /* inputs per epoch; 0: the train Data layer's record count */
} ct_cli_csv_info;

/* Runs training as `cortado train` does after reading its solver: picks the
 * devices (--gpu, or the solver's solver_mode), trains on one device, on
 * several as threads, or as one rank under mpirun, with --csv_log written
 * by the root.  args are parsed against the train command's flag table
 * (ct_cli_cmd_train.flags); sp is edited in place (--level/--stage,
 * --dummy_data) and stays the caller's; csv may be NULL.  Reports its own
 * errors and returns a CT_EXIT_* status. */
int ct_cli_train_solver(const ct_cli_args *args, Caffe__SolverParameter *sp, const ct_cli_csv_info *csv);

/* The command's own flags as Python's argparse prints its Namespace, names
 * sorted: "Namespace(batch_size=32, gpus=None, train_data='x')" (strings
 * quoted, unset empty strings None, bools True/False, doubles with a '.';
 * secret flags, e.g. redis_password, as '***').  Caller frees. */
char *ct_cli_namespace(const ct_cli_args *args);

/* Inputs per epoch of a solver's train net: the record count of its first
 * Data layer that takes part in TRAIN, or 0 when there is none or its
 * database cannot be opened (the run itself reports that). */
long long ct_cli_train_epoch_size(const Caffe__SolverParameter *sp);

/* Whether the CSV log gets loss scaling's columns: --loss_scale is dynamic
 * or a number, or auto with --precision=fp16 or a train net that asks for
 * float16 (NVCaffe's default_forward_type / default_backward_type, a
 * layer's forward_type / backward_type) or sets global_grad_scale. */
bool ct_cli_loss_scale_columns(const ct_cli_args *args, const Caffe__SolverParameter *sp);

/* Opens --csv_log when it is set (else *out = NULL): the name, the
 * parameter line and the epoch size come from csv where given, else from
 * the train flags and sp ("<solver file's base name>_gpu<N>_lr<base_lr>").
 * ngpus is the device count of this process.  Errors: ct_csv_log_open's. */
ct_status ct_cli_csv_open(const ct_cli_args *args, const Caffe__SolverParameter *sp,
                          const ct_cli_csv_info *csv, int ngpus, ct_csv_log **out, ct_error *err);

/* Keeps main's argv (borrowed, for the lifetime of the program): the
 * data-parallel launcher starts the executable again with it. */
void ct_cli_set_argv(char **argv);

/* In a worker process that ct_cli_train_processes started: true, with its
 * rank, the worker count and the NCCL id from the environment (and the
 * process set to end when the launcher does).  False in any other process. */
bool ct_cli_dp_worker(int *rank, int *count, ct_nccl_id *id);

/* Trains on gpus[0..n) as n worker processes, one per GPU, each this
 * executable started again with main's arguments (train_procs.c); waits for
 * them.  When one fails the others are stopped; the error names the worker
 * and how it ended (the worker printed its own cause).  Returns a CT_EXIT_*
 * status. */
int ct_cli_train_processes(const int *gpus, int n);

/* Shards were asked for (cmd_train.c; train and time): several, or a
 * rendezvous store named. */
bool ct_cli_shards_requested(const ct_cli_args *args);
/* The shard flags (--num_shards, --shard_id, --run_id, --file_store_path or
 * --redis_host, ...) into *so; a usage message (CT_EXIT_USAGE, printed)
 * when they do not make a shard.  Returns a CT_EXIT_* status. */
int ct_cli_shard_opts(const ct_cli_args *args, ct_shard_opts *so);

/* --dp_mode and the parameter server's flags into o (train_ps.c); call
 * after ct_cli_check_ps_flags said they go together. */
void ct_cli_ps_opts(const ct_cli_args *args, ct_ps_opts *o);
/* CT_EXIT_USAGE (with the message printed) when the parameter server's
 * flags do not go with the others: a mode other than allreduce without
 * mpirun or shards, with pipeline stages or with --trace, --staleness without ssp, --num_servers
 * with allreduce, --bmuf_* without bmuf, a block momentum outside [0, 1);
 * else CT_EXIT_OK. */
int ct_cli_check_ps_flags(const ct_cli_args *args, bool pipeline);

/* How a pipeline's processes meet (train and time): as shards (*shards
 * true, their flags in *so) or as mpirun's ranks; a usage message
 * (CT_EXIT_USAGE, printed) for both at once or for neither.  Returns a
 * CT_EXIT_* status. */
int ct_cli_pipeline_processes(const ct_cli_args *args, ct_shard_opts *so, bool *shards);
/* The pipeline stages' world: mpirun's ranks (shards NULL), or this shard
 * joined to its run and connected to the others over Gloo (rank = shard
 * id; CPU stages only), its collectives giving up after comm_timeout_s
 * (<= 0: the default).  *ss (the session, whose store the communicator's
 * splits use; NULL under mpirun) is freed by the caller after *world.
 * Errors: GPU stages over shards (CT_ERR_UNSUPPORTED); the rendezvous's,
 * Gloo's or MPI's. */
ct_status ct_cli_pipeline_world(const ct_shard_opts *shards, int device, double comm_timeout_s,
                                ct_shard_session **ss, ct_comm **world, ct_error *err);
/* --pipeline's layer names, split at ','; *n gets their count.  Caller
 * frees the array and its first string.  Errors: an empty name. */
ct_status ct_cli_pipeline_cuts(const char *list, char ***out, int *n, ct_error *err);
/* --schedule and --recompute as a pipeline's options. */
ct_stages_opts ct_cli_stages_opts(const ct_cli_args *args);
/* Pipeline parallelism was asked for: --pipeline, or under mpirun a train
 * net whose layers say their stage (pipeline_stage). */
bool ct_cli_wants_pipeline(const ct_cli_args *args, const Caffe__SolverParameter *sp);
/* The device of this rank's pipeline stage: the CPU with --cpu or
 * --gpu=none, or without --gpu unless solver_gpu (the solver says
 * solver_mode: GPU); else the GPU of the
 * list (--gpu, or every GPU) at the rank's local rank, modulo the list's
 * length: ranks beyond it share GPUs (a warning says which), as two stages
 * of a net may.  Errors: --gpu's (a device that does not exist). */
ct_status ct_cli_stage_device(const ct_cli_args *args, bool solver_gpu, int *device,
                              ct_error *err);

/* One rank of `mpirun -np N cortado train --pipeline=...` (train_pipeline.c):
 * stage N mod P of replica N / P (P stages, N / P data-parallel replicas),
 * or with shards (not NULL) shard N of P, one stage each, on the CPU,
 * talking over Gloo;
 * trained with solver_opts plus the stage's part; watch(args, s) is called
 * with the solver before training (signals reach it) and with NULL after.
 * Failures that every rank meets alike (flags, the net, the plan) end each
 * rank with the message; a failure while training ends the job.  sp is
 * the caller's (restored on return).  Returns a CT_EXIT_* status. */
int ct_cli_train_pipeline(const ct_cli_args *args, Caffe__SolverParameter *sp,
                          const ct_solver_opts *solver_opts, const ct_shard_opts *shards,
                          void (*watch)(const ct_cli_args *args, ct_solver *s));

#endif
