/* cortado <command> [flags] [args]: finds the command in the table, parses
 * its flags, applies the global ones and runs its handler. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/run_common.h"
#include "cli/train.h"
#include "parallel/launch.h"
#include "core/log.h"
#include "core/settings.h"
#include "core/strutil.h"

static const ct_cli_command *const g_commands[] = {
    &ct_cli_cmd_train,
    &ct_cli_cmd_test,
    &ct_cli_cmd_time,
    &ct_cli_cmd_resnet50_trainer,
    &ct_cli_cmd_device_query,
    &ct_cli_cmd_model_info,
    &ct_cli_cmd_upgrade_net_proto_text,
    &ct_cli_cmd_upgrade_solver_proto_text,
    &ct_cli_cmd_convert_mnist_data,
    &ct_cli_cmd_convert_cifar_data,
    &ct_cli_cmd_convert_imageset,
    &ct_cli_cmd_compute_image_mean,
    &ct_cli_cmd_db_info,
    &ct_cli_cmd_make_synthetic_db,
    &ct_cli_cmd_plot,
    &ct_cli_cmd_help,
};
#define N_COMMANDS (sizeof g_commands / sizeof g_commands[0])

const ct_cli_command *const *ct_cli_commands(size_t *n) {
  *n = N_COMMANDS;
  return g_commands;
}

const ct_cli_command *ct_cli_find_command(const char *name) {
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(g_commands[i]->name, name) == 0) return g_commands[i];
  return NULL;
}

int ct_cli_error(int exit_code, const char *fmt, ...) {
  /* one write for the whole line, so that the lines of several processes
   * sharing stderr (MPI ranks, shards, workers) do not interleave */
  char line[2 * CT_ERROR_MSG_MAX + 64];
  int n = snprintf(line, sizeof line, "cortado: error: ");
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  fflush(stderr);
  fwrite(line, 1, (size_t)n, stderr);
  fflush(stderr);
  return exit_code;
}

int ct_cli_not_implemented(const ct_cli_args *args) {
  return ct_cli_error(CT_EXIT_FAILURE, "'%s' is not implemented yet", args->command);
}

void ct_cli_print_overview(FILE *out) {
  fprintf(out,
          "Cortado: train, test and time Caffe networks.\n\n"
          "usage: cortado <command> [flags] [args]\n\n"
          "commands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++)
    fprintf(out, "  %-27s %s\n", g_commands[i]->name, g_commands[i]->summary);
  fprintf(out, "\nRun 'cortado help <command>' for a command's flags.\n");
}

void ct_cli_print_command_help(const ct_cli_command *cmd, FILE *out) {
  fprintf(out, "usage: %s\n\n%s\n", cmd->usage, cmd->summary);
  if (cmd->description) {
    fputc('\n', out);
    ct_cli_print_wrapped(out, 0, cmd->description);
  }
  if (cmd->n_flags) {
    fprintf(out, "\nflags:\n");
    ct_flags_print_help(cmd->flags, cmd->n_flags, out);
  }
  fprintf(out, "\nglobal flags:\n");
  ct_flags_print_help(ct_flags_global, ct_flags_n_global, out);
}

int ct_cli_unknown_command(const char *name) {
  const char *names[N_COMMANDS];
  for (size_t i = 0; i < N_COMMANDS; i++) names[i] = g_commands[i]->name;
  const char *near = ct_suggest(name, names, N_COMMANDS);
  if (near)
    return ct_cli_error(CT_EXIT_USAGE, "unknown command '%s' (did you mean '%s'?)", name, near);
  return ct_cli_error(CT_EXIT_USAGE, "unknown command '%s' (run 'cortado --help' for the list)",
                      name);
}

/* Applies --log_level and --log_file; the flag wins over GLOG_minloglevel. */
static int apply_global_flags(const ct_cli_args *args) {
  if (ct_cli_is_set(args, "log_level")) ct_log_set_level((ct_log_level)ct_cli_int(args, "log_level"));
  const char *log_file = ct_cli_string(args, "log_file");
  if (*log_file) {
    ct_error err;
    if (ct_log_set_file(log_file, &err) != CT_OK) return ct_cli_error(CT_EXIT_FAILURE, "%s", err.msg);
  }
  return CT_EXIT_OK;
}

static int check_arg_count(const ct_cli_command *cmd, const ct_cli_args *args) {
  if ((int)args->n_positional < cmd->min_args)
    return ct_cli_error(CT_EXIT_USAGE, "missing argument for 'cortado %s' (usage: %s)", cmd->name,
                        cmd->usage);
  if ((int)args->n_positional > cmd->max_args)
    return ct_cli_error(CT_EXIT_USAGE, "unexpected argument '%s' for 'cortado %s' (usage: %s)",
                        args->positional[cmd->max_args], cmd->name, cmd->usage);
  return CT_EXIT_OK;
}

/* Only flags, no command: `cortado --help`, or a mistake. */
static int run_without_command(int argc, char **argv) {
  ct_cli_args args;
  ct_error err;
  if (ct_flags_parse(NULL, NULL, 0, argc, argv, &args, &err) != CT_OK)
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  bool help = ct_cli_bool(&args, "help");
  ct_cli_args_free(&args);
  if (help) {
    ct_cli_print_overview(stdout);
    return CT_EXIT_OK;
  }
  ct_cli_print_overview(stderr);
  return ct_cli_error(CT_EXIT_USAGE, "no command given");
}

#ifdef CORTADO_HAVE_PYTHON
void ct_cli_python_setup(void); /* python/src/embed.c: the "Python" layer type */
#endif

int main(int argc, char **argv) {
  ct_cli_install_fast_failure_exit();
  ct_log_init_from_env();
  ct_cli_set_argv(argv);
#ifdef CORTADO_HAVE_PYTHON
  ct_cli_python_setup();
#endif
  /* a data-parallel worker process: its launcher logged the same start;
   * rank 0 speaks again once training begins (cmd_train.c) */
  if (ct_setting_text(CT_LAUNCH_WORKER_ENV)) ct_log_set_quiet(true);
  else ct_settings_check_environment();
  int words = argc - 1;
  char **word = argv + 1;
  int at = ct_flags_find_command(words, word);
  if (at < 0) return run_without_command(words, word);
  const ct_cli_command *cmd = ct_cli_find_command(word[at]);
  if (!cmd) return ct_cli_unknown_command(word[at]);

  /* Flags given before the command count as if given after it (first). */
  char **rest = ct_xcalloc((size_t)words, sizeof *rest);
  int n_rest = 0;
  for (int i = 0; i < words; i++)
    if (i != at) rest[n_rest++] = word[i];
  ct_cli_args args;
  ct_error err;
  int rc;
  if (ct_flags_parse(cmd->name, cmd->flags, cmd->n_flags, n_rest, rest, &args, &err) != CT_OK) {
    free(rest);
    return ct_cli_error(CT_EXIT_USAGE, "%s", err.msg);
  }
  if (ct_cli_bool(&args, "help")) {
    ct_cli_print_command_help(cmd, stdout);
    rc = CT_EXIT_OK;
  } else {
    rc = check_arg_count(cmd, &args);
    if (rc == CT_EXIT_OK && cmd->host_threads) ct_cli_setup_threads(argv);
    if (rc == CT_EXIT_OK) rc = apply_global_flags(&args);
    if (rc == CT_EXIT_OK) rc = cmd->run(&args);
    ct_log_set_file(NULL, NULL);
  }
  ct_cli_args_free(&args);
  free(rest);
  /* A failed command leaves without exit()'s library destructors: after a
   * failed allocation or thread start they can hang (OpenBLAS joining
   * threads that never started). */
  if (rc != CT_EXIT_OK) ct_exit_now(rc);
  return rc;
}
