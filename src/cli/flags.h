/* Command-line flags with gflags semantics, declared as a table per command.
 *
 * Every form Caffe users type is accepted:
 *
 *   --solver=FILE   --solver FILE   -solver FILE   -solver=FILE
 *   --debug   --debug=true   --debug=false   --nodebug        (bool flags)
 *
 * A bool flag written without `=` never takes the next argument.  Repeated
 * flags: the last one wins.  `--` ends the flags; everything after it is
 * positional.  Arguments that are not flags are collected in order, wherever
 * they appear.  The global flags (--log_level, --log_file, --help) are
 * accepted by every command in addition to its own table. */
#ifndef CT_CLI_FLAGS_H
#define CT_CLI_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

typedef enum ct_flag_type {
  CT_FLAG_STRING = 0,
  CT_FLAG_INT,     /* fits in int */
  CT_FLAG_INT64,
  CT_FLAG_DOUBLE,
  CT_FLAG_BOOL,
  CT_FLAG_GPU_LIST /* "0,1", "all", or "" / "none" (no GPU) */
} ct_flag_type;

/* One declared flag.  The default is written as a user would type the value
 * and goes through the same parser (a default that does not parse is a bug
 * and asserts).  NULL default: "" for strings and GPU lists, 0 / false
 * otherwise. */
typedef struct ct_flag_spec {
  const char *name;    /* without dashes: "solver" */
  ct_flag_type type;
  const char *def;     /* default value text, or NULL */
  const char *help;    /* one sentence */
  const char *choices; /* strings only: "stop|snapshot|none", or NULL for any */
  int64_t min, max;    /* int types only: inclusive range, unchecked when min == max */
  const char *meta;    /* placeholder in help ("FILE"), or NULL for the type's */
  const char *setting; /* a CORTADO_* setting (core/settings.h) that gives the default when it
                           is in the environment, or NULL */
  bool secret;         /* a password: its value is never written out (the CSV log's
                          Namespace line shows '***') */
} ct_flag_spec;

/* Most device ids one --gpu list may name. */
#define CT_GPU_LIST_MAX 64

/* A parsed --gpu value.  `all` stays symbolic: the caller resolves it to the
 * devices visible at run time.  all == false and n == 0 means the CPU. */
typedef struct ct_gpu_list {
  bool all;
  int n;
  int ids[CT_GPU_LIST_MAX]; /* distinct, each >= 0, in the order given */
} ct_gpu_list;

/* The value of one flag after parsing. */
typedef struct ct_flag_value {
  bool set;         /* given on the command line (false: the default) */
  const char *text; /* the value's text: points into argv, a literal or the spec */
  int64_t i;        /* CT_FLAG_INT, CT_FLAG_INT64 */
  double d;         /* CT_FLAG_DOUBLE */
  bool b;           /* CT_FLAG_BOOL */
  ct_gpu_list gpus; /* CT_FLAG_GPU_LIST */
} ct_flag_value;

/* The parsed command line of one command.  Owns `values` and `positional`
 * (release with ct_cli_args_free); the strings point into argv and the specs. */
typedef struct ct_cli_args {
  const char *command;        /* "train" */
  const ct_flag_spec *specs;  /* the command's table, then the global flags */
  size_t n_command_specs;     /* how many of specs belong to the command */
  size_t n_specs;             /* n_command_specs + the global flags */
  ct_flag_value *values;      /* one per spec */
  const char **positional;    /* non-flag arguments, in order */
  size_t n_positional;
} ct_cli_args;

/* The flags every command accepts: log_level, log_file, help. */
extern const ct_flag_spec ct_flags_global[];
extern const size_t ct_flags_n_global;

/* Parses argv[0..argc) (the words after the command name) against `specs`
 * plus the global flags.  `command` is the command's name, used in messages
 * ("unknown flag '--solvr' for 'cortado train' (did you mean '--solver'?)");
 * NULL means flags given before any command ("for 'cortado'").
 * On success fills *out (free with ct_cli_args_free).  On a usage error
 * (unknown flag, missing or malformed value) returns CT_ERR_INVALID with the
 * message in err and leaves *out empty.  argv and specs must outlive *out. */
ct_status ct_flags_parse(const char *command, const ct_flag_spec *specs, size_t n_specs,
                         int argc, char **argv, ct_cli_args *out, ct_error *err);
void ct_cli_args_free(ct_cli_args *args);

/* Parses a --gpu value: "" or "none" (the CPU), "all", or distinct ids >= 0
 * separated by ','.  `flag` names the flag in messages.  CT_ERR_INVALID on bad input. */
ct_status ct_flags_parse_gpu_list(const char *flag, const char *text, ct_gpu_list *out,
                                  ct_error *err);

/* Index in argv[0..argc) of the command word: the first argument that is
 * not a flag, skipping the values of global flags given before it
 * (`cortado --log_file x.log train`).  -1 when there is none. */
int ct_flags_find_command(int argc, char **argv);

/* Typed lookups by flag name (command or global).  Asking for a name that is
 * not declared, or with the wrong type, is a bug and asserts. */
bool ct_cli_is_set(const ct_cli_args *a, const char *name);
/* Whether the command has a flag of that name at all. */
bool ct_cli_has_flag(const ct_cli_args *a, const char *name);
const char *ct_cli_string(const ct_cli_args *a, const char *name);
/* The value as typed (or the default's text), whatever the flag's type. */
const char *ct_cli_text(const ct_cli_args *a, const char *name);
int ct_cli_int(const ct_cli_args *a, const char *name);
int64_t ct_cli_int64(const ct_cli_args *a, const char *name);
double ct_cli_double(const ct_cli_args *a, const char *name);
bool ct_cli_bool(const ct_cli_args *a, const char *name);
const ct_gpu_list *ct_cli_gpus(const ct_cli_args *a, const char *name);

/* "string", "int", "int64", "double", "bool", "gpu list". */
const char *ct_flag_type_name(ct_flag_type type);

/* Writes one help entry per spec to out:
 *   --iterations=INT         (int, default 50)
 *       How many iterations (batches) to run.
 *       Range: 1 to 2147483647. */
void ct_flags_print_help(const ct_flag_spec *specs, size_t n_specs, FILE *out);

/* Writes text to out word-wrapped at 80 columns, every line indented by
 * `indent` spaces, ending with a newline. */
void ct_cli_print_wrapped(FILE *out, int indent, const char *text);

#endif
