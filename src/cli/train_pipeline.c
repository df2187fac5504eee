/* `cortado train --pipeline=...` under mpirun or over Gloo shards: pipeline
 * stages on CPU ranks or GPUs (GPUs under mpirun), and D x P data-parallel
 * replicas of them on CPU ranks (runtime/stages.h, docs/pipeline.md). */
#include <stdlib.h>
#include <string.h>

#include "cli/run_common.h"
#include "cli/train.h"
#include "core/log.h"
#include "gpu/gpu.h"
#include "net/net_load.h"
#include "parallel/comm_gloo.h"
#include "parallel/comm_mpi.h"
#include "parallel/shards.h"
#include "solvers/solver.h"

ct_stages_opts ct_cli_stages_opts(const ct_cli_args *args) {
  return (ct_stages_opts){
      .schedule = strcmp(ct_cli_string(args, "schedule"), "1f1b") == 0 ? CT_STAGES_1F1B : CT_STAGES_GPIPE,
      .keep_activations = !ct_cli_bool(args, "recompute")};
}

ct_status ct_cli_pipeline_cuts(const char *list, char ***out, int *n, ct_error *err) {
  char *copy = ct_xstrdup(list);
  int count = 1;
  for (const char *c = copy; *c; c++) count += *c == ',';
  char **names = ct_xcalloc((size_t)count, sizeof *names);
  char *p = copy;
  for (int i = 0; i < count; i++) {
    names[i] = p;
    char *comma = strchr(p, ',');
    if (comma) *comma = '\0';
    if (!*names[i]) {
      free(copy);
      free(names);
      return ct_error_set(err, CT_ERR_INVALID,
                          "--pipeline=%s: layer name %d is empty (give layer names separated by ',')",
                          list, i + 1);
    }
    p = comma ? comma + 1 : p + strlen(p);
  }
  *out = names;
  *n = count;
  return CT_OK;
}

ct_status ct_cli_stage_device(const ct_cli_args *args, bool solver_gpu, int *device,
                              ct_error *err) {
  *device = CT_DEVICE_CPU;
  bool cpu = false;
  CT_TRY(ct_cli_wants_cpu(args, &cpu, err));
  if (cpu || (!ct_cli_is_set(args, "gpu") && !solver_gpu)) return CT_OK;
  ct_gpu_list gpus;
  if (ct_cli_is_set(args, "gpu")) {
    CT_TRY(ct_cli_resolve_gpus(ct_cli_gpus(args, "gpu"), &gpus, err));
  } else {
    const ct_gpu_list all = {.all = true};
    CT_TRY(ct_cli_resolve_gpus(&all, &gpus, err));
  }
  if (gpus.n == 0) return CT_OK; /* --gpu=none */
  int local = ct_mpi_local_rank_from_env();
  if (local < 0) local = ct_mpi_rank_from_env();
  if (local < 0) local = 0;
  *device = gpus.ids[local % gpus.n];
  if (local >= gpus.n)
    LOG_WARNING("Pipeline: local rank %d shares GPU %d with local rank %d (%d GPU%s listed for "
                "this node)",
                local, *device, local % gpus.n, gpus.n, gpus.n == 1 ? "" : "s");
  return CT_OK;
}

/* The micro-batch count: --microbatches, else the solver's iter_size.
 * Errors: both given and different. */
static ct_status pipeline_micro(const ct_cli_args *args, const Caffe__SolverParameter *sp, int *micro,
                                ct_error *err) {
  const int flag = ct_cli_int(args, "microbatches");
  const int iter_size = sp->has_iter_size && sp->iter_size > 1 ? sp->iter_size : 1;
  if (flag > 0 && iter_size > 1 && flag != iter_size)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--microbatches=%d and the solver's iter_size %d disagree: under "
                        "--pipeline the iteration's passes are its micro-batches (give one of them)",
                        flag, iter_size);
  *micro = flag > 0 ? flag : iter_size;
  return CT_OK;
}

/* Stage 0 logs every stage's timing and memory (runtime/stages.h). */
static void log_stages(const ct_solver *s) {
  ct_stages *pl = ct_runtime_stages(s->rt);
  for (int k = 0; pl && k < ct_stages_count(pl); k++) {
    char line[512];
    ct_stages_describe_timing(pl, k, line, sizeof line);
    LOG_INFO("Pipeline %s", line);
  }
}

/* The stage count before the net is built: --pipeline's names plus one,
 * or one more than the highest pipeline_stage of the layers in the train
 * net (a net that skips a stage is refused when it is built). */
static int count_stages(const Caffe__SolverParameter *sp, int ncuts, bool flag) {
  if (flag) return ncuts + 1;
  const Caffe__NetParameter *given[2] = {sp->train_net_param, sp->net_param};
  const char *files[2] = {sp->train_net, sp->net};
  int top = 0;
  for (int k = 0; k < 4; k++) {
    Caffe__NetParameter *read = NULL;
    const Caffe__NetParameter *np = k < 2 ? given[k] : NULL;
    ct_error ignored;
    if (k >= 2 && files[k - 2] && ct_net_param_read(files[k - 2], &read, &ignored) == CT_OK) np = read;
    if (!np) continue;
    Caffe__NetState state;
    ct_solver_train_state(sp, np, &state);
    for (size_t i = 0; i < np->n_layer; i++)
      if (np->layer[i]->has_pipeline_stage && ct_net_state_includes(&state, np->layer[i]) &&
          np->layer[i]->pipeline_stage > top)
        top = np->layer[i]->pipeline_stage;
    ct_net_state_clear(&state);
    if (read) protobuf_c_message_free_unpacked(&read->base, NULL);
    break;
  }
  return top + 1;
}

/* The communicators of D x P: with ranks = D x stages, rank r * P + s
 * holds stage s of replica r; *stages gets the ranks of its replica and
 * *reduce those of its stage (NULL with one replica: *stages is world).
 * Errors: the split's. */
static ct_status split_world(ct_comm *world, int nstages, ct_comm **stages, ct_comm **reduce,
                             ct_error *err) {
  *stages = world;
  *reduce = NULL;
  if (world->size <= nstages || world->size % nstages != 0) return CT_OK;
  const int stage = world->rank % nstages, replica = world->rank / nstages;
  CT_TRY(ct_comm_split(world, replica, stage, stages, err));
  ct_status st = ct_comm_split(world, stage, replica, reduce, err);
  if (st != CT_OK) {
    ct_comm_free(*stages);
    *stages = world;
  }
  return st;
}

int ct_cli_pipeline_processes(const ct_cli_args *args, ct_shard_opts *so, bool *shards) {
  memset(so, 0, sizeof *so);
  *shards = ct_cli_shards_requested(args);
  if (*shards && ct_mpi_launched())
    return ct_cli_error(CT_EXIT_USAGE, "--num_shards and the store flags do not go with mpirun: use one or the other");
  if (*shards) return ct_cli_shard_opts(args, so);
  if (!ct_mpi_launched())
    return ct_cli_error(CT_EXIT_USAGE,
                        "--pipeline needs one process per stage: start them with mpirun -np P "
                        "(P: the stage count, one more than the layer names), or as P shards "
                        "(--num_shards=P --shard_id=0..P-1 and a store)");
  return CT_EXIT_OK;
}

ct_status ct_cli_pipeline_world(const ct_shard_opts *shards, int device, double comm_timeout_s,
                                ct_shard_session **ss, ct_comm **world, ct_error *err) {
  *ss = NULL;
  *world = NULL;
  if (!shards) return ct_comm_mpi_create(world, err);
  if (device != CT_DEVICE_CPU)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "--pipeline over shards runs its stages on CPUs (GPU stages talk through "
                        "mpirun ranks for now); give --cpu, or start the stages with mpirun");
  CT_TRY(ct_shard_join(ss, shards, 0, NULL, err));
  const ct_gloo_bind bind = {shards->gloo_iface, shards->gloo_host};
  CT_TRY(ct_comm_gloo_create(world, (*ss)->store, shards->shard_id, shards->num_shards, &bind,
                             (*ss)->timeout_s, comm_timeout_s, err));
  LOG_INFO("Pipeline: shard %d of %d (%s), Gloo listens on %s", shards->shard_id, shards->num_shards,
           (*ss)->where, ct_comm_gloo_address(*world));
  return CT_OK;
}

int ct_cli_train_pipeline(const ct_cli_args *args, Caffe__SolverParameter *sp,
                          const ct_solver_opts *solver_opts, const ct_shard_opts *shards,
                          void (*watch)(const ct_cli_args *args, ct_solver *s)) {
  ct_error err;
  char **cuts = NULL;
  int ncuts = 0, micro = 1, device = CT_DEVICE_CPU;
  ct_status st = CT_OK;
  if (ct_cli_is_set(args, "pipeline"))
    st = ct_cli_pipeline_cuts(ct_cli_string(args, "pipeline"), &cuts, &ncuts, &err);
  else
    LOG_INFO("Pipeline stages from the train net's pipeline_stage fields");
  if (st == CT_OK) st = pipeline_micro(args, sp, &micro, &err);
  if (st == CT_OK)
    st = ct_cli_stage_device(args,
                             sp->has_solver_mode &&
                                 sp->solver_mode == CAFFE__SOLVER_PARAMETER__SOLVER_MODE__GPU,
                             &device, &err);
  if (st != CT_OK) {
    if (cuts) free(cuts[0]);
    free(cuts);
    ct_mpi_finalize();
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  }
  ct_comm *world = NULL, *comm = NULL, *reduce = NULL;
  ct_context ctx;
  ct_solver *s = NULL;
  bool ctx_made = false, training = false;
  const uint64_t seed = sp->has_random_seed && sp->random_seed >= 0 ? (uint64_t)sp->random_seed : 0;
  const int32_t iter_size = sp->iter_size;
  const protobuf_c_boolean has_iter_size = sp->has_iter_size;
  sp->iter_size = micro;
  sp->has_iter_size = 1;
  const int nstages = count_stages(sp, ncuts, cuts != NULL);
  ct_shard_session *ss = NULL;
  if (shards && shards->num_shards % nstages != 0)
    st = ct_error_set(&err, CT_ERR_INVALID,
                      "--pipeline over shards: %d stages need --num_shards=%d (one shard a stage) or "
                      "a multiple of it (replicas of the stages), not %d",
                      nstages, nstages, shards->num_shards);
  else
    st = ct_cli_pipeline_world(shards, device, ct_cli_double(args, "comm_timeout"), &ss, &world, &err);
  if (st == CT_OK) {
    ct_comm_set_watchdog(world, ct_cli_double(args, "comm_timeout"), NULL);
    st = split_world(world, nstages, &comm, &reduce, &err);
  }
  if (st == CT_OK && reduce && device != CT_DEVICE_CPU)
    st = ct_error_set(&err, CT_ERR_UNSUPPORTED,
                      "--pipeline: %d ranks make %d replicas of the %d stages, and replicas of "
                      "stages on GPUs are not written yet (their gradients would be averaged "
                      "through NCCL); start one rank per stage (mpirun -np %d), or give --cpu",
                      world->size, world->size / nstages, nstages, nstages);
  if (st == CT_OK) {
    st = ct_cli_context_init(args, &ctx, device, seed, &err);
    ctx_made = st == CT_OK;
  }
  if (st == CT_OK && device != CT_DEVICE_CPU)
    LOG_INFO("Pipeline: rank %d on GPU %d", world->rank, device);
  ct_solver_opts opts = *solver_opts;
  if (reduce) {
    /* the replicas are data-parallel workers: each reads its shard, the
     * first snapshots and displays */
    ctx.rank = reduce->rank;
    ctx.world = reduce->size;
    opts.replica = reduce->rank > 0;
    LOG_INFO("Pipeline: %d replicas of %d stages (%d ranks); each stage's gradients are averaged "
             "over its replicas",
             reduce->size, nstages, world->size);
  }
  /* each rank builds its stage's layers only */
  ct_stages_cut cut = {.after = (const char *const *)cuts, .nafter = ncuts};
  if (world) {
    cut.rank = world->rank;
    cut.ranks = world->size;
  }
  opts.train_part = (ct_net_part){ct_stages_part, &cut};
  ct_stages_cut test_cut = cut; /* the test nets are cut after the same layers */
  test_cut.test = true;
  opts.test_part = (ct_net_part){ct_stages_part, &test_cut};
  if (st == CT_OK) st = ct_solver_init(&s, sp, &opts, &ctx, &err);
  sp->iter_size = iter_size;
  sp->has_iter_size = has_iter_size;
  if (st == CT_OK && ct_cli_is_set(args, "weights"))
    st = ct_solver_copy_trained_files(s, ct_cli_string(args, "weights"), &err);
  const ct_stages_opts so = ct_cli_stages_opts(args);
  if (st == CT_OK) st = ct_solver_set_pipeline(s, comm, (const char *const *)cuts, ncuts, &so, &err);
  if (st == CT_OK && reduce) {
    const ct_reduce_opts ro = {.bucket_bytes = (size_t)(ct_cli_double(args, "bucket_mb") * 1048576.0),
                               .timeout_s = ct_cli_double(args, "comm_timeout")};
    st = ct_solver_set_reduce(s, reduce, &ro, false, NULL, &err);
  }
  int rc = CT_EXIT_OK;
  if (st == CT_OK) {
    watch(args, s);
    LOG_INFO("Starting Optimization");
    const char *resume = ct_cli_is_set(args, "snapshot") ? ct_cli_string(args, "snapshot") : NULL;
    if (resume) LOG_INFO("Resuming from %s", resume);
    training = true;
    st = ct_solver_solve(s, resume, &err);
    watch(args, NULL);
    log_stages(s);
  }
  if (st != CT_OK) {
    rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
    if (training) ct_mpi_abort_job(1);
  } else {
    LOG_INFO("Optimization Done.");
  }
  ct_solver_free(s);
  if (ctx_made) ct_context_free(&ctx);
  if (comm != world) ct_comm_free(comm);
  ct_comm_free(reduce);
  ct_comm_free(world);
  ct_shard_free(ss);
  if (cuts) free(cuts[0]);
  free(cuts);
  ct_mpi_finalize();
  return rc;
}

/* Whether a train net of sp places its layers (pipeline_stage). */
static bool net_places_layers(const Caffe__NetParameter *np) {
  for (size_t i = 0; np && i < np->n_layer; i++)
    if (np->layer[i]->has_pipeline_stage) return true;
  return false;
}

/* *yes becomes true when the net file at path places its layers; a file
 * that cannot be read places nothing (the solver reports it as it builds
 * the net). */
static void file_places_layers(const char *path, bool *yes) {
  Caffe__NetParameter *np = NULL;
  ct_error ignored;
  if (!path || ct_net_param_read(path, &np, &ignored) != CT_OK) return;
  *yes = *yes || net_places_layers(np);
  protobuf_c_message_free_unpacked(&np->base, NULL);
}

bool ct_cli_wants_pipeline(const ct_cli_args *args, const Caffe__SolverParameter *sp) {
  bool yes = ct_cli_is_set(args, "pipeline");
  if (yes || !(ct_mpi_launched() || ct_cli_shards_requested(args))) return yes;
  yes = net_places_layers(sp->net_param) || net_places_layers(sp->train_net_param);
  file_places_layers(sp->net, &yes);
  file_places_layers(sp->train_net, &yes);
  return yes;
}

