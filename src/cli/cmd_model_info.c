/* cortado model_info FILE: summarize a model file. */
#include "cli/cli.h"
#include "cli/upgrade_text.h"
#include "proto/io.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"

static int run_model_info(const ct_cli_args *args) {
  ct_error err;
  if (ct_model_info_print(args->positional[0], stdout, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  return CT_EXIT_OK;
}

const ct_cli_command ct_cli_cmd_model_info = {
    .name = "model_info",
    .summary = "Summarize a .caffemodel: each layer's name, type and blob shapes.",
    .usage = "cortado model_info FILE",
    .description = "FILE is a binary .caffemodel (a NetParameter, current or V1).",
    .flags = NULL,
    .n_flags = 0,
    .min_args = 1,
    .max_args = 1,
    .run = run_model_info,
};
