/* cortado train: train a network from a solver definition, or fine-tune or
 * resume one. */
#include "cli/cli.h"

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
    {"sigint_effect", CT_FLAG_STRING, "stop", "What SIGINT (Ctrl-C) does to the run.",
     .choices = "stop|snapshot|none"},
    {"sighup_effect", CT_FLAG_STRING, "snapshot", "What SIGHUP does to the run.",
     .choices = "stop|snapshot|none"},
};

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
    .run = ct_cli_not_implemented,
};
