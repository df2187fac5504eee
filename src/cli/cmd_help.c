/* cortado help [COMMAND]: the command list, or one command's flags. */
#include "cli/cli.h"

static int run_help(const ct_cli_args *args) {
  if (args->n_positional == 0) {
    ct_cli_print_overview(stdout);
    return CT_EXIT_OK;
  }
  const char *name = args->positional[0];
  const ct_cli_command *cmd = ct_cli_find_command(name);
  if (!cmd) return ct_cli_unknown_command(name);
  ct_cli_print_command_help(cmd, stdout);
  return CT_EXIT_OK;
}

const ct_cli_command ct_cli_cmd_help = {
    .name = "help",
    .summary = "List the commands, or show one command's usage and flags.",
    .usage = "cortado help [COMMAND]",
    .description = NULL,
    .flags = NULL,
    .n_flags = 0,
    .min_args = 0,
    .max_args = 1,
    .run = run_help,
};
