/* cortado model_info FILE: summarize a model file. */
#include "cli/cli.h"
#include "cli/pending.h"

static int run_model_info(const ct_cli_args *args) {
#if CT_CLI_HAVE_PROTO_TOOLS
  ct_error err;
  if (ct_model_info_print(args->positional[0], stdout, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  return CT_EXIT_OK;
#else
  return ct_cli_not_implemented(args);
#endif
}

const ct_cli_command ct_cli_cmd_model_info = {
    .name = "model_info",
    .summary = "Summarize a .caffemodel or net prototxt: layers, blobs and parameter shapes.",
    .usage = "cortado model_info FILE",
    .description = "FILE is a binary .caffemodel or a NetParameter prototxt.",
    .flags = NULL,
    .n_flags = 0,
    .min_args = 1,
    .max_args = 1,
    .run = run_model_info,
};
