/* cortado help [COMMAND | environment]: the command list, one command's
 * flags, or the CORTADO_* environment variables (core/settings.h). */
#include <string.h>

#include "cli/cli.h"
#include "core/settings.h"

static void print_environment(FILE *out) {
  static const struct {
    ct_setting_scope scope;
    const char *title;
  } parts[] = {
      {CT_SETTING_USER, "Environment variables read at run time:"},
      {CT_SETTING_INTERNAL, "Set by Cortado for the worker processes it starts:"},
      {CT_SETTING_HARNESS, "Read by the tests and the benchmark scripts:"},
  };
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    fprintf(out, "%s%s\n\n| variable | effect |\n| --- | --- |\n", i ? "\n" : "", parts[i].title);
    ct_settings_print_markdown(out, parts[i].scope);
  }
}

static int run_help(const ct_cli_args *args) {
  if (args->n_positional == 0) {
    ct_cli_print_overview(stdout);
    return CT_EXIT_OK;
  }
  const char *name = args->positional[0];
  if (strcmp(name, "environment") == 0) {
    print_environment(stdout);
    return CT_EXIT_OK;
  }
  const ct_cli_command *cmd = ct_cli_find_command(name);
  if (!cmd) return ct_cli_unknown_command(name);
  ct_cli_print_command_help(cmd, stdout);
  return CT_EXIT_OK;
}

const ct_cli_command ct_cli_cmd_help = {
    .name = "help",
    .summary = "List the commands, show one command's usage and flags, or the environment variables.",
    .usage = "cortado help [COMMAND | environment]",
    .description = NULL,
    .flags = NULL,
    .n_flags = 0,
    .min_args = 0,
    .max_args = 1,
    .run = run_help,
};
