/* cortado.h: training with the engine of `cortado train` (src/parallel/dp.h):
 * one worker, worker threads, worker processes, MPI ranks or shards. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "core/log.h"
#include "net/net_load.h"
#include "parallel/comm_mpi.h"
#include "parallel/dp.h"

/* What the hooks of one cortado_train call share. */
typedef struct api_train {
  const cortado_train_options *o;
  pthread_mutex_t mu;
  cortado_solver **workers; /* wrappers made by on_solver, freed by on_solver_end */
  int nworkers;
} api_train;

static ct_status on_solver(void *user, ct_solver *s, ct_error *err) {
  api_train *t = user;
  cortado_solver *cs = api_solver_wrap(s, NULL, false);
  pthread_mutex_lock(&t->mu);
  t->workers = ct_xrealloc(t->workers, (size_t)(t->nworkers + 1) * sizeof *t->workers);
  t->workers[t->nworkers++] = cs;
  pthread_mutex_unlock(&t->mu);
  if (!t->o->on_worker) return CT_OK;
  cortado_status st = t->o->on_worker(t->o->user, cs);
  if (st == CORTADO_OK) return CT_OK;
  api_last_error((ct_status)st, err);
  return (ct_status)st;
}

static void on_solver_end(void *user, ct_solver *s) {
  api_train *t = user;
  cortado_solver *cs = NULL;
  pthread_mutex_lock(&t->mu);
  for (int i = 0; i < t->nworkers; i++)
    if (t->workers[i]->s == s) {
      cs = t->workers[i];
      t->workers[i] = t->workers[--t->nworkers];
      break;
    }
  pthread_mutex_unlock(&t->mu);
  if (cs && t->o->on_worker_end) t->o->on_worker_end(t->o->user, cs);
  api_solver_unwrap(cs);
}

static ct_status on_display(void *user, const ct_solver_display *d, ct_error *err) {
  api_train *t = user;
  if (!t->o->on_display) return CT_OK;
  cortado_display cd = {.iter = d->iter, .loss = d->loss, .rate = d->lr,
                        .inputs_per_iter = d->inputs_per_iter};
  if (d->solver->ntest_nets > 0) {
    cd.test_scores = d->solver->test_scores[0];
    cd.ntest_scores = d->solver->ntest_scores[0];
  }
  cortado_status st = t->o->on_display(t->o->user, &cd);
  if (st == CORTADO_OK) return CT_OK;
  api_last_error((ct_status)st, err);
  return (ct_status)st;
}

/* The solver that cortado_train_request reaches when one worker trains
 * without the data-parallel driver. */
static ct_solver *volatile g_single;

void cortado_train_request(int requests) {
  int a = 0;
  if (requests & CORTADO_REQUEST_STOP) a |= CT_SOLVER_ACTION_STOP;
  if (requests & CORTADO_REQUEST_SNAPSHOT) a |= CT_SOLVER_ACTION_SNAPSHOT;
  ct_solver *s = g_single;
  if (s) ct_solver_request(s, a);
  ct_dp_request(a);
}

/* One worker on the CPU or one GPU (what `cortado train` does without data
 * parallelism). */
static ct_status train_single(const ct_dp_job *job, int device, ct_error *err) {
  const Caffe__SolverParameter *sp = job->solver_param;
  ct_context ctx;
  uint64_t seed = sp->has_random_seed && sp->random_seed >= 0 ? (uint64_t)sp->random_seed : 0;
  CT_TRY(ct_context_init(&ctx, device, seed, err));
  if (job->strict_fp32) ct_context_set_tf32(&ctx, false);
  ct_solver *s = NULL;
  ct_status st = ct_solver_init(&s, sp, &job->solver_opts, &ctx, err);
  if (st == CT_OK && job->weights) st = ct_solver_copy_trained_files(s, job->weights, err);
  if (st == CT_OK && job->resume) {
    LOG_INFO("Restoring previous solver status from %s", job->resume);
    st = ct_solver_restore(s, job->resume, err);
  }
  bool hooked = false;
  if (st == CT_OK && job->on_solver) {
    st = job->on_solver(job->user, s, err);
    hooked = true;
  }
  if (st == CT_OK) {
    g_single = s;
    st = ct_solver_solve(s, NULL, err);
    g_single = NULL;
  }
  if (hooked && job->on_solver_end) job->on_solver_end(job->user, s);
  ct_solver_free(s);
  ct_context_free(&ctx);
  return st;
}

static ct_status run(const cortado_train_options *o, const ct_dp_job *job, ct_error *err) {
  if (o->mpi) {
    if (!cortado_has_mpi()) return ct_error_set(err, CT_ERR_UNSUPPORTED, "this build of Cortado has no MPI");
    ct_status st = ct_dp_train_mpi(job, o->gpus, o->ngpus, err);
    ct_mpi_finalize();
    return st;
  }
  if (o->num_shards > 1 || o->file_store_path || o->redis_host) {
    ct_shard_opts so = {.num_shards = o->num_shards > 0 ? o->num_shards : 1,
                        .shard_id = o->shard_id,
                        .run_id = o->run_id,
                        .file_store_path = o->file_store_path,
                        .redis_host = o->redis_host,
                        .redis_port = o->redis_port > 0 ? o->redis_port : 6379,
                        .redis_password = o->redis_password,
                        .rendezvous_timeout_s = o->rendezvous_timeout_s > 0 ? o->rendezvous_timeout_s : 300,
                        .gloo_iface = o->gloo_iface,
                        .gloo_host = o->gloo_host};
    if (so.shard_id < 0 || so.shard_id >= so.num_shards)
      return ct_error_set(err, CT_ERR_INVALID, "shard_id %d is not below num_shards %d", so.shard_id,
                          so.num_shards);
    if (!so.run_id || !*so.run_id)
      return ct_error_set(err, CT_ERR_INVALID, "shards need a run_id (the same on every shard)");
    if ((so.file_store_path != NULL) == (so.redis_host != NULL))
      return ct_error_set(err, CT_ERR_INVALID, "shards need exactly one of file_store_path and redis_host");
    return ct_dp_train_shards(job, &so, o->gpus, o->ngpus, err);
  }
  if (o->process_rank >= 0) {
    if (o->ngpus < 1 || o->process_rank >= o->ngpus || !o->nccl_id)
      return ct_error_set(err, CT_ERR_INVALID,
                          "a worker process needs its GPUs, a process_rank below their count and the NCCL id");
    ct_nccl_id id;
    memcpy(id.bytes, o->nccl_id, sizeof id.bytes);
    return ct_dp_train_process(job, o->gpus, o->ngpus, o->process_rank, &id, err);
  }
  if (o->ngpus > 1) return ct_dp_train_threads(job, o->gpus, o->ngpus, err);
  if (o->cpu_workers > 1) {
    if (o->ngpus > 0)
      return ct_error_set(err, CT_ERR_INVALID, "give GPUs or CPU workers, not both");
    return ct_dp_train_threads(job, NULL, o->cpu_workers, err);
  }
  return train_single(job, o->ngpus == 1 ? o->gpus[0] : CT_DEVICE_CPU, err);
}

cortado_status cortado_train(const char *solver_path, const cortado_train_options *opts) {
  static const cortado_train_options defaults = CORTADO_TRAIN_OPTIONS_INIT;
  if (!opts) opts = &defaults;
  ct_error err;
  if (opts->ngpus > 0 && !cortado_has_cuda())
    return cortado_set_error(CORTADO_ERR_UNSUPPORTED, "GPUs were asked for, but this build of Cortado has no CUDA");
  if (opts->weights && opts->snapshot)
    return cortado_set_error(CORTADO_ERR_INVALID,
                             "give snapshot to resume training or weights to fine-tune, not both");
  Caffe__SolverParameter *sp;
  if (ct_solver_param_read(solver_path, &sp, &err) != CT_OK) return api_fail(&err);
  api_apply_train_state(sp, opts->level, opts->stages, opts->nstages);
  api_train t = {.o = opts};
  pthread_mutex_init(&t.mu, NULL);
  ct_dp_job job;
  memset(&job, 0, sizeof job);
  job.solver_param = sp;
  job.solver_opts.on_display = on_display;
  job.solver_opts.display_user = &t;
  job.weights = opts->weights && *opts->weights ? opts->weights : NULL;
  job.resume = opts->snapshot && *opts->snapshot ? opts->snapshot : NULL;
  job.global_batch = opts->global_batch;
  job.strict_fp32 = opts->strict_fp32;
  job.dp.bucket_bytes = (size_t)((opts->bucket_mb > 0 ? opts->bucket_mb : 25.0) * 1048576.0);
  job.dp.timeout_s = opts->comm_timeout_s;
  job.on_solver = on_solver;
  job.on_solver_end = on_solver_end;
  job.user = &t;
  LOG_INFO("Starting Optimization");
  sigset_t mask;
  const bool shielded = api_shield(&mask);
  ct_status st = run(opts, &job, &err);
  api_unshield(shielded, &mask);
  if (st == CT_OK) LOG_INFO("Optimization Done.");
  CT_ASSERT(t.nworkers == 0); /* every worker's end was reported */
  free(t.workers);
  pthread_mutex_destroy(&t.mu);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
  return api_result(st, &err);
}

cortado_status cortado_nccl_new_id(unsigned char id[CORTADO_NCCL_ID_BYTES]) {
  ct_error err;
  ct_nccl_id nid;
  _Static_assert(CORTADO_NCCL_ID_BYTES == CT_NCCL_ID_BYTES, "NCCL id size");
  if (ct_nccl_unique_id(&nid, &err) != CT_OK) return api_fail(&err);
  memcpy(id, nid.bytes, CORTADO_NCCL_ID_BYTES);
  return CORTADO_OK;
}
