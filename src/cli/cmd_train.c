/* cortado train: train a network from a solver definition, or fine-tune or
 * resume one. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/run_common.h"
#include "core/log.h"
#include "core/mem.h"
#include "net/net_load.h"
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
    {"gpu", CT_FLAG_GPU_LIST, NULL,
     "Devices to train on: ids separated by ',' or 'all'. With several, training is data "
     "parallel and the effective batch size grows with the device count. Left out, the "
     "solver's solver_mode and device_id decide."},
    CT_CLI_FLAG_LEVEL,
    CT_CLI_FLAG_STAGE,
    CT_CLI_FLAG_MATH,
    {"sigint_effect", CT_FLAG_STRING, "stop", "What SIGINT (Ctrl-C) does to the run.",
     .choices = "stop|snapshot|none"},
    {"sighup_effect", CT_FLAG_STRING, "snapshot", "What SIGHUP does to the run.",
     .choices = "stop|snapshot|none"},
};

/* The solver that SIGINT/SIGHUP act on, and what they ask of it. */
static ct_solver *volatile g_solver;
static int g_sigint_action, g_sighup_action;

static void on_signal(int sig) {
  ct_solver *s = g_solver;
  if (!s) return;
  ct_solver_request(s, sig == SIGINT ? g_sigint_action : g_sighup_action);
}

static int effect_action(const char *effect) {
  if (strcmp(effect, "stop") == 0) return CT_SOLVER_ACTION_STOP;
  if (strcmp(effect, "snapshot") == 0) return CT_SOLVER_ACTION_SNAPSHOT;
  return CT_SOLVER_ACTION_NONE;
}

static void install_signals(const ct_cli_args *args) {
  g_sigint_action = effect_action(ct_cli_string(args, "sigint_effect"));
  g_sighup_action = effect_action(ct_cli_string(args, "sighup_effect"));
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
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

/* The device: --gpu's first id, else the solver's solver_mode/device_id. */
static ct_status pick_train_device(const ct_cli_args *args, const Caffe__SolverParameter *sp, int *device,
                                   int *ngpus, ct_error *err) {
  *ngpus = 0;
  if (ct_cli_is_set(args, "gpu")) {
    ct_gpu_list gpus;
    CT_TRY(ct_cli_resolve_gpus(ct_cli_gpus(args, "gpu"), &gpus, err));
    *ngpus = gpus.n;
    *device = gpus.ids[0];
  } else if (sp->has_solver_mode && sp->solver_mode == CAFFE__SOLVER_PARAMETER__SOLVER_MODE__GPU) {
    ct_gpu_list gpus = {.n = 1, .ids = {sp->has_device_id ? sp->device_id : 0}};
    ct_gpu_list out;
    if (ct_cli_resolve_gpus(&gpus, &out, err) != CT_OK)
      return ct_error_prefix(err, "the solver says solver_mode: GPU (set solver_mode: CPU to train on the CPU)");
    *ngpus = 1;
    *device = gpus.ids[0];
  } else {
    *device = CT_DEVICE_CPU;
  }
  if (*device == CT_DEVICE_CPU) LOG_INFO("Use CPU.");
  else LOG_INFO("Use GPU with device ID %d", *device);
  return CT_OK;
}

static ct_status copy_weights(ct_solver *s, const char *list, ct_error *err) {
  char *copy = ct_xstrdup(list), *save = NULL;
  ct_status st = CT_OK;
  for (char *f = strtok_r(copy, ",", &save); f && st == CT_OK; f = strtok_r(NULL, ",", &save)) {
    LOG_INFO("Finetuning from %s", f);
    st = ct_net_copy_trained_file(s->net, f, err);
    for (int i = 0; i < s->ntest_nets && st == CT_OK; i++)
      st = ct_net_copy_trained_file(s->test_nets[i], f, err);
  }
  free(copy);
  return st;
}

static int train_run(const ct_cli_args *args) {
  ct_error err;
  const char *solver_file = ct_cli_is_set(args, "solver") ? ct_cli_string(args, "solver") : NULL;
  if (!solver_file || !*solver_file)
    return ct_cli_error(CT_EXIT_USAGE, "'cortado train' needs --solver=FILE");
  if (ct_cli_is_set(args, "snapshot") && ct_cli_is_set(args, "weights"))
    return ct_cli_error(CT_EXIT_USAGE,
                        "give --snapshot to resume training or --weights to fine-tune, not both");
  Caffe__SolverParameter *sp;
  if (ct_solver_param_read(solver_file, &sp, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  apply_state_flags(args, sp);
  int device = CT_DEVICE_CPU, ngpus = 0, rc = CT_EXIT_OK;
  if (pick_train_device(args, sp, &device, &ngpus, &err) != CT_OK) {
    protobuf_c_message_free_unpacked(&sp->base, NULL);
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  }
  if (ngpus > 1) {
    protobuf_c_message_free_unpacked(&sp->base, NULL);
    return ct_cli_error(CT_EXIT_FAILURE, "data-parallel training over %d GPUs is not available in this build yet",
                        ngpus);
  }
  ct_context ctx;
  uint64_t seed = sp->has_random_seed && sp->random_seed >= 0 ? (uint64_t)sp->random_seed : 0;
  if (ct_cli_context_init(args, &ctx, device, seed, &err) != CT_OK) {
    protobuf_c_message_free_unpacked(&sp->base, NULL);
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  }
  ct_solver *s = NULL;
  if (ct_solver_init(&s, sp, NULL, &ctx, &err) != CT_OK) {
    rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
    goto done;
  }
  if (ct_cli_is_set(args, "weights") && copy_weights(s, ct_cli_string(args, "weights"), &err) != CT_OK) {
    rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
    goto done;
  }
  g_solver = s;
  install_signals(args);
  LOG_INFO("Starting Optimization");
  const char *resume = ct_cli_is_set(args, "snapshot") ? ct_cli_string(args, "snapshot") : NULL;
  if (resume) LOG_INFO("Resuming from %s", resume);
  if (ct_solver_solve(s, resume, &err) != CT_OK) rc = ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  else LOG_INFO("Optimization Done.");
  g_solver = NULL;
done:
  ct_solver_free(s);
  ct_context_free(&ctx);
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
                   "an interrupted run.",
    .flags = train_flags,
    .n_flags = sizeof train_flags / sizeof train_flags[0],
    .min_args = 0,
    .max_args = 0,
    .run = train_run,
};
