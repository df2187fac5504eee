/* `mpirun -np P cortado time --pipeline=A[,B...]` (or P Gloo shards): whole pipelined
 * iterations (forward and backward of --microbatches micro-batches, no
 * update) on CPU ranks or GPUs, and stage 0's report of every stage's time, bubble
 * and memory (runtime/stages.h). */
#include <stdlib.h>
#include <string.h>

#include "cli/run_common.h"
#include "cli/time_report.h"
#include "cli/train.h"
#include "core/clock.h"
#include "core/log.h"
#include "parallel/comm_mpi.h"
#include "runtime/runtime.h"

/* The iterations on a built stage; *ms gets stage 0's mean milliseconds
 * per iteration.  Errors: the runtime's. */
static ct_status run_stages(const ct_cli_args *args, ct_net *net, ct_comm *comm, char **cuts,
                            int ncuts, int micro, double *ms, ct_error *err) {
  ct_runtime *rt;
  const ct_rt_opts o = {.iter_size = micro};
  CT_TRY(ct_runtime_new(&rt, net, &o, err));
  const ct_stages_opts so = ct_cli_stages_opts(args);
  ct_status st = ct_runtime_set_pipeline(rt, comm, (const char *const *)cuts, ncuts, &so, err);
  const int iters = ct_cli_int(args, "iterations");
  /* one warm-up iteration, left out of the stages' times */
  for (int it = 0; it <= iters && st == CT_OK; it++) {
    const double t0 = ct_monotonic_s();
    unsigned seq;
    ct_rt_result res;
    st = ct_runtime_launch(rt, &seq, err);
    if (st == CT_OK) st = ct_runtime_finish(rt, seq, &res, err);
    if (st == CT_OK && it == 0) ct_stages_reset_timing(ct_runtime_stages(rt));
    if (st == CT_OK && it > 0)
      LOG_INFO("Iteration: %d forward-backward time: %g ms.", it, 1e3 * (ct_monotonic_s() - t0));
  }
  ct_stages *pl = st == CT_OK ? ct_runtime_stages(rt) : NULL;
  for (int s = 0; pl && s < ct_stages_count(pl); s++) {
    char line[512];
    ct_stages_describe_timing(pl, s, line, sizeof line);
    LOG_INFO("Pipeline %s", line);
  }
  if (pl) {
    ct_stages_timing t;
    ct_stages_timing_of(pl, 0, &t);
    *ms = t.iterations ? 1e3 * t.wall / t.iterations : 0;
  }
  ct_runtime_free(rt);
  return st;
}

int ct_cli_time_pipeline(const ct_cli_args *args) {
  ct_error err;
  ct_shard_opts so;
  bool shards = false;
  const int rc0 = ct_cli_pipeline_processes(args, &so, &shards);
  if (rc0 != CT_EXIT_OK) return rc0;
  int device = CT_DEVICE_CPU;
  if (ct_cli_stage_device(args, false, &device, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  if (shards ? so.shard_id > 0 : ct_mpi_rank_from_env() > 0) ct_log_set_quiet(true);
  char **cuts = NULL;
  int ncuts = 0;
  if (ct_cli_pipeline_cuts(ct_cli_string(args, "pipeline"), &cuts, &ncuts, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  const int micro = ct_cli_int(args, "microbatches") > 0 ? ct_cli_int(args, "microbatches") : 1;
  ct_comm *comm = NULL;
  ct_context ctx;
  ct_net *net = NULL;
  bool ctx_made = false;
  ct_shard_session *ss = NULL;
  ct_status st = ct_cli_pipeline_world(shards ? &so : NULL, device, 0, &ss, &comm, &err);
  if (st == CT_OK) {
    ct_comm_set_watchdog(comm, 0, NULL);
    st = ct_cli_context_init(args, &ctx, device, 1701, &err);
    ctx_made = st == CT_OK;
  }
  ct_stages_cut cut = {.after = (const char *const *)cuts, .nafter = ncuts};
  if (comm) {
    cut.rank = comm->rank;
    cut.ranks = comm->size;
  }
  const ct_net_part part = {ct_stages_part, &cut};
  const char *phase_s = ct_cli_string(args, "phase");
  const ct_phase phase = phase_s && strcmp(phase_s, "TEST") == 0 ? CT_PHASE_TEST : CT_PHASE_TRAIN;
  if (st == CT_OK) st = ct_cli_build_model_part(args, phase, &ctx, &part, &net, &err);
  double ms = 0;
  if (st == CT_OK) {
    LOG_INFO("*** Benchmark begins: %d pipelined iterations of %d micro-batch%s ***",
             ct_cli_int(args, "iterations"), micro, micro == 1 ? "" : "es");
    st = run_stages(args, net, comm, cuts, ncuts, micro, &ms, &err);
  }
  int rc = CT_EXIT_OK;
  if (st != CT_OK) {
    rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  } else {
    LOG_INFO("Average Forward-Backward: %g ms.", ms);
    LOG_INFO("*** Benchmark ends ***");
  }
  ct_net_free(net);
  if (ctx_made) ct_context_free(&ctx);
  ct_comm_free(comm);
  ct_shard_free(ss);
  free(cuts[0]);
  free(cuts);
  ct_mpi_finalize();
  return rc;
}
