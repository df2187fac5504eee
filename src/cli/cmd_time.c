/* cortado time: benchmark a network's forward and backward passes. */
#include "cli/cli.h"

static const ct_flag_spec time_flags[] = {
    CT_CLI_FLAG_MODEL,
    CT_CLI_FLAG_ITERATIONS,
    {"gpu", CT_FLAG_GPU_LIST, NULL,
     "Device to run on: an id, or 'all' (only the first device is used). Left out: the CPU."},
    {"phase", CT_FLAG_STRING, "TRAIN", "The phase of the net to build and time.",
     .choices = "TRAIN|TEST"},
    CT_CLI_FLAG_LEVEL,
    CT_CLI_FLAG_STAGE,
    {"dummy_data", CT_FLAG_BOOL, "false",
     "Feed random values in place of the net's data layers, so that no data set is needed."},
    {"dummy_shape", CT_FLAG_STRING, NULL,
     "Shape C,H,W of one dummy sample for --dummy_data; empty: the shape the data layer "
     "declares.",
     .meta = "C,H,W"},
};

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
    .run = ct_cli_not_implemented,
};
