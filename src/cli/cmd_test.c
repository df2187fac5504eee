/* cortado test: score trained weights on a network's TEST phase. */
#include "cli/cli.h"

static const ct_flag_spec test_flags[] = {
    CT_CLI_FLAG_MODEL,
    {"weights", CT_FLAG_STRING, NULL, "The trained .caffemodel to score (required).",
     .meta = "FILE"},
    {"gpu", CT_FLAG_GPU_LIST, NULL,
     "Device to run on: an id, or 'all' (only the first device is used). Left out: the CPU."},
    CT_CLI_FLAG_ITERATIONS,
    CT_CLI_FLAG_LEVEL,
    CT_CLI_FLAG_STAGE,
};

const ct_cli_command ct_cli_cmd_test = {
    .name = "test",
    .summary = "Score trained weights on a network's TEST phase.",
    .usage = "cortado test --model=FILE --weights=FILE [--iterations=N] [--gpu=ID] [flags]",
    .description = "Runs --iterations forward passes of the TEST phase net and logs each "
                   "output per batch and its mean over all batches.",
    .flags = test_flags,
    .n_flags = sizeof test_flags / sizeof test_flags[0],
    .min_args = 0,
    .max_args = 0,
    .run = ct_cli_not_implemented,
};
