/* cortado time: benchmark a network's forward and backward passes. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/run_common.h"
#include "cli/time_report.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/trace.h"
#include "gpu/gpu.h"
#include "runtime/runtime.h"
#include "proto/reflect.h"
#include "solvers/solver.h"

static const ct_flag_spec time_flags[] = {
    CT_CLI_FLAG_MODEL,
    CT_CLI_FLAG_ITERATIONS,
    CT_CLI_FLAG_GPU_ONE,
    CT_CLI_FLAG_CPU,
    {"phase", CT_FLAG_STRING, "TRAIN", "The phase of the net to build and time.",
     .choices = "TRAIN|TEST"},
    CT_CLI_FLAG_LEVEL,
    CT_CLI_FLAG_STAGE,
    CT_CLI_FLAG_MATH,
    CT_CLI_FLAG_PRECISION,
    CT_CLI_FLAG_DUMMY_DATA,
    CT_CLI_FLAG_DUMMY_SHAPE,
    {"update", CT_FLAG_BOOL, "false",
     "Time whole training iterations instead: forward, backward and an SGD update (momentum "
     "0.9, weight decay 5e-4, the settings of the PyTorch peer in bench/), through the solver."},
    CT_CLI_FLAG_TRACE,
    CT_CLI_FLAG_TRACE_ITERS,
    {"format", CT_FLAG_STRING, "table",
     "The per-layer report written to standard output after the log's lines (not with "
     "--update): each layer's time (mean and standard deviation over the iterations), FLOPs, "
     "achieved GFLOP/s and memory (tops, parameters, workspace), then the same per layer type "
     "and for the whole net; as a table, CSV or JSON.",
     .choices = CT_TIME_REPORT_FORMATS},
    {"pipeline", CT_FLAG_STRING, NULL,
     "Under mpirun, or over Gloo shards (--num_shards, a stage each, CPU stages): cut the net "
     "after these layers (comma-separated, as train's --pipeline) and time whole pipelined "
     "iterations (forward and backward of --microbatches micro-batches, no update) on CPU "
     "ranks or, with --gpu, on the GPU of each rank's local rank; stage 0 logs each stage's "
     "forward, backward and idle time, its bubble fraction and its memory."},
    {"microbatches", CT_FLAG_INT, "0",
     "With --pipeline: micro-batches per iteration, each a batch of the net's batch_size (0: 1).",
     .min = 0, .max = 65536},
    {"schedule", CT_FLAG_STRING, "gpipe",
     "With --pipeline: gpipe (every forward, then every backward) or 1f1b.",
     .choices = "gpipe|1f1b"},
    {"recompute", CT_FLAG_BOOL, "true",
     "With --pipeline: recompute each micro-batch's forward before its backward (true), or "
     "keep every micro-batch's activations (false), as train's --recompute."},
    CT_CLI_FLAGS_SHARDS,
};

static double now_ms(void) { return 1e3 * ct_monotonic_s(); }

/* A SolverParameter that trains `net` (moved in) with SGD as the PyTorch peer does. */
static Caffe__SolverParameter *bench_solver(Caffe__NetParameter *net, int iters) {
  Caffe__SolverParameter *sp = (Caffe__SolverParameter *)ct_pb_new(&caffe__solver_parameter__descriptor);
  sp->net_param = net;
  ct_pb_set_string(&sp->base, ct_pb_field(&caffe__solver_parameter__descriptor, "type"), "SGD");
  ct_pb_set_string(&sp->base, ct_pb_field(&caffe__solver_parameter__descriptor, "lr_policy"), "fixed");
  sp->has_base_lr = sp->has_momentum = sp->has_weight_decay = sp->has_max_iter = 1;
  sp->base_lr = 0.01f;
  sp->momentum = 0.9f;
  sp->weight_decay = 5e-4f;
  sp->max_iter = iters + 1000;
  sp->has_display = sp->has_snapshot_after_train = sp->has_random_seed = 1;
  sp->display = 0;
  sp->snapshot_after_train = 0;
  sp->random_seed = 1701;
  return sp;
}

/* --update: times whole training iterations (the solver's step, which is
 * what `cortado train` runs) after a warm-up. */
static int time_training(const ct_cli_args *args, ct_context *ctx) {
  ct_error err;
  Caffe__NetParameter *param;
  if (ct_cli_load_model_param(args, &param, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  int iters = ct_cli_int(args, "iterations");
  Caffe__SolverParameter *sp = bench_solver(param, iters);
  ct_solver_opts opts = {.quiet_nets = true};
  ct_solver *s;
  int rc = CT_EXIT_OK;
  if (ct_solver_init(&s, sp, &opts, ctx, &err) != CT_OK) {
    protobuf_c_message_free_unpacked(&sp->base, NULL);
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  }
  int warmup = iters < 10 ? iters : 10;
  size_t batch = 0;
  if (s->net->nblobs > 0 && s->net->blobs[0]->ndim > 0) batch = (size_t)s->net->blobs[0]->shape[0];
  LOG_INFO("*** Benchmark begins: %d warm-up and %d timed training iterations ***", warmup, iters);
  if (ct_solver_step(s, warmup, &err) != CT_OK) {
    rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  } else {
    ct_context_sync(ctx);
    double t0 = now_ms();
    if (ct_solver_step(s, iters, &err) != CT_OK) {
      rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
    } else {
      ct_context_sync(ctx);
      double ms = (now_ms() - t0) / iters;
      LOG_INFO("Average training iteration (forward, backward, update): %g ms.", ms);
      if (batch) LOG_INFO("Throughput: %.1f images/s (batch %zu).", batch * 1000.0 / ms, batch);
      LOG_INFO("Last loss: %g", (double)s->smoothed_loss);
      if (ctx->device != CT_DEVICE_CPU) {
        size_t cur, peak;
        ct_gpu_memory_stats(ctx->device, &cur, &peak);
        LOG_INFO("Peak GPU memory: %.1f MB (allocated by Cortado; %.1f MB now)", peak / 1048576.0,
                 cur / 1048576.0);
        const ct_net_memory m = ct_net_memory_split(s->net);
        const size_t hist = (size_t)s->rule->nslots * s->net->flat_count * sizeof(float);
        const size_t known = m.blob_data + m.blob_diffs + m.pool + m.flat + m.layer_state + hist;
        LOG_INFO("Of the %.1f MB held: blob values %.1f, blob gradients %.1f, the blob pool (values and "
                 "gradients by lifetime) %.1f, "
                 "parameters and gradients %.1f, layer state %.1f (bench/net_memory names the "
                 "layers), solver history %.1f, the rest (test nets, workspaces, the runtime) %.1f",
                 cur / 1048576.0, m.blob_data / 1048576.0, m.blob_diffs / 1048576.0,
                 m.pool / 1048576.0, m.flat / 1048576.0, m.layer_state / 1048576.0,
                 hist / 1048576.0, cur > known ? (cur - known) / 1048576.0 : 0.0);
      }
      LOG_INFO("*** Benchmark ends ***");
    }
  }
  ct_solver_free(s);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
  return rc;
}

/* GPU: whole iterations (forward and backward, one wait at the end, as the
 * solver runs them) through the runtime; returns the mean milliseconds per
 * iteration, or a negative value after a failure (logged). */
static double time_iterations(ct_net *net, int iters) {
  ct_runtime *rt;
  ct_error err;
  if (ct_runtime_new(&rt, net, NULL, &err) != CT_OK) {
    LOG_ERROR("%s", err.msg);
    return -1;
  }
  double ms = -1;
  ct_runtime_set_trace_iter(rt, -3); /* the timed iterations are 0, 1, ... */
  /* three runs before timing: plain, watched, captured */
  for (int it = 0; it < 3 + iters; it++) {
    if (it == 3) ms = now_ms();
    unsigned seq;
    ct_rt_result res;
    if (ct_runtime_launch(rt, &seq, &err) != CT_OK ||
        ct_runtime_finish(rt, seq, &res, &err) != CT_OK) {
      LOG_ERROR("%s", err.msg);
      ct_runtime_free(rt);
      return -1;
    }
  }
  ms = (now_ms() - ms) / iters;
  char how[192];
  ct_runtime_describe(rt, how, sizeof how);
  LOG_INFO("%s", how);
  ct_runtime_free(rt);
  return ms;
}

/* Caffe's `time`: one warm-up pass, then per-layer forward and backward
 * times averaged over --iterations, with Caffe's summary lines.  On a GPU
 * the per-layer times come from a pass that waits after each layer, and
 * "Average Forward-Backward" from whole iterations run by the runtime
 * (the per-layer pass's total is logged too); the peak device memory
 * Cortado held is logged at the end. */
static int time_run(const ct_cli_args *args) {
  ct_error err;
  if (ct_cli_is_set(args, "pipeline")) return ct_cli_time_pipeline(args);
  int device;
  bool cpu;
  if (ct_cli_wants_cpu(args, &cpu, &err) != CT_OK) return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  if (ct_cli_pick_device(args, &device, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  ct_context ctx;
  if (ct_cli_trace_start(args, 0, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  if (ct_cli_context_init(args, &ctx, device, 1701, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  if (ct_cli_bool(args, "update")) {
    int rc = time_training(args, &ctx);
    ct_context_free(&ctx);
    return ct_cli_trace_finish(args, rc);
  }
  const char *phase_s = ct_cli_string(args, "phase");
  ct_phase phase = phase_s && strcmp(phase_s, "TEST") == 0 ? CT_PHASE_TEST : CT_PHASE_TRAIN;
  ct_net *net;
  if (ct_cli_build_model(args, phase, &ctx, &net, &err) != CT_OK) {
    ct_context_free(&ctx);
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  }
  int iters = ct_cli_int(args, "iterations");
  int rc = CT_EXIT_OK;
  LOG_INFO("Performing Forward");
  double loss;
  if (ct_net_forward(net, &loss, &err) != CT_OK) {
    rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
    goto done;
  }
  LOG_INFO("Initial loss: %g", loss);
  LOG_INFO("Performing Backward");
  ct_net_backward(net);
  ct_context_sync(&ctx);

  /* (iters, nlayers) milliseconds of each pass of each layer */
  const size_t nl = (size_t)net->nlayers;
  double *fwd = ct_xcalloc((size_t)iters * nl + 1, sizeof(double));
  double *bwd = ct_xcalloc((size_t)iters * nl + 1, sizeof(double));
  LOG_INFO("*** Benchmark begins ***");
  LOG_INFO("Testing for %d iterations.", iters);
  double total = 0, fwd_total = 0, bwd_total = 0;
  for (int it = 0; it < iters && rc == CT_EXIT_OK; it++) {
    double t_iter = now_ms(), t_f = t_iter;
    for (int i = 0; i < net->nlayers; i++) {
      double t0 = now_ms();
      if (ct_layer_forward(net->layers[i], net->bottoms[i], net->tops[i], NULL, &err) != CT_OK) {
        rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
        break;
      }
      ct_context_sync(&ctx);
      fwd[(size_t)it * nl + i] = now_ms() - t0;
    }
    fwd_total += now_ms() - t_f;
    double t_b = now_ms();
    for (int i = net->nlayers - 1; i >= 0 && rc == CT_EXIT_OK; i--) {
      double t0 = now_ms();
      if (net->layer_need_backward[i])
        ct_layer_backward(net->layers[i], net->tops[i], net->bottom_need_backward[i], net->bottoms[i]);
      ct_context_grad_join(&ctx); /* the layer's time includes its gradient-stream work */
      ct_context_sync(&ctx);
      bwd[(size_t)it * nl + i] = now_ms() - t0;
    }
    bwd_total += now_ms() - t_b;
    double t = now_ms() - t_iter;
    total += t;
    LOG_INFO("Iteration: %d forward-backward time: %g ms.", it + 1, t);
  }
  double replay_ms = 0;
  /* a trace shows whole iterations as the runtime runs them: on the CPU
   * they run after the per-layer passes, as on a GPU */
  if (rc == CT_EXIT_OK && (device != CT_DEVICE_CPU || ct_trace_enabled())) {
    replay_ms = time_iterations(net, iters);
    if (replay_ms < 0) rc = CT_EXIT_FAILURE;
  }
  if (rc == CT_EXIT_OK) {
    LOG_INFO("Average time per layer: ");
    for (int i = 0; i < net->nlayers; i++) {
      double f = 0, b = 0;
      for (int it = 0; it < iters; it++) {
        f += fwd[(size_t)it * nl + i];
        b += bwd[(size_t)it * nl + i];
      }
      LOG_INFO("%10s\tforward: %g ms.", net->layers[i]->name, f / iters);
      LOG_INFO("%10s\tbackward: %g ms.", net->layers[i]->name, b / iters);
    }
    LOG_INFO("Average Forward pass: %g ms.", fwd_total / iters);
    LOG_INFO("Average Backward pass: %g ms.", bwd_total / iters);
    if (device != CT_DEVICE_CPU) {
      LOG_INFO("Average Forward-Backward with a wait after each layer: %g ms.", total / iters);
      LOG_INFO("Average Forward-Backward: %g ms.", replay_ms);
      LOG_INFO("Total Time: %g ms.", replay_ms * iters);
      size_t held, peak, used, dev_total;
      ct_gpu_memory_stats(device, &held, &peak);
      ct_gpu_device_mem(&used, &dev_total);
      LOG_INFO("Peak GPU memory: %.1f MB (held by Cortado; %.1f MB in use on the device, "
               "CUDA's own context included)",
               peak / 1048576.0, used / 1048576.0);
    } else {
      LOG_INFO("Average Forward-Backward: %g ms.", total / iters);
      LOG_INFO("Total Time: %g ms.", total);
    }
    LOG_INFO("*** Benchmark ends ***");
    char where[32];
    if (device == CT_DEVICE_CPU) snprintf(where, sizeof where, "CPU");
    else snprintf(where, sizeof where, "GPU %d", device);
    const ct_time_report report = {.net = net, .device = where, .iters = iters, .fwd = fwd, .bwd = bwd};
    if (!ct_time_report_write(&report, ct_cli_string(args, "format"), stdout))
      rc = ct_cli_error(CT_EXIT_FAILURE, "writing the report to standard output failed");
  }
  free(fwd);
  free(bwd);
done:
  ct_net_free(net);
  ct_context_free(&ctx);
  return ct_cli_trace_finish(args, rc);
}

const ct_cli_command ct_cli_cmd_time = {
    .name = "time",
    .summary = "Time a network's forward and backward passes, layer by layer.",
    .usage = "cortado time --model=FILE [--iterations=N] [--gpu=ID] [--dummy_data] [flags]",
    .description = "Runs one warm-up pass, then --iterations forward and backward passes, "
                   "and logs the mean time of each layer and of the whole net.",
    .flags = time_flags,
    .n_flags = sizeof time_flags / sizeof time_flags[0],
    .min_args = 0,
    .max_args = 0,
    .host_threads = true,
    .run = time_run,
};
