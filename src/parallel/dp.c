/* The data-parallel driver: workers as threads of this process or as MPI
 * ranks, each running a solver whose runtime reduces its gradients (see
 * dp.h). */
#include "parallel/dp.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/context.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/settings.h"
#include "core/signals.h"
#include "core/trace.h"
#include "data/pipeline.h"
#include "parallel/comm.h"
#include "parallel/comm_mpi.h"
#include "parallel/comm_nccl.h"
#include "parallel/comm_gloo.h"
#include "parallel/dp_agree.h"
#include "parallel/dp_internal.h"
#include "parallel/trace_ranks.h"
#include "parallel/shards.h"

/* What the workers of this process share. */
typedef struct dp_shared {
  const ct_dp_job *job;
  Caffe__SolverParameter *sp; /* owned: the job's, batch divided for --global_batch */
  int world;                  /* workers in the whole job */
  int nodes;
  bool threads;               /* workers are threads of this process */
  bool gpu;
  char kind[640];             /* "threads of one process" / "MPI processes" / "2 shards ..." */
  char transport[192];
  char devices[128];          /* "GPUs 0,1" / "4 GPUs" / "CPU" for the startup line */
  ct_nccl_id nccl_id;
  ct_comm_threads_group *tg;  /* CPU threads */
  int cancel;                 /* atomic: a worker failed, the others give up */
  pthread_mutex_t mu;
  pthread_cond_t changed;     /* signalled (under mu) when a worker ends or fails */
  int finished;               /* workers whose thread has ended, under mu */
  bool failed;                /* the first failure, under mu: */
  int failed_rank, failed_device;
  int failed_iter;            /* the iteration it failed in, or -1 before training */
  ct_error failure;
  bool ps;                    /* parameter servers (job->ps.mode is not the all-reduce) */
} dp_shared;

typedef struct dp_worker {
  dp_shared *sh;
  int rank;
  int device;                 /* GPU ordinal or CT_DEVICE_CPU */
  ct_comm *comm;
  bool own_comm;              /* made (and freed) by the worker */
  ct_context ctx;
  bool ctx_ok;
  ct_solver *solver;
  bool server;                /* a parameter server (ps.h), not a worker */
  ct_ps_client *ps;           /* a worker's side of the parameter servers, or NULL */
  bool training;              /* inside ct_solver_solve */
  bool done;                  /* its thread has ended (under sh->mu) */
  ct_status st;
  ct_error err;
  pthread_t thread;
} dp_worker;

/* Signal requests (ct_solver_action bits) for the running job: rank 0's
 * runtime samples them (runtime/runtime.h) and all workers agree on them. */
static int g_requests;
/* The worker running on this thread (for the abort hook). */
static _Thread_local dp_worker *t_worker;

void ct_dp_request(int actions) { __atomic_fetch_or(&g_requests, actions, __ATOMIC_SEQ_CST); }

static const char *device_desc(int device, char *buf, size_t size) {
  if (device == CT_DEVICE_CPU) snprintf(buf, size, "CPU");
  else snprintf(buf, size, "GPU %d", device);
  return buf;
}

/* ------------------------------------------------------------------ worker */

/* The per-worker batch: the first dimension of the train net's first top. */
static int worker_batch(const ct_net *net) {
  for (int l = 0; l < net->nlayers; l++)
    if (net->layers[l]->ntop > 0 && net->tops[l][0]->ndim > 0) return net->tops[l][0]->shape[0];
  return 0;
}

/* "ssp (staleness 2), 2 servers: ranks 3-4, shards cut at parameter
 * boundaries" and the like. */
static void describe_ps(const ct_ps_opts *o, int workers, char *buf, size_t size) {
  char mode[160];
  if (o->mode == CT_DP_SSP) snprintf(mode, sizeof mode, "ssp (staleness %d)", o->staleness);
  else if (o->mode == CT_DP_BMUF)
    snprintf(mode, sizeof mode, "bmuf (blocks of %d iterations, block lr %g, block momentum %g%s)",
             o->sync_period, (double)o->block_lr,
             (double)(o->block_momentum >= 0 ? o->block_momentum : 1.0f - 1.0f / (float)workers),
             o->nesterov ? ", Nesterov" : "");
  else snprintf(mode, sizeof mode, "%s", ct_dp_mode_name(o->mode));
  snprintf(buf, size, "%s, %d server%s: rank%s %d-%d, shards cut at parameter boundaries", mode,
           o->num_servers, o->num_servers == 1 ? "" : "s", o->num_servers == 1 ? "" : "s", workers,
           workers + o->num_servers - 1);
}

static void log_world(const dp_worker *w) {
  const dp_shared *sh = w->sh;
  LOG_INFO("Data-parallel training: %d node%s, %d rank%s (%s), %s; transport %s", sh->nodes,
           sh->nodes == 1 ? "" : "s", sh->world, sh->world == 1 ? "" : "s", sh->kind, sh->devices,
           sh->transport);
  const int batch = worker_batch(w->solver->net), iter_size = sh->sp->iter_size;
  const char *unit = sh->gpu ? (sh->world == 1 ? "GPU" : "GPUs") : (sh->world == 1 ? "worker" : "workers");
  if (iter_size > 1)
    LOG_INFO("effective batch %d = %d x %d iter_size x %d %s", batch * iter_size * sh->world, batch,
             iter_size, sh->world, unit);
  else
    LOG_INFO("effective batch %d = %d x %d %s", batch * sh->world, batch, sh->world, unit);
  char plan[256];
  ct_runtime_describe_reduce(w->solver->rt, plan, sizeof plan);
  if (sh->ps) describe_ps(&sh->job->ps, sh->world, plan, sizeof plan);
  LOG_INFO("%s: %s", sh->ps ? "parameter servers" : "gradient averaging", plan);
  if (sh->ps && !sh->threads)
    LOG_INFO("parameter servers: %s", ct_ps_launcher_keeps_survivors()
                                          ? "a dead worker is left out and the others go on; a dead server "
                                            "or root stops the job"
                                          : "a dead rank ends the job (mpirun --enable-recovery lets the "
                                            "others go on without a dead worker)");
  if (sh->gpu) LOG_INFO("GPU math: %s", sh->job->strict_fp32 ? "strict FP32" : "TF32 tensor cores");
}

static ct_status make_thread_comm(dp_worker *w, ct_error *err) {
  dp_shared *sh = w->sh;
  w->own_comm = true;
  if (sh->gpu) {
    ct_comm_nccl_opts o = {.timeout_s = sh->job->dp.timeout_s, .cancel = &sh->cancel,
                           .max_ctas = sh->job->dp.nccl_max_ctas};
    return ct_comm_nccl_create(&w->comm, &sh->nccl_id, w->rank, sh->world, w->device, &o, err);
  }
  w->comm = ct_comm_threads_create(sh->tg, w->rank);
  ct_comm_set_watchdog(w->comm, sh->job->dp.timeout_s, &sh->cancel);
  return CT_OK;
}

/* Traces (core/trace.h): a worker records under its rank.  A worker whose
 * communicator reaches other processes aligns its clock with rank 0's
 * before training and sends its events to rank 0 after: on the CPU one it
 * did not make for the threads of this process (MPI, Gloo), on GPUs one
 * process per GPU (`--gpu=0,1`'s worker processes, mpirun ranks: NCCL). */
static bool trace_across_processes(const dp_worker *w) {
  if (!ct_trace_enabled() || w->sh->world <= 1) return false;
  return w->sh->gpu ? !w->sh->threads : !w->own_comm;
}

static ct_status trace_join(dp_worker *w, ct_error *err) {
  if (!ct_trace_enabled()) return CT_OK;
  ct_trace_set_thread_rank(w->rank);
  return trace_across_processes(w) ? ct_trace_ranks_align(w->comm, err) : CT_OK;
}

/* A parameter server: its solver's net is the shard's storage and its
 * update step the update it applies (ps.h).  The first server logs the
 * workers' clocks. */
static ct_status serve(dp_worker *w, ct_error *err) {
  ct_solver *s = w->solver;
  const ct_ps_update u = {.net = s->net, .history = s->history, .nslots = s->rule->nslots,
                          .clip = s->param->clip_gradients >= 0, .apply = ct_solver_update_params,
                          .solver = s, .requests = &g_requests};
  const int index = w->comm->rank - w->sh->world;
  if (index == 0) { /* whether a process of its own (mpirun) or a thread of a shard */
    ct_log_set_quiet(false);
    ct_log_set_thread_quiet(false);
  }
  return ct_ps_serve(w->comm, &w->sh->job->ps, w->sh->world, &u, err);
}

static ct_status worker_run(dp_worker *w, ct_error *err) {
  dp_shared *sh = w->sh;
  const ct_dp_job *job = sh->job;
  const Caffe__SolverParameter *sp = sh->sp;
  uint64_t seed = sp->random_seed >= 0 ? (uint64_t)sp->random_seed + (uint64_t)w->rank : 0;
  CT_TRY(ct_context_init(&w->ctx, w->device, seed, err));
  w->ctx_ok = true;
  if (job->strict_fp32) ct_context_set_tf32(&w->ctx, false);
  CT_TRY(ct_context_set_precision(&w->ctx, job->precision, job->precision_given, err));
  /* a server's data layers never run: they read the first worker's shard */
  w->ctx.rank = w->server ? 0 : w->rank;
  w->ctx.world = sh->world;
  if (!w->comm) CT_TRY(make_thread_comm(w, err));
  ct_solver_opts o = job->solver_opts;
  o.replica = w->rank != 0 || w->server;
  o.quiet_nets = o.quiet_nets || w->rank != 0;
  /* One process per GPU: every rank takes rank 0's convolution algorithms
   * (threads share their process's table already). */
  const bool share_algos = sh->gpu && !sh->threads && sh->world > 1;
  if (share_algos && w->rank != 0) CT_TRY(ct_dp_share_conv_algos(w->comm, false, err));
  CT_TRY(ct_solver_init(&w->solver, sp, &o, &w->ctx, err));
  if (share_algos && w->rank == 0) CT_TRY(ct_dp_share_conv_algos(w->comm, true, err));
  if (job->weights) CT_TRY(ct_solver_copy_trained_files(w->solver, job->weights, err));
  if (job->resume) {
    LOG_INFO("Restoring previous solver status from %s", job->resume);
    CT_TRY(ct_solver_restore(w->solver, job->resume, err));
  }
  if (w->server) return serve(w, err);
  if (job->on_solver) CT_TRY(job->on_solver(job->user, w->solver, err));
  if (sh->ps) {
    CT_TRY(ct_ps_client_new(&w->ps, w->comm, &job->ps, sh->world, w->solver->net, w->solver->iter,
                            sp->max_iter, err));
    /* the other workers relay their process's wishes to the root, which
     * decides (ps.h) */
    CT_TRY(ct_solver_set_ps(w->solver, w->ps, &g_requests, err));
  } else {
    /* the process's signal requests are taken by whichever of its workers
     * comes first; the agreement sums every process's, so that a SIGTERM
     * reaching one shard or rank alone counts */
    CT_TRY(ct_solver_set_reduce(w->solver, w->comm, &job->dp, w->rank == 0, &g_requests, err));
  }
  if (w->rank == 0) log_world(w);
  CT_TRY(trace_join(w, err));
  w->training = true;
  CT_TRY(ct_solver_solve(w->solver, NULL, err));
  if (w->ps) CT_TRY(ct_ps_client_finish(w->ps, w->solver->requested_early_exit, err));
  return trace_across_processes(w) ? ct_trace_ranks_gather(w->comm, err) : CT_OK;
}

/* Records w's failure when it is the first (an interruption caused by
 * another worker's failure is not), and raises the cancel flag. */
static void worker_failed(dp_worker *w) {
  dp_shared *sh = w->sh;
  pthread_mutex_lock(&sh->mu);
  if (!sh->failed && w->st != CT_ERR_INTERRUPTED) {
    sh->failed = true;
    sh->failed_rank = w->rank;
    sh->failed_device = w->device;
    sh->failed_iter = w->training ? w->solver->iter : -1;
    sh->failure = w->err;
  }
  __atomic_store_n(&sh->cancel, 1, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&sh->changed);
  pthread_mutex_unlock(&sh->mu);
  /* after the failure is recorded: the other workers' errors from this
   * abort are consequences */
  if (sh->threads && w->comm) ct_comm_abort(w->comm);
}

static void worker_cleanup(dp_worker *w) {
  const ct_dp_job *job = w->sh->job;
  if (w->solver && job->on_solver_end) job->on_solver_end(job->user, w->solver);
  ct_solver_free(w->solver);
  w->solver = NULL;
  ct_ps_client_free(w->ps);
  w->ps = NULL;
  if (w->own_comm) ct_comm_free(w->comm);
  w->comm = NULL;
  if (w->ctx_ok) ct_context_free(&w->ctx);
  w->ctx_ok = false;
}

static void *worker_main(void *arg) {
  dp_worker *w = arg;
  t_worker = w;
  ct_signals_block_async(NULL); /* it computes: no handler runs here */
  ct_log_set_thread_quiet(w->rank != 0);
  w->st = worker_run(w, &w->err);
  if (w->st != CT_OK) worker_failed(w);
  worker_cleanup(w);
  ct_log_set_thread_quiet(false);
  t_worker = NULL;
  pthread_mutex_lock(&w->sh->mu);
  w->done = true;
  w->sh->finished++;
  pthread_cond_broadcast(&w->sh->changed);
  pthread_mutex_unlock(&w->sh->mu);
  return NULL;
}

/* "worker 1 (GPU 1) failed at iteration 7: <cause>" into err. */
static ct_status failure_message(const char *who, int rank, int device, int iter, const ct_error *cause,
                                 const char *suffix, ct_error *err) {
  char dev[32], at[48] = "";
  if (iter >= 0) snprintf(at, sizeof at, " at iteration %d", iter);
  return ct_error_set(err, cause->code, "%s %d (%s) failed%s: %s%s", who, rank,
                      device_desc(device, dev, sizeof dev), at, cause->msg, suffix);
}

/* ------------------------------------------------------------------ jobs */

static Caffe__SolverParameter *clone_param(const Caffe__SolverParameter *p) {
  size_t n = caffe__solver_parameter__get_packed_size(p);
  uint8_t *buf = ct_xcalloc(n + 1, 1);
  caffe__solver_parameter__pack(p, buf);
  Caffe__SolverParameter *c = caffe__solver_parameter__unpack(NULL, n, buf);
  free(buf);
  CT_ASSERT(c != NULL);
  return c;
}

static ct_status shared_init(dp_shared *sh, const ct_dp_job *job, int world, ct_error *err) {
  memset(sh, 0, sizeof *sh);
  sh->job = job;
  sh->world = world;
  sh->nodes = 1;
  snprintf(sh->kind, sizeof sh->kind, "threads of one process");
  pthread_mutex_init(&sh->mu, NULL);
  pthread_cond_init(&sh->changed, NULL);
  sh->sp = clone_param(job->solver_param);
  if (job->global_batch) {
    ct_status st = ct_dp_divide_batch(sh->sp, world, err);
    if (st != CT_OK) return st;
  }
  __atomic_store_n(&g_requests, 0, __ATOMIC_SEQ_CST);
  return CT_OK;
}

static void shared_free(dp_shared *sh) {
  if (sh->sp) protobuf_c_message_free_unpacked(&sh->sp->base, NULL);
  sh->sp = NULL;
  ct_comm_threads_group_release(sh->tg);
  sh->tg = NULL;
  pthread_cond_destroy(&sh->changed);
  pthread_mutex_destroy(&sh->mu);
}

/* ct_abort's hook while worker threads run: name the worker; abort() then
 * ends every thread of the process. */
static void threads_abort_hook(const char *msg) {
  dp_worker *w = t_worker;
  if (!w) return;
  char dev[32];
  LOG_ERROR("data-parallel worker %d (%s) hit a fatal error; all %d workers stop", w->rank,
            device_desc(w->device, dev, sizeof dev), w->sh->world);
}

double ct_dp_stop_grace_s(void) {
  return ct_setting_number("CORTADO_STOP_GRACE");
}

/* Waits until all `started` workers have ended.  Once one has failed, the
 * others get ct_dp_stop_grace_s() to notice and stop; a worker still running
 * then is stuck where no watchdog reaches (a GPU that never finishes work
 * that waits for a dead peer, inside a CUDA graph, is freed only with its
 * process), so the failure is logged and the process ends with status 1:
 * a bounded stop, never a hang.  Snapshots are written atomically, so the
 * last one stays intact. */
static void await_workers(dp_shared *sh, dp_worker *workers, int started, const char *prefix) {
  pthread_mutex_lock(&sh->mu);
  struct timespec deadline = {0, 0};
  bool have_deadline = false;
  while (sh->finished < started) {
    if (!__atomic_load_n(&sh->cancel, __ATOMIC_ACQUIRE)) {
      pthread_cond_wait(&sh->changed, &sh->mu);
      continue;
    }
    if (!have_deadline) {
      clock_gettime(CLOCK_REALTIME, &deadline);
      double g = ct_dp_stop_grace_s();
      deadline.tv_sec += (time_t)g;
      deadline.tv_nsec += (long)((g - (double)(time_t)g) * 1e9);
      if (deadline.tv_nsec >= 1000000000L) deadline.tv_sec++, deadline.tv_nsec -= 1000000000L;
      have_deadline = true;
    }
    if (pthread_cond_timedwait(&sh->changed, &sh->mu, &deadline) != ETIMEDOUT) continue;
    if (sh->finished >= started) break;
    ct_error e;
    if (sh->failed) {
      failure_message("worker", sh->failed_rank, sh->failed_device, sh->failed_iter, &sh->failure,
                      "", &e);
      if (prefix && *prefix) ct_error_prefix(&e, "%s", prefix);
    } else {
      ct_error_set(&e, CT_ERR_INTERRUPTED, "a worker was stopped");
    }
    LOG_ERROR("%s", e.msg);
    for (int i = 0; i < started; i++)
      if (!workers[i].done) {
        char dev[32];
        LOG_ERROR("worker %d (%s) did not stop within %g s of the failure; ending the process, "
                  "which frees its GPU work",
                  workers[i].rank, device_desc(workers[i].device, dev, sizeof dev),
                  ct_dp_stop_grace_s());
      }
    fprintf(stderr, "cortado: error: %s; the other workers were stopped by ending the process\n", e.msg);
    fflush(NULL);
    _exit(1);
  }
  pthread_mutex_unlock(&sh->mu);
}

/* Runs n worker threads with ranks rank0 .. rank0 + n - 1 of sh->world:
 * worker i on GPU gpus[i] or, when gpus is NULL, on the CPU with the
 * communicator `cpu_comm` (borrowed) or, when that is NULL, the "threads"
 * communicator of sh->tg.  Waits for all; returns the first failure
 * ("<prefix>worker R (GPU G) failed: ..."). */
/* Parameter servers are the ranks after the workers (mpirun ranks, shards). */
static bool serves(const dp_shared *sh, int rank) { return sh->ps && rank >= sh->world; }

/* A shard of parameter servers' job is one rank: one GPU per worker shard. */
static ct_status ps_gpu_shards(const ct_dp_job *job, int n_gpus, ct_error *err) {
  if (n_gpus <= 1) return CT_OK;
  return ct_error_set(err, CT_ERR_INVALID,
                      "--dp_mode=%s: each shard is one worker or server, so a worker shard trains on "
                      "one GPU, but --gpu lists %d (give each shard its own --gpu=ID)",
                      ct_dp_mode_name(job->ps.mode), n_gpus);
}

static ct_status run_workers(dp_shared *sh, const int *gpus, int n, int rank0, ct_comm *cpu_comm,
                             const char *prefix, ct_error *err) {
  dp_worker *workers = ct_xcalloc((size_t)n, sizeof *workers);
  ct_set_abort_hook(threads_abort_hook);
  ct_pipeline_set_local_workers(n); /* their data pipelines share the cores */
  int started = 0;
  for (; started < n; started++) {
    dp_worker *w = &workers[started];
    w->sh = sh;
    w->rank = rank0 + started;
    w->server = serves(sh, w->rank);
    /* parameter servers run on the host */
    w->device = gpus && !w->server ? gpus[started] : CT_DEVICE_CPU;
    /* GPUs of all-reduce workers make their NCCL communicator */
    w->comm = cpu_comm;
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
      w->st = ct_error_set(&w->err, CT_ERR_IO, "cannot start the thread of worker %d", w->rank);
      worker_failed(w);
      break;
    }
  }
  await_workers(sh, workers, started, prefix);
  for (int i = 0; i < started; i++) pthread_join(workers[i].thread, NULL);
  ct_set_abort_hook(NULL);
  ct_status st = CT_OK;
  if (sh->failed) {
    st = failure_message("worker", sh->failed_rank, sh->failed_device, sh->failed_iter, &sh->failure,
                         n > 1 ? "; the other workers were stopped" : "", err);
    if (prefix && *prefix) ct_error_prefix(err, "%s", prefix);
  }
  free(workers);
  return st;
}

/* sh->devices for the log: "GPUs 0,1,2" ("GPU 3" for one). */
static void describe_gpus(dp_shared *sh, const int *gpus, int n) {
  int len = snprintf(sh->devices, sizeof sh->devices, "GPU%s ", n == 1 ? "" : "s");
  for (int i = 0; i < n && len < (int)sizeof sh->devices; i++)
    len += snprintf(sh->devices + len, sizeof sh->devices - (size_t)len, "%s%d", i ? "," : "", gpus[i]);
}

ct_status ct_dp_train_threads(const ct_dp_job *job, const int *gpus, int n, ct_error *err) {
  CT_ASSERT(n >= 1);
  dp_shared sh;
  ct_status st = shared_init(&sh, job, n, err);
  sh.threads = true;
  sh.gpu = gpus != NULL;
  if (st == CT_OK && sh.gpu) {
    st = ct_nccl_unique_id(&sh.nccl_id, err);
    snprintf(sh.transport, sizeof sh.transport, "NCCL %s", ct_nccl_version());
    describe_gpus(&sh, gpus, n);
  } else if (st == CT_OK) {
    sh.tg = ct_comm_threads_group_create(n);
    snprintf(sh.transport, sizeof sh.transport, "shared memory");
    snprintf(sh.devices, sizeof sh.devices, "CPU");
  }
  if (st == CT_OK) st = run_workers(&sh, gpus, n, 0, NULL, NULL, err);
  shared_free(&sh);
  return st;
}

/* ------------------------------------------------------------------ processes */

/* The cancel flag of this process's worker (ct_dp_train_process), for
 * ct_dp_cancel from a signal handler. */
static int *volatile g_process_cancel;

void ct_dp_cancel(void) {
  int *c = g_process_cancel;
  if (c) __atomic_store_n(c, 1, __ATOMIC_RELEASE);
}

ct_status ct_dp_train_process(const ct_dp_job *job, const int *gpus, int n, int rank,
                              const ct_nccl_id *id, ct_error *err) {
  CT_ASSERT(n >= 1 && rank >= 0 && rank < n);
  if (rank != 0) ct_log_set_quiet(true);
  ct_pipeline_set_local_workers(n); /* the n processes' data pipelines share the cores */
  dp_shared sh;
  dp_worker w;
  memset(&w, 0, sizeof w);
  w.sh = &sh;
  w.rank = rank;
  w.device = gpus[rank];
  ct_status st = shared_init(&sh, job, n, &w.err);
  snprintf(sh.kind, sizeof sh.kind, "processes, one per GPU");
  sh.gpu = true;
  g_process_cancel = &sh.cancel;
  sh.nccl_id = *id;
  snprintf(sh.transport, sizeof sh.transport, "NCCL %s", ct_nccl_version());
  describe_gpus(&sh, gpus, n);
  if (st == CT_OK) st = make_thread_comm(&w, &w.err);
  if (st == CT_OK) st = worker_run(&w, &w.err);
  if (st == CT_ERR_INTERRUPTED && __atomic_load_n(&sh.cancel, __ATOMIC_ACQUIRE)) {
    char dev[32];
    ct_error_set(err, CT_ERR_INTERRUPTED,
                 "worker %d (%s) stopped on SIGTERM (another worker failed, or the run was ended)",
                 w.rank, device_desc(w.device, dev, sizeof dev));
  } else if (st != CT_OK) {
    failure_message("worker", w.rank, w.device, w.training ? w.solver->iter : -1, &w.err, "", err);
  }
  /* the launcher stops the other processes: do not wait for them */
  if (st != CT_OK && w.comm) ct_comm_abort(w.comm);
  g_process_cancel = NULL;
  worker_cleanup(&w);
  shared_free(&sh);
  return st;
}

/* ------------------------------------------------------------------ MPI */

static void mpi_abort_hook(const char *msg) { ct_mpi_abort_job(1); }

/* Rank 0 makes the NCCL id and sends it with a success flag, so that a
 * failure there fails every rank instead of leaving them waiting. */
static ct_status share_nccl_id(int rank, ct_nccl_id *id, ct_error *err) {
  struct {
    int ok;
    ct_nccl_id id;
  } msg;
  memset(&msg, 0, sizeof msg);
  ct_error local;
  ct_status st = CT_OK;
  if (rank == 0) {
    st = ct_nccl_unique_id(&msg.id, &local);
    msg.ok = st == CT_OK;
  }
  CT_TRY(ct_mpi_broadcast_bytes(&msg, sizeof msg, err));
  if (!msg.ok) {
    if (rank == 0 && err) *err = local;
    return rank == 0 ? st : ct_error_set(err, CT_ERR_DEVICE, "rank 0 could not make an NCCL id");
  }
  *id = msg.id;
  return CT_OK;
}

static ct_status mpi_run(dp_shared *sh, dp_worker *w, const int *node_gpus, int n_node_gpus,
                         ct_comm *mpi, ct_error *err) {
  int local = ct_mpi_local_rank_from_env();
  if (local < 0) local = w->rank;
  double first_on_node = local == 0 ? 1.0 : 0.0;
  CT_TRY(ct_comm_allreduce_host_f64(mpi, &first_on_node, 1, err));
  sh->nodes = (int)first_on_node;
  w->server = serves(sh, w->rank); /* parameter servers run on the host */
  if (!sh->gpu) {
    w->comm = mpi;
    snprintf(sh->transport, sizeof sh->transport, "MPI");
    snprintf(sh->devices, sizeof sh->devices, "CPU");
    return worker_run(w, err);
  }
  if (!w->server && local >= n_node_gpus)
    return ct_error_set(err, CT_ERR_INVALID,
                        "rank %d is local rank %d on its node, but each node lists only %d GPU%s (--gpu)",
                        w->rank, local, n_node_gpus, n_node_gpus == 1 ? "" : "s");
  if (!w->server) w->device = node_gpus[local];
  if (sh->ps) {
    /* GPU workers: every message goes through MPI from host memory
     * (ps_client.c copies the shards out of and into the GPU) */
    w->comm = mpi;
    snprintf(sh->transport, sizeof sh->transport, "MPI, from host memory");
    snprintf(sh->devices, sizeof sh->devices, "%d GPU%s, servers on CPUs", sh->world,
             sh->world == 1 ? "" : "s");
    return worker_run(w, err);
  }
  CT_TRY(share_nccl_id(w->rank, &sh->nccl_id, err));
  ct_comm_nccl_opts o = {.timeout_s = sh->job->dp.timeout_s, .cancel = NULL,
                         .max_ctas = sh->job->dp.nccl_max_ctas};
  CT_TRY(ct_comm_nccl_create(&w->comm, &sh->nccl_id, w->rank, sh->world, w->device, &o, err));
  w->own_comm = true;
  snprintf(sh->transport, sizeof sh->transport, "NCCL %s (id shared over MPI)", ct_nccl_version());
  snprintf(sh->devices, sizeof sh->devices, "%d GPU%s", sh->world, sh->world == 1 ? "" : "s");
  return worker_run(w, err);
}

ct_status ct_dp_check_ps(const ct_dp_job *job, int ranks, ct_error *err) {
  const ct_ps_opts *o = &job->ps;
  const char *mode = ct_dp_mode_name(o->mode);
  if (o->mode == CT_DP_ALLREDUCE) return CT_OK;
  if (ranks <= o->num_servers)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--dp_mode=%s: %d rank%s leave%s no worker beside %d parameter server%s (start "
                        "mpirun -np W+%d for W workers)",
                        mode, ranks, ranks == 1 ? "" : "s", ranks == 1 ? "s" : "", o->num_servers,
                        o->num_servers == 1 ? "" : "s", o->num_servers);
  if (job->solver_param->clip_gradients >= 0 && o->num_servers > 1 && o->mode != CT_DP_BMUF)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--dp_mode=%s: clip_gradients needs the norm of the whole gradient, which "
                        "no one of %d parameter servers sees (use --num_servers=1)",
                        mode, o->num_servers);
  return CT_OK;
}

ct_status ct_dp_train_mpi(const ct_dp_job *job, const int *node_gpus, int n_node_gpus, ct_error *err) {
  ct_comm *mpi = NULL;
  CT_TRY(ct_comm_mpi_create(&mpi, err));
  ct_comm_set_watchdog(mpi, job->dp.timeout_s, NULL);
  if (mpi->rank != 0) ct_log_set_quiet(true);
  ct_set_abort_hook(mpi_abort_hook);
  dp_shared sh;
  dp_worker w;
  memset(&w, 0, sizeof w);
  w.sh = &sh;
  w.rank = mpi->rank;
  w.device = CT_DEVICE_CPU;
  const bool ps = job->ps.mode != CT_DP_ALLREDUCE;
  const int workers = ps && mpi->size > job->ps.num_servers ? mpi->size - job->ps.num_servers : mpi->size;
  ct_status st = shared_init(&sh, job, workers, &w.err);
  if (st == CT_OK && ps) st = ct_dp_check_ps(job, mpi->size, &w.err);
  sh.ps = ps;
  snprintf(sh.kind, sizeof sh.kind, "MPI processes");
  sh.gpu = n_node_gpus > 0;
  if (st == CT_OK) st = mpi_run(&sh, &w, node_gpus, n_node_gpus, mpi, &w.err);
  w.st = st;
  if (st != CT_OK) {
    failure_message("rank", w.rank, w.device, w.training ? w.solver->iter : -1, &w.err, "", err);
    /* the job is about to be aborted: do not wait for the other ranks */
    if (w.comm && w.comm != mpi) ct_comm_abort(w.comm);
  }
  if (w.comm == mpi) w.comm = NULL;
  worker_cleanup(&w);
  shared_free(&sh);
  ct_comm_free(mpi);
  return st;
}

/* ------------------------------------------------------------------ shards */

/* GPU shards: global rank 0 (shard 0) makes the NCCL id and shares it
 * through the store, with its status so that a failure there fails all. */
static ct_status shards_nccl_id(ct_shard_session *ss, ct_nccl_id *id, ct_error *err) {
  ct_error local;
  ct_error_clear(&local);
  ct_status made = CT_OK;
  if (ss->shard_id == 0) made = ct_nccl_unique_id(id, &local);
  CT_TRY(ct_shard_share(ss, "nccl_id", 0, made, local.msg, id->bytes, sizeof id->bytes, err));
  if (made != CT_OK && err) *err = local;
  return made;
}

static ct_status shards_run(dp_shared *sh, ct_shard_session *ss, const ct_shard_opts *so,
                            const int *gpus, int n_gpus, ct_error *err) {
  const int per_shard = n_gpus > 0 ? n_gpus : 1, rank0 = ss->shard_id * per_shard;
  char prefix[64];
  snprintf(prefix, sizeof prefix, "shard %d of %d", ss->shard_id, ss->num_shards);
  sh->nodes = ss->hosts;
  snprintf(sh->kind, sizeof sh->kind, "%d shard%s of %s%s", ss->num_shards,
           ss->num_shards == 1 ? "" : "s", ss->where,
           n_gpus > 1 ? ", GPU threads in each" : "");
  if (sh->gpu && !sh->ps) {
    CT_TRY(shards_nccl_id(ss, &sh->nccl_id, err));
    snprintf(sh->transport, sizeof sh->transport, "NCCL %s (id shared through the %s)", ct_nccl_version(),
             ct_gloo_store_name(ss->store));
    snprintf(sh->devices, sizeof sh->devices, "%d GPU%s (%d per shard)", sh->world,
             sh->world == 1 ? "" : "s", n_gpus);
    return run_workers(sh, gpus, n_gpus, rank0, NULL, prefix, err);
  }
  ct_comm *comm = NULL;
  const ct_gloo_bind bind = {so->gloo_iface, so->gloo_host};
  ct_status st = ct_comm_gloo_create(&comm, ss->store, ss->shard_id, ss->num_shards, &bind,
                                     ss->timeout_s, sh->job->dp.timeout_s, err);
  if (st != CT_OK) return ct_error_prefix(err, "%s", prefix);
  /* parameter servers' GPU workers: every message through Gloo from host
   * memory (ps_client.c copies the shards out of and into the GPU) */
  snprintf(sh->transport, sizeof sh->transport, "%s over TCP%s, rank 0 at %s", ct_gloo_version(),
           sh->gpu ? ", from host memory" : "", ct_comm_gloo_address(comm));
  if (sh->gpu)
    snprintf(sh->devices, sizeof sh->devices, "%d GPU%s, servers on CPUs", sh->world,
             sh->world == 1 ? "" : "s");
  else
    snprintf(sh->devices, sizeof sh->devices, "CPU");
  LOG_INFO("Shard %d: Gloo listens on %s", ss->shard_id, ct_comm_gloo_address(comm));
  st = run_workers(sh, sh->gpu ? gpus : NULL, 1, rank0, comm, prefix, err);
  /* closing the connections now tells the other shards at once when this
   * one failed */
  ct_comm_free(comm);
  return st;
}

ct_status ct_dp_train_shards(const ct_dp_job *job, const ct_shard_opts *shard, const int *gpus,
                             int n_gpus, ct_error *err) {
  ct_shard_session *ss = NULL;
  char *agreement = NULL;
  const bool ps = job->ps.mode != CT_DP_ALLREDUCE;
  if (ps) CT_TRY(ps_gpu_shards(job, n_gpus, err)); /* before waiting for the others */
  CT_TRY(ct_dp_agreement(job, &agreement, err));
  ct_status joined = ct_shard_join(&ss, shard, n_gpus, agreement, err);
  free(agreement);
  if (joined != CT_OK) return joined;
  /* with parameter servers, the last num_servers shards serve */
  const int world = ps && ss->num_shards > job->ps.num_servers
                        ? ss->num_shards - job->ps.num_servers
                        : ss->num_shards * (n_gpus > 0 ? n_gpus : 1);
  dp_shared sh;
  ct_status st = shared_init(&sh, job, world, err);
  sh.threads = true;
  sh.gpu = n_gpus > 0;
  sh.ps = ps;
  if (st == CT_OK && ps) st = ct_dp_check_ps(job, ss->num_shards, err);
  if (st == CT_OK) st = shards_run(&sh, ss, shard, gpus, n_gpus, err);
  shared_free(&sh);
  ct_shard_free(ss);
  return st;
}
