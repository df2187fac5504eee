/* cortado train: train a network from a solver definition, or fine-tune or
 * resume one. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/run_common.h"
#include "cli/signals.h"
#include "cli/train.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/signals.h"
#include "gpu/gpu.h"
#include "net/net_load.h"
#include "parallel/comm_mpi.h"
#include "parallel/dp.h"
#include "parallel/dp_agree.h"
#include "parallel/launch.h"
#include "proto/reflect.h"
#include "solvers/solver.h"

static const ct_flag_spec train_flags[] = {
    {"solver", CT_FLAG_STRING, NULL,
     "The solver definition: a SolverParameter prototxt file (required).", .meta = "FILE"},
    {"snapshot", CT_FLAG_STRING, NULL,
     "A .solverstate file to resume training from. Not together with --weights.",
     .meta = "FILE"},
    {"weights", CT_FLAG_STRING, NULL,
     "Pretrained .caffemodel files to fine-tune from, separated by ','. Not together with "
     "--snapshot.",
     .meta = "FILES"},
    {"strict_weights", CT_FLAG_BOOL, "false",
     "A layer with parameters that gets no weights from --weights (or the solver's weights: "
     "the file was cut short, or the layer renamed) is an error instead of a warning."},
    {"gpu", CT_FLAG_GPU_LIST, NULL,
     "Devices to train on: ids separated by ',' or 'all', or 'none' for the CPU. With "
     "several, training is data parallel and the effective batch size grows with the device "
     "count. Left out, the solver's solver_mode and device_id decide."},
    CT_CLI_FLAG_CPU,
    CT_CLI_FLAG_LEVEL,
    CT_CLI_FLAG_STAGE,
    CT_CLI_FLAG_MATH,
    CT_CLI_FLAG_PRECISION,
    {"loss_scale", CT_FLAG_STRING, "auto",
     "Loss scaling, for gradients in float16: 'dynamic' starts at 65536, halves the scale and "
     "skips the update when the gradient overflows, and doubles it after --loss_scale_window "
     "clean updates; a number is a static scale (an update that overflows is still skipped); "
     "'off' scales nothing; 'dynamic:N' is dynamic from N. 'auto': the net's global_grad_scale "
     "(NVCaffe) when it sets one, else dynamic when a layer of the train net computes in "
     "float16, else off.",
     .meta = "auto|dynamic|dynamic:N|off|N"},
    {"loss_scale_window", CT_FLAG_INT, "2000",
     "Dynamic loss scaling: clean updates in a row before the scale doubles.", .min = 1,
     .max = 1000000000},
    {"sigint_effect", CT_FLAG_STRING, "stop", "What SIGINT (Ctrl-C) does to the run.",
     .choices = "stop|snapshot|snapshot_stop|none"},
    {"sighup_effect", CT_FLAG_STRING, "snapshot", "What SIGHUP does to the run.",
     .choices = "stop|snapshot|snapshot_stop|none"},
    {"sigterm_effect", CT_FLAG_STRING, "snapshot_stop",
     "What SIGTERM (a cluster scheduler's warning before it kills) does to the run: by default a "
     "snapshot after the current iteration, then a clean stop (status 0).",
     .choices = "stop|snapshot|snapshot_stop|none"},
    {"global_batch", CT_FLAG_BOOL, "false",
     "Data parallel: read the net's batch_size as the global batch and divide it among the "
     "GPUs (an error when it does not divide). Without it batch_size is per GPU, as in Caffe."},
    {"bucket_mb", CT_FLAG_DOUBLE, "25",
     "Data parallel: size in MB of the gradient buckets averaged while backward runs (the "
     "last one, reduced last, is cut where layers' gradients become final)."},
    {"allreduce_dtype", CT_FLAG_STRING, "auto",
     "Data parallel on GPUs: the type gradients are all-reduced in. 'auto': the 16-bit type of "
     "a mixed-precision net (half the bytes; the sums of two values round once more), else "
     "fp32.",
     .choices = "auto|fp32|bf16|fp16"},
    {"nccl_max_ctas", CT_FLAG_INT, "0",
     "Data parallel on GPUs: at most this many thread blocks (SMs) for each NCCL all-reduce, "
     "which runs beside backward and takes its SMs from it; 0: NCCL's own choice (more "
     "blocks, faster alone).",
     .min = 0, .max = 64},
    {"comm_timeout", CT_FLAG_DOUBLE, NULL,
     "Data parallel: seconds a worker waits for the others before giving up (the default comes "
     "from CORTADO_COMM_TIMEOUT when it is set).",
     .setting = "CORTADO_COMM_TIMEOUT"},
    {"dp_workers", CT_FLAG_STRING, "processes",
     "Data parallel on several GPUs of this machine: one process per GPU (the launcher "
     "starts them and waits), or one thread per GPU in this process. Processes do not share "
     "the CUDA driver's locks, which makes iterations shorter on 4 and 8 GPUs.",
     .choices = "processes|threads"},
    {"dp_timing", CT_FLAG_INT, "0",
     "Data parallel on GPUs: log when each gradient bucket was ready, started and finished "
     "(relative to the start of backward) for this many iterations after 5 warm-up ones.",
     .min = 0, .max = 1000000},
    CT_CLI_FLAG_DUMMY_DATA,
    CT_CLI_FLAG_DUMMY_SHAPE,
    CT_CLI_FLAGS_SHARDS,
    {"csv_log", CT_FLAG_STRING, NULL,
     "Also write a CSV training log as Caffe2's trainers do: a row per display interval. A "
     "directory (ending in '/' or existing) gets a name made of the run's parameters and a "
     "timestamp; anything else is the file.",
     .meta = "FILE|DIR"},
    {"pipeline", CT_FLAG_STRING, NULL,
     "Pipeline parallelism: cut the train net after these layers (names separated by ','; "
     "P - 1 names make P stages) and train stage r on rank r of `mpirun -np P` (CPU ranks, or "
     "with --gpu the GPU of each rank's local rank, ranks beyond the list sharing its GPUs), "
     "or on shard r of P Gloo shards (--num_shards=P, CPU stages); D x P CPU ranks or shards "
     "train D data-parallel replicas of the stages. "
     "Tops that cross a cut go forward by MPI (or Gloo), their diffs come back the same way; "
     "stage 0 writes the snapshots.",
     .meta = "LAYERS"},
    {"microbatches", CT_FLAG_INT, "0",
     "With --pipeline: micro-batches per iteration, each a batch of the net's batch_size, "
     "their gradients accumulated as iter_size's passes are (in the order of --schedule); 0: "
     "the solver's iter_size.",
     .min = 0, .max = 65536},
    {"schedule", CT_FLAG_STRING, "gpipe",
     "With --pipeline: the order of the micro-batches on each stage: every forward, then every "
     "backward (gpipe), or P - s - 1 forwards ahead on stage s, then one forward and one "
     "backward in turn (1f1b: fewer micro-batches held at once). The same weights either way.",
     .choices = "gpipe|1f1b"},
    {"recompute", CT_FLAG_BOOL, "true",
     "With --pipeline and more than one micro-batch: recompute each micro-batch's forward on a "
     "stage before its backward from the stage's inputs, kept per micro-batch (true: less "
     "memory, a forward more), or keep every micro-batch's activations instead (false: the "
     "values the backward reads and the layers' state, such as a dropout's mask; no forward "
     "recomputed, more memory). The same weights either way, except that a recomputed "
     "Dropout draws a new mask."},
    {"dp_mode", CT_FLAG_STRING, "allreduce",
     "Data parallel under mpirun or over Gloo shards: average the gradients every iteration "
     "(allreduce), or train through parameter servers (GPU workers under mpirun, CPU ones "
     "either way), the last --num_servers ranks (or shards), each "
     "holding a shard of the parameters and applying the solver's update: ssp (a worker "
     "runs at most --staleness iterations ahead of the slowest), async (no bound) or bmuf "
     "(local updates, blocks of --bmuf_sync_period iterations filtered with block momentum). "
     "See docs/distributed.md.",
     .choices = "allreduce|ssp|async|bmuf"},
    {"staleness", CT_FLAG_INT, "0",
     "With --dp_mode=ssp: how many iterations a worker may run ahead of the slowest one; "
     "0 is bulk synchronous (the all-reduce's weights exactly).",
     .min = 0, .max = 1000000},
    {"num_servers", CT_FLAG_INT, "1",
     "With --dp_mode=ssp|async|bmuf: parameter servers, the job's last ranks or shards (the "
     "others train); the parameters are cut into this many shards at parameter boundaries.",
     .min = 1, .max = 65536},
    {"bmuf_block_lr", CT_FLAG_DOUBLE, "1",
     "With --dp_mode=bmuf: the block learning rate applied to each block's mean model change."},
    {"bmuf_block_momentum", CT_FLAG_DOUBLE, NULL,
     "With --dp_mode=bmuf: the block momentum, in [0, 1); left out, 1 - 1/W for W workers "
     "(Caffe2's default)."},
    {"bmuf_nesterov", CT_FLAG_BOOL, "true",
     "With --dp_mode=bmuf: workers start each block from the filtered model plus the block "
     "momentum's step (Nesterov), else from the filtered model."},
    {"bmuf_sync_period", CT_FLAG_INT, "10",
     "With --dp_mode=bmuf: iterations per block (local updates between two syncs).",
     .min = 1, .max = 1000000},
    CT_CLI_FLAG_TRACE,
    CT_CLI_FLAG_TRACE_ITERS,
};

/* The solver that SIGINT/SIGHUP/SIGTERM act on, and what they ask of it. */
static ct_solver *volatile g_solver;
static int g_sigint_action, g_sighup_action, g_sigterm_action;

static volatile sig_atomic_t g_data_parallel; /* requests go to the data-parallel job */
static volatile pid_t g_launcher;             /* a launched worker process: its launcher */

/* In a worker process: a SIGTERM of the launcher itself (another worker
 * failed) or of the kernel when the launcher died, as opposed to one it
 * passes on from the user or a scheduler (sigqueue'd, marked). */
static bool from_launcher(const siginfo_t *si) {
  if (!g_launcher || !si) return false;
  if (si->si_code == SI_QUEUE && si->si_value.sival_int == CT_LAUNCH_FORWARDED) return false;
  return si->si_pid == g_launcher || si->si_pid == 0;
}

static void on_signal(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  if (sig == SIGINT && ct_cli_signal_from_self(si)) ct_cli_die_self_signal(sig);
  if (sig == SIGTERM && from_launcher(si)) {
    ct_dp_cancel(); /* stop at the next wait, no snapshot */
    return;
  }
  int action = sig == SIGINT ? g_sigint_action : sig == SIGHUP ? g_sighup_action : g_sigterm_action;
  if (g_data_parallel) {
    ct_dp_request(action);
    return;
  }
  ct_solver *s = g_solver;
  if (s) ct_solver_request(s, action);
}

static int effect_action(const char *effect) {
  if (strcmp(effect, "stop") == 0) return CT_SOLVER_ACTION_STOP;
  if (strcmp(effect, "snapshot") == 0) return CT_SOLVER_ACTION_SNAPSHOT;
  if (strcmp(effect, "snapshot_stop") == 0) return CT_SOLVER_ACTION_SNAPSHOT | CT_SOLVER_ACTION_STOP;
  return CT_SOLVER_ACTION_NONE;
}

static void install_signals(const ct_cli_args *args) {
  g_sigint_action = effect_action(ct_cli_string(args, "sigint_effect"));
  g_sighup_action = effect_action(ct_cli_string(args, "sighup_effect"));
  g_sigterm_action = effect_action(ct_cli_string(args, "sigterm_effect"));
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  /* this thread trains: the relay thread runs on_signal (core/signals.h) */
  if (ct_signals_start_relay()) ct_signals_block_async(NULL);
}

/* --level and --stage go into the solver's train_state, as Caffe's tool does. */
static void apply_state_flags(const ct_cli_args *args, Caffe__SolverParameter *sp) {
  int nstages;
  char **stages = ct_cli_stages(args, &nstages);
  if (!ct_cli_is_set(args, "level") && nstages == 0) return;
  const ProtobufCFieldDescriptor *f = ct_pb_field(&caffe__solver_parameter__descriptor, "train_state");
  Caffe__NetState *st = (Caffe__NetState *)ct_pb_mutable_message(&sp->base, f);
  st->has_level = 1;
  st->level = ct_cli_int(args, "level");
  if (nstages > 0) {
    st->stage = ct_xrealloc(st->stage, (st->n_stage + (size_t)nstages) * sizeof(char *));
    for (int i = 0; i < nstages; i++) st->stage[st->n_stage++] = ct_xstrdup(stages[i]);
  }
  free(stages);
}

/* The GPUs to train on: none (the CPU) for --cpu or --gpu=none, --gpu's
 * ids ('all': every visible GPU), else the solver's device_id when its
 * solver_mode is GPU, else none.  A missing GPU's message says how to train
 * on the CPU instead. */
static ct_status pick_train_gpus(const ct_cli_args *args, const Caffe__SolverParameter *sp,
                                 ct_gpu_list *gpus, ct_error *err) {
  memset(gpus, 0, sizeof *gpus);
  bool cpu;
  CT_TRY(ct_cli_wants_cpu(args, &cpu, err));
  if (cpu) return CT_OK;
  if (ct_cli_is_set(args, "gpu")) {
    if (ct_cli_resolve_gpus(ct_cli_gpus(args, "gpu"), gpus, err) == CT_OK) return CT_OK;
    char where[64];
    snprintf(where, sizeof where, "--gpu=%.40s", ct_cli_text(args, "gpu"));
    return ct_cli_gpu_failed(err, where, "--cpu (or --gpu=none) trains on the CPU");
  }
  if (sp->has_solver_mode && sp->solver_mode == CAFFE__SOLVER_PARAMETER__SOLVER_MODE__GPU) {
    ct_gpu_list want = {.n = 1, .ids = {sp->has_device_id ? sp->device_id : 0}};
    if (ct_cli_resolve_gpus(&want, gpus, err) == CT_OK) return CT_OK;
    char where[CT_ERROR_MSG_MAX / 2];
    snprintf(where, sizeof where, "%s says solver_mode: GPU", ct_cli_string(args, "solver"));
    return ct_cli_gpu_failed(err, where, "train on the CPU with --cpu (or --gpu=none), or set solver_mode: CPU");
  }
  return CT_OK;
}

static void log_gpus(const ct_gpu_list *gpus) {
  if (gpus->n == 0) {
    LOG_INFO("Use CPU.");
    ct_cli_log_cpu();
  } else if (gpus->n == 1) {
    LOG_INFO("Use GPU with device ID %d", gpus->ids[0]);
  } else {
    char list[CT_GPU_LIST_MAX * 4 + 1];
    int len = 0;
    for (int i = 0; i < gpus->n; i++)
      len += snprintf(list + len, sizeof list - (size_t)len, "%s%d", i ? ", " : "", gpus->ids[i]);
    LOG_INFO("Using GPUs %s", list);
  }
}

/* --dummy_data: the solver's nets are read in and their data layers become
 * DummyData. */
static ct_status apply_dummy_data(const ct_cli_args *args, Caffe__SolverParameter *sp, ct_error *err) {
  if (!ct_cli_bool(args, "dummy_data")) return CT_OK;
  int chw[3], *pchw;
  CT_TRY(ct_cli_dummy_shape(args, chw, &pchw, err));
  CT_TRY(ct_dp_inline_nets(sp, err));
  if (sp->net_param) CT_TRY(ct_net_param_replace_data_layers(sp->net_param, pchw, err));
  if (sp->train_net_param) CT_TRY(ct_net_param_replace_data_layers(sp->train_net_param, pchw, err));
  for (size_t i = 0; i < sp->n_test_net_param; i++)
    CT_TRY(ct_net_param_replace_data_layers(sp->test_net_param[i], pchw, err));
  return CT_OK;
}

/* --loss_scale and --loss_scale_window.  Errors (CT_ERR_INVALID): a value
 * that is none of the words and no positive finite number. */
static ct_status loss_scale_opts(const ct_cli_args *args, ct_loss_scale_opts *o, ct_error *err) {
  const char *v = ct_cli_string(args, "loss_scale");
  *o = (ct_loss_scale_opts){.window = (unsigned)ct_cli_int(args, "loss_scale_window")};
  if (strcmp(v, "auto") == 0) o->mode = CT_LOSS_SCALE_AUTO;
  else if (strcmp(v, "dynamic") == 0) o->mode = CT_LOSS_SCALE_DYNAMIC;
  else if (strcmp(v, "off") == 0) o->mode = CT_LOSS_SCALE_OFF;
  else {
    const bool dynamic = strncmp(v, "dynamic:", 8) == 0;
    const char *num = dynamic ? v + 8 : v;
    char *end = NULL;
    const double d = strtod(num, &end);
    if (end == num || *end != '\0' || !isfinite(d) || d <= 0 || d > 3.4e38)
      return ct_error_set(err, CT_ERR_INVALID,
                          "--loss_scale=%s: give auto, dynamic, dynamic:N, off or a positive "
                          "number N",
                          v);
    o->mode = dynamic ? CT_LOSS_SCALE_DYNAMIC : CT_LOSS_SCALE_STATIC;
    o->init = (float)d;
  }
  return CT_OK;
}

/* The solver options from the flags, and the CSV log (when there is one). */
static ct_solver_opts solver_opts(const ct_cli_args *args, ct_csv_log *csv) {
  ct_solver_opts o = {0};
  o.strict_weights = ct_cli_bool(args, "strict_weights");
  ct_error ignored;
  (void)loss_scale_opts(args, &o.loss_scale, &ignored); /* checked by check_train_flags */
  if (csv) {
    o.on_display = ct_csv_log_on_display;
    o.display_user = csv;
  }
  return o;
}

static void fill_job(const ct_cli_args *args, const Caffe__SolverParameter *sp, ct_csv_log *csv,
                     ct_dp_job *job) {
  memset(job, 0, sizeof *job);
  job->solver_param = sp;
  job->solver_opts = solver_opts(args, csv);
  job->weights = ct_cli_is_set(args, "weights") ? ct_cli_string(args, "weights") : NULL;
  job->resume = ct_cli_is_set(args, "snapshot") ? ct_cli_string(args, "snapshot") : NULL;
  job->global_batch = ct_cli_bool(args, "global_batch");
  bool tf32 = true;
  ct_error ignored = {0};
  (void)ct_cli_precision(args, &tf32, &job->precision, &job->precision_given, &ignored);
  job->strict_fp32 = !tf32;
  job->dp.bucket_bytes = (size_t)(ct_cli_double(args, "bucket_mb") * 1048576.0);
  job->dp.timeout_s = ct_cli_double(args, "comm_timeout");
  job->dp.timing_iters = ct_cli_int(args, "dp_timing");
  job->dp.nccl_max_ctas = ct_cli_int(args, "nccl_max_ctas");
  const char *ad = ct_cli_string(args, "allreduce_dtype");
  job->dp.dtype_given = strcmp(ad, "auto") != 0;
  job->dp.dtype = strcmp(ad, "bf16") == 0 ? CT_BF16 : strcmp(ad, "fp16") == 0 ? CT_F16 : CT_F32;
  ct_cli_ps_opts(args, &job->ps);
}

bool ct_cli_shards_requested(const ct_cli_args *args) {
  return ct_cli_int(args, "num_shards") > 1 || ct_cli_is_set(args, "file_store_path") ||
         ct_cli_is_set(args, "redis_host");
}

/* A data-parallel driver (ct_dp_train_*) bound to its own arguments. */
typedef ct_status (*dp_driver)(const ct_dp_job *job, const void *arg, ct_error *err);

/* What the launches in this process share around their driver: the job
 * from the flags, SIGINT/SIGHUP to the job, the log lines around it, and
 * the driver's error as the command's. */
static int run_dp(const ct_cli_args *args, const Caffe__SolverParameter *sp, ct_csv_log *csv,
                  dp_driver drive, const void *arg) {
  ct_dp_job job;
  fill_job(args, sp, csv, &job);
  g_data_parallel = 1;
  install_signals(args);
  LOG_INFO("Starting Optimization");
  if (job.resume) LOG_INFO("Resuming from %s", job.resume);
  ct_error err;
  int rc = CT_EXIT_OK;
  if (drive(&job, arg, &err) != CT_OK) rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  else LOG_INFO("Optimization Done.");
  g_data_parallel = 0;
  return rc;
}

typedef struct shards_arg {
  const ct_shard_opts *so;
  const ct_gpu_list *gpus;
} shards_arg;

static ct_status drive_shards(const ct_dp_job *job, const void *arg, ct_error *err) {
  const shards_arg *a = arg;
  return ct_dp_train_shards(job, a->so, a->gpus->ids, a->gpus->n, err);
}

static ct_status drive_threads(const ct_dp_job *job, const void *arg, ct_error *err) {
  const ct_gpu_list *gpus = arg;
  return ct_dp_train_threads(job, gpus->ids, gpus->n, err);
}

typedef struct process_arg {
  const ct_gpu_list *gpus;
  int rank;
  const ct_nccl_id *id;
} process_arg;

static ct_status drive_process(const ct_dp_job *job, const void *arg, ct_error *err) {
  const process_arg *a = arg;
  return ct_dp_train_process(job, a->gpus->ids, a->gpus->n, a->rank, a->id, err);
}

int ct_cli_shard_opts(const ct_cli_args *args, ct_shard_opts *out) {
  ct_shard_opts so;
  memset(&so, 0, sizeof so);
  so.num_shards = ct_cli_int(args, "num_shards");
  so.shard_id = ct_cli_int(args, "shard_id");
  so.run_id = ct_cli_string(args, "run_id");
  so.file_store_path = ct_cli_is_set(args, "file_store_path") ? ct_cli_string(args, "file_store_path") : NULL;
  so.redis_host = ct_cli_is_set(args, "redis_host") ? ct_cli_string(args, "redis_host") : NULL;
  so.redis_port = ct_cli_int(args, "redis_port");
  so.redis_password = ct_cli_is_set(args, "redis_password") ? ct_cli_string(args, "redis_password")
                                                             : getenv("REDIS_PASSWORD");
  so.rendezvous_timeout_s = ct_cli_double(args, "rendezvous_timeout");
  so.gloo_iface = ct_cli_string(args, "gloo_iface");
  so.gloo_host = ct_cli_string(args, "gloo_host");
  if (so.shard_id >= so.num_shards)
    return ct_cli_error(CT_EXIT_USAGE, "--shard_id=%d is not below --num_shards=%d", so.shard_id, so.num_shards);
  if (!*so.run_id) return ct_cli_error(CT_EXIT_USAGE, "shards need --run_id=ID (the same on every shard)");
  if ((so.file_store_path != NULL) == (so.redis_host != NULL))
    return ct_cli_error(CT_EXIT_USAGE, "shards need exactly one of --file_store_path=DIR and --redis_host=HOST");
  if (!(so.rendezvous_timeout_s > 0)) return ct_cli_error(CT_EXIT_USAGE, "--rendezvous_timeout must be positive");
  *out = so;
  return CT_EXIT_OK;
}

/* One shard of a run that meets through a store: its GPUs as threads, or
 * one CPU worker with gradients through Gloo. */
static int train_shards(const ct_cli_args *args, const Caffe__SolverParameter *sp, const ct_gpu_list *gpus,
                        ct_csv_log *csv) {
  ct_shard_opts so;
  const int rc = ct_cli_shard_opts(args, &so);
  if (rc != CT_EXIT_OK) return rc;
  const shards_arg a = {&so, gpus};
  return run_dp(args, sp, csv, drive_shards, &a);
}

/* Several GPUs in this process: one worker thread per GPU. */
static int train_threads(const ct_cli_args *args, const Caffe__SolverParameter *sp,
                         const ct_gpu_list *gpus, ct_csv_log *csv) {
  return run_dp(args, sp, csv, drive_threads, gpus);
}

/* One of the worker processes that ct_cli_train_processes started: the
 * same flags as the launcher, its rank and the NCCL id from the
 * environment; rank 0 logs and writes the CSV log. */
static int train_worker_process(const ct_cli_args *args, const Caffe__SolverParameter *sp,
                                const ct_cli_csv_info *csv_info, int rank, int count,
                                const ct_nccl_id *id) {
  ct_log_set_quiet(rank != 0); /* main() silenced every worker until here */
  /* the launcher's own SIGTERM (another worker failed) stops at the next
   * wait; a SIGTERM it passes on is --sigterm_effect (install_signals) */
  g_launcher = getppid();
  ct_error err;
  ct_gpu_list gpus;
  if (pick_train_gpus(args, sp, &gpus, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  if (gpus.n != count)
    return ct_cli_error(CT_EXIT_FAILURE, "worker %d: %d GPUs here but %d workers were started", rank,
                        gpus.n, count);
  ct_csv_log *csv = NULL;
  if (rank == 0 && ct_cli_csv_open(args, sp, csv_info, gpus.n, &csv, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "--csv_log: %s", err.msg);
  if (csv) LOG_INFO("Writing the CSV training log %s", ct_csv_log_path(csv));
  /* each worker traces itself; rank 0 gathers and writes (dp.c) */
  if (ct_cli_trace_start(args, rank, &err) != CT_OK) return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  const process_arg a = {&gpus, rank, id};
  int rc = run_dp(args, sp, csv, drive_process, &a);
  rc = ct_cli_trace_finish(args, rc);
  ct_csv_log_close(csv);
  return rc;
}

/* One rank of `mpirun -np N cortado train ...`: --gpu (or, with
 * solver_mode: GPU, every visible GPU) lists the GPUs of each node and the
 * rank takes the one of its local rank; without GPUs it trains on the CPU
 * with gradients through MPI.  A failure ends the whole job. */
static int train_mpi(const ct_cli_args *args, const Caffe__SolverParameter *sp,
                     const ct_cli_csv_info *csv_info) {
  ct_error err;
  ct_gpu_list gpus;
  memset(&gpus, 0, sizeof gpus);
  bool cpu = false;
  ct_status st = ct_cli_wants_cpu(args, &cpu, &err);
  if (st != CT_OK || cpu) {
  } else if (ct_cli_is_set(args, "gpu")) {
    st = ct_cli_resolve_gpus(ct_cli_gpus(args, "gpu"), &gpus, &err);
  } else if (sp->has_solver_mode && sp->solver_mode == CAFFE__SOLVER_PARAMETER__SOLVER_MODE__GPU) {
    ct_gpu_list all = {.all = true};
    st = ct_cli_resolve_gpus(&all, &gpus, &err);
  }
  int rc = CT_EXIT_OK;
  ct_csv_log *csv = NULL;
  if (st == CT_OK && (st = ct_cli_csv_open(args, sp, csv_info, gpus.n, &csv, &err)) != CT_OK)
    ct_error_prefix(&err, "--csv_log");
  bool alike = false; /* every rank failed the same way, together */
  if (st == CT_OK) st = ct_cli_trace_start(args, ct_mpi_rank_from_env(), &err);
  if (st == CT_OK) {
    ct_dp_job job;
    fill_job(args, sp, csv, &job);
    /* the ranks train alike, or none does */
    st = ct_dp_agree_mpi(&job, &alike, &err);
    if (st == CT_OK) {
      g_data_parallel = 1;
      install_signals(args);
      LOG_INFO("Starting Optimization");
      st = ct_dp_train_mpi(&job, gpus.ids, gpus.n, &err);
      g_data_parallel = 0;
    }
  }
  if (st != CT_OK) {
    rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
    if (!alike) ct_mpi_abort_job(1);
  } else {
    LOG_INFO("Optimization Done.");
  }
  rc = ct_cli_trace_finish(args, rc);
  ct_csv_log_close(csv);
  ct_mpi_finalize();
  return rc;
}

/* Pipeline stages (train_pipeline.c): the solver to watch for signals,
 * or NULL when it is done. */
static void watch_solver(const ct_cli_args *args, ct_solver *s) {
  g_solver = s;
  if (s) install_signals(args);
}

/* One device (or the CPU) in this process. */
static int train_single(const ct_cli_args *args, const Caffe__SolverParameter *sp, int device,
                        ct_csv_log *csv) {
  ct_error err;
  ct_context ctx;
  uint64_t seed = sp->has_random_seed && sp->random_seed >= 0 ? (uint64_t)sp->random_seed : 0;
  if (ct_cli_context_init(args, &ctx, device, seed, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  int rc = CT_EXIT_OK;
  ct_solver *s = NULL;
  ct_solver_opts opts = solver_opts(args, csv);
  if (ct_solver_init(&s, sp, &opts, &ctx, &err) != CT_OK) {
    rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
    goto done;
  }
  if (ct_cli_is_set(args, "weights") && ct_solver_copy_trained_files(s, ct_cli_string(args, "weights"), &err) != CT_OK) {
    rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
    goto done;
  }
  g_solver = s;
  install_signals(args);
  LOG_INFO("Starting Optimization");
  const char *resume = ct_cli_is_set(args, "snapshot") ? ct_cli_string(args, "snapshot") : NULL;
  if (resume) LOG_INFO("Resuming from %s", resume);
  if (ct_solver_solve(s, resume, &err) != CT_OK) rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  g_solver = NULL;
done:
  ct_solver_free(s);
  ct_context_free(&ctx);
  return rc;
}

/* The combinations of train flags that cannot work: CT_EXIT_USAGE, or
 * CT_EXIT_OK when there is none. */
static int check_train_flags(const ct_cli_args *args) {
  if (ct_cli_is_set(args, "snapshot") && ct_cli_is_set(args, "weights"))
    return ct_cli_error(CT_EXIT_USAGE,
                        "give --snapshot to resume training or --weights to fine-tune, not both");
  if (ct_cli_double(args, "bucket_mb") <= 0 || ct_cli_double(args, "comm_timeout") < 0)
    return ct_cli_error(CT_EXIT_USAGE, "--bucket_mb must be positive and --comm_timeout not negative");
  bool cpu;
  ct_error err;
  if (ct_cli_wants_cpu(args, &cpu, &err) != CT_OK) return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  bool tf32, given;
  ct_dtype type;
  if (ct_cli_precision(args, &tf32, &type, &given, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  ct_loss_scale_opts ls;
  if (loss_scale_opts(args, &ls, &err) != CT_OK) return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  if (ls.mode != CT_LOSS_SCALE_AUTO && ls.mode != CT_LOSS_SCALE_OFF &&
      strcmp(ct_cli_string(args, "dp_mode"), "allreduce") != 0)
    return ct_cli_error(CT_EXIT_USAGE, "--loss_scale goes with --dp_mode=allreduce: the parameter "
                        "servers update from unscaled gradients");
  return CT_EXIT_OK;
}

int ct_cli_train_solver(const ct_cli_args *args, Caffe__SolverParameter *sp, const ct_cli_csv_info *csv_info) {
  ct_error err;
  int rc = check_train_flags(args);
  if (rc != CT_EXIT_OK) return rc;
  apply_state_flags(args, sp);
  if (apply_dummy_data(args, sp, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  const bool shards = ct_cli_shards_requested(args);
  if (ct_mpi_launched() && shards)
    return ct_cli_error(CT_EXIT_USAGE, "--num_shards and the store flags do not go with mpirun: use one or the other");
  const bool pipeline = ct_cli_wants_pipeline(args, sp);
  rc = ct_cli_check_ps_flags(args, pipeline);
  if (rc != CT_EXIT_OK) return rc;
  if (ct_cli_int(args, "microbatches") > 0 && !pipeline)
    return ct_cli_error(CT_EXIT_USAGE,
                        "--microbatches goes with pipeline stages (--pipeline, or pipeline_stage in "
                        "the net under mpirun); without them, use the solver's iter_size");
  if (ct_cli_is_set(args, "recompute") && !pipeline)
    return ct_cli_error(CT_EXIT_USAGE,
                        "--recompute goes with pipeline stages (--pipeline, or pipeline_stage in "
                        "the net under mpirun): one process keeps its activations anyway");
  if (pipeline) {
    ct_shard_opts so;
    bool as_shards = false;
    if ((rc = ct_cli_pipeline_processes(args, &so, &as_shards)) != CT_EXIT_OK) return rc;
    ct_csv_log *csv = NULL;
    const int rank = as_shards ? so.shard_id : ct_mpi_rank_from_env();
    if (rank == 0 && ct_cli_csv_open(args, sp, csv_info, 0, &csv, &err) != CT_OK)
      return ct_cli_error(CT_EXIT_FAILURE, "--csv_log: %s", err.msg);
    const ct_solver_opts opts = solver_opts(args, csv);
    rc = ct_cli_train_pipeline(args, sp, &opts, as_shards ? &so : NULL, watch_solver);
    ct_csv_log_close(csv);
    return rc;
  }
  if (ct_mpi_launched()) return train_mpi(args, sp, csv_info);
  int worker_rank = 0, workers = 0;
  ct_nccl_id worker_id;
  if (ct_cli_dp_worker(&worker_rank, &workers, &worker_id))
    return train_worker_process(args, sp, csv_info, worker_rank, workers, &worker_id);
  ct_gpu_list gpus;
  if (pick_train_gpus(args, sp, &gpus, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  log_gpus(&gpus);
  const int first_rank = shards ? ct_cli_int(args, "shard_id") * (gpus.n ? gpus.n : 1) : 0;
  if (shards && gpus.n > 0 && ct_cli_is_set(args, "trace"))
    return ct_cli_error(CT_EXIT_USAGE, "--trace: traces of GPU shards are not written yet (trace "
                                       "--gpu=... in one process, or mpirun ranks)");
  if (ct_cli_trace_start(args, first_rank, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  const bool processes = !shards && gpus.n > 1 &&
                         strcmp(ct_cli_string(args, "dp_workers"), "processes") == 0;
  if (processes) return ct_cli_train_processes(gpus.ids, gpus.n);
  ct_csv_log *csv = NULL;
  /* one CSV log per run: shard 0's */
  if (!(shards && ct_cli_int(args, "shard_id") != 0) &&
      ct_cli_csv_open(args, sp, csv_info, gpus.n, &csv, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "--csv_log: %s", err.msg);
  if (csv) LOG_INFO("Writing the CSV training log %s", ct_csv_log_path(csv));
  if (shards) rc = train_shards(args, sp, &gpus, csv);
  else if (gpus.n > 1) rc = train_threads(args, sp, &gpus, csv);
  else rc = train_single(args, sp, gpus.n ? gpus.ids[0] : CT_DEVICE_CPU, csv);
  rc = ct_cli_trace_finish(args, rc);
  ct_csv_log_close(csv);
  return rc;
}

static int train_run(const ct_cli_args *args) {
  ct_error err;
  const char *solver_file = ct_cli_is_set(args, "solver") ? ct_cli_string(args, "solver") : NULL;
  if (!solver_file || !*solver_file)
    return ct_cli_error(CT_EXIT_USAGE, "'cortado train' needs --solver=FILE");
  int rc = check_train_flags(args);
  if (rc != CT_EXIT_OK) return rc;
  /* under mpirun, only rank 0 logs INFO lines (errors come from every rank) */
  if (ct_mpi_launched() && ct_mpi_rank_from_env() > 0) ct_log_set_quiet(true);
  Caffe__SolverParameter *sp;
  if (ct_solver_param_read(solver_file, &sp, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  rc = ct_cli_train_solver(args, sp, NULL);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
  return rc;
}

const ct_cli_command ct_cli_cmd_train = {
    .name = "train",
    .summary = "Train or fine-tune a network from a solver prototxt.",
    .usage = "cortado train --solver=FILE [--weights=FILES | --snapshot=FILE] [--gpu=IDS|all] "
             "[flags]",
    .description = "Trains the net that the solver names, logging in Caffe's format. Give "
                   "--weights to start from trained parameters, or --snapshot to continue "
                   "an interrupted run. With several GPUs (--gpu=0,1 or --gpu=all) training "
                   "is data parallel: one worker per GPU (a process each, or a thread each "
                   "with --dp_workers=threads), each reading its own shard, "
                   "gradients averaged by NCCL; batch_size is per GPU unless "
                   "--global_batch. Under `mpirun -np N` each rank is one worker (the GPU "
                   "of its local rank, or the CPU with gradients through MPI). Without MPI, "
                   "--num_shards processes (each given its --shard_id and the same --run_id) "
                   "meet through --file_store_path or --redis_host and train together: "
                   "each shard on its GPUs, or as one CPU worker with gradients through "
                   "Gloo over TCP.",
    .flags = train_flags,
    .n_flags = sizeof train_flags / sizeof train_flags[0],
    .min_args = 0,
    .max_args = 0,
    .host_threads = true,
    .run = train_run,
};
