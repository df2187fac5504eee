#include "cli/flags.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/settings.h"
#include "core/strutil.h"

const ct_flag_spec ct_flags_global[] = {
    {"log_level", CT_FLAG_INT, "0",
     "Lowest severity that is logged: 0=INFO, 1=WARNING, 2=ERROR, 3=FATAL. "
     "Overrides GLOG_minloglevel from the environment.",
     .min = 0, .max = 3},
    {"log_file", CT_FLAG_STRING, NULL, "Also append every log line to this file.",
     .meta = "FILE"},
    {"help", CT_FLAG_BOOL, "false", "Show this command's usage and flags, then exit."},
};
const size_t ct_flags_n_global = sizeof ct_flags_global / sizeof ct_flags_global[0];

const char *ct_flag_type_name(ct_flag_type type) {
  switch (type) {
    case CT_FLAG_STRING: return "string";
    case CT_FLAG_INT: return "int";
    case CT_FLAG_INT64: return "int64";
    case CT_FLAG_DOUBLE: return "double";
    case CT_FLAG_BOOL: return "bool";
    case CT_FLAG_GPU_LIST: return "gpu list";
  }
  return "?";
}

/* The placeholder shown after '=' in usage text and messages. */
static const char *type_meta(ct_flag_type type) {
  switch (type) {
    case CT_FLAG_STRING: return "STRING";
    case CT_FLAG_INT:
    case CT_FLAG_INT64: return "INT";
    case CT_FLAG_DOUBLE: return "NUMBER";
    case CT_FLAG_BOOL: return "true|false";
    case CT_FLAG_GPU_LIST: return "IDS|all";
  }
  return "VALUE";
}

static const char *spec_meta(const ct_flag_spec *s);

/* ---------------------------------------------------------------- values */

static ct_status bad_value(ct_error *err, const char *flag, const char *text, const char *why) {
  return ct_error_set(err, CT_ERR_INVALID, "invalid value '%s' for flag '--%s': %s", text, flag,
                      why);
}

static ct_status parse_integer(const ct_flag_spec *spec, const char *text, int64_t *out,
                               ct_error *err) {
  if (!*text || isspace((unsigned char)text[0]))
    return bad_value(err, spec->name, text, "expected an integer");
  errno = 0;
  char *end;
  long long v = strtoll(text, &end, 10);
  if (*end) return bad_value(err, spec->name, text, "expected an integer");
  bool narrow = spec->type == CT_FLAG_INT;
  if (errno == ERANGE || (narrow && (v < INT_MIN || v > INT_MAX))) {
    char why[64];
    snprintf(why, sizeof why, "out of range for %s", ct_flag_type_name(spec->type));
    return bad_value(err, spec->name, text, why);
  }
  if (spec->min != spec->max && (v < spec->min || v > spec->max)) {
    char why[96];
    snprintf(why, sizeof why, "must be between %lld and %lld", (long long)spec->min,
             (long long)spec->max);
    return bad_value(err, spec->name, text, why);
  }
  *out = v;
  return CT_OK;
}

static ct_status parse_double(const ct_flag_spec *spec, const char *text, double *out,
                              ct_error *err) {
  if (!*text || isspace((unsigned char)text[0]))
    return bad_value(err, spec->name, text, "expected a number");
  errno = 0;
  char *end;
  double v = strtod(text, &end);
  if (*end) return bad_value(err, spec->name, text, "expected a number");
  if (!isfinite(v) || (errno == ERANGE && fabs(v) > 1.0))
    return bad_value(err, spec->name, text, "expected a finite number");
  *out = v;
  return CT_OK;
}

/* gflags accepts these spellings, in any case. */
static ct_status parse_bool(const ct_flag_spec *spec, const char *text, bool *out,
                            ct_error *err) {
  static const char *const yes[] = {"true", "t", "yes", "y", "1"};
  static const char *const no[] = {"false", "f", "no", "n", "0"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (strcasecmp(text, yes[i]) == 0) return *out = true, CT_OK;
    if (strcasecmp(text, no[i]) == 0) return *out = false, CT_OK;
  }
  return bad_value(err, spec->name, text, "expected true or false");
}

/* Checks text against spec->choices ("a|b|c"). */
static ct_status check_choice(const ct_flag_spec *spec, const char *text, ct_error *err) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec->choices);
  const char *options[16];
  size_t n = 0;
  for (char *save = NULL, *tok = strtok_r(buf, "|", &save); tok && n < 16;
       tok = strtok_r(NULL, "|", &save)) {
    if (strcmp(tok, text) == 0) return CT_OK;
    options[n++] = tok;
  }
  char why[400];
  int len = snprintf(why, sizeof why, "expected one of");
  for (size_t i = 0; i < n; i++)
    len += snprintf(why + len, sizeof why - len, "%s %s", i ? "," : "", options[i]);
  const char *near = ct_suggest(text, options, n);
  if (near) snprintf(why + len, sizeof why - len, " (did you mean '%s'?)", near);
  return bad_value(err, spec->name, text, why);
}

ct_status ct_flags_parse_gpu_list(const char *flag, const char *text, ct_gpu_list *out,
                                  ct_error *err) {
  memset(out, 0, sizeof *out);
  if (!*text || strcmp(text, "none") == 0) return CT_OK;
  if (strcmp(text, "all") == 0) {
    out->all = true;
    return CT_OK;
  }
  const char *p = text;
  for (;;) {
    size_t len = strcspn(p, ",");
    char tok[32];
    if (len == 0 || len >= sizeof tok)
      return bad_value(err, flag, text, "expected device ids separated by ',' (e.g. 0,1), 'all' or 'none'");
    memcpy(tok, p, len);
    tok[len] = '\0';
    char *end;
    errno = 0;
    long id = strtol(tok, &end, 10);
    if (*end || isspace((unsigned char)tok[0]) || tok[0] == '+')
      return bad_value(err, flag, text, "expected device ids separated by ',' (e.g. 0,1), 'all' or 'none'");
    if (id < 0)
      return bad_value(err, flag, text,
                       "device ids are 0 or more ('none' runs on the CPU)");
    if (errno == ERANGE || id > INT_MAX) return bad_value(err, flag, text, "device id too large");
    for (int i = 0; i < out->n; i++) {
      if (out->ids[i] == id) {
        char why[64];
        snprintf(why, sizeof why, "device %ld is listed twice", id);
        return bad_value(err, flag, text, why);
      }
    }
    if (out->n == CT_GPU_LIST_MAX) {
      char why[64];
      snprintf(why, sizeof why, "more than %d devices", CT_GPU_LIST_MAX);
      return bad_value(err, flag, text, why);
    }
    out->ids[out->n++] = (int)id;
    if (!p[len]) break;
    p += len + 1;
  }
  return CT_OK;
}

/* Parses text as the value of spec into *val (everything but `set`). */
static ct_status parse_value(const ct_flag_spec *spec, const char *text, ct_flag_value *val,
                             ct_error *err) {
  memset(val, 0, sizeof *val);
  val->text = text;
  switch (spec->type) {
    case CT_FLAG_STRING:
      return spec->choices ? check_choice(spec, text, err) : CT_OK;
    case CT_FLAG_INT:
    case CT_FLAG_INT64: return parse_integer(spec, text, &val->i, err);
    case CT_FLAG_DOUBLE: return parse_double(spec, text, &val->d, err);
    case CT_FLAG_BOOL: return parse_bool(spec, text, &val->b, err);
    case CT_FLAG_GPU_LIST: return ct_flags_parse_gpu_list(spec->name, text, &val->gpus, err);
  }
  CT_ASSERTF(false, "flag --%s has an unknown type %d", spec->name, (int)spec->type);
}

static const char *default_text(const ct_flag_spec *spec) {
  const char *from_env = spec->setting ? ct_setting_raw(spec->setting) : NULL;
  if (from_env) return from_env;
  if (spec->def) return spec->def;
  switch (spec->type) {
    case CT_FLAG_STRING:
    case CT_FLAG_GPU_LIST: return "";
    case CT_FLAG_BOOL: return "false";
    default: return "0";
  }
}

/* ---------------------------------------------------------------- parsing */

static const ct_flag_spec *spec_at(const ct_cli_args *a, size_t k) {
  return k < a->n_command_specs ? &a->specs[k] : &ct_flags_global[k - a->n_command_specs];
}

static long find_spec(const ct_cli_args *a, const char *name, size_t name_len) {
  for (size_t k = 0; k < a->n_specs; k++) {
    const char *s = spec_at(a, k)->name;
    if (strlen(s) == name_len && strncmp(s, name, name_len) == 0) return (long)k;
  }
  return -1;
}

/* "-5", "-0.5", "-1e-3": numbers are never flags. */
static bool looks_like_number(const char *arg) {
  if (!isdigit((unsigned char)arg[1]) && arg[1] != '.') return false;
  char *end;
  strtod(arg, &end);
  return !*end;
}

static bool is_flag_word(const char *arg) {
  return arg[0] == '-' && arg[1] && !looks_like_number(arg);
}

static ct_status unknown_flag(const ct_cli_args *a, const char *name, size_t len, ct_error *err) {
  const char *names[128];
  size_t n = 0;
  for (size_t k = 0; k < a->n_specs && n < 128; k++) names[n++] = spec_at(a, k)->name;
  char word[128];
  snprintf(word, sizeof word, "%.*s", (int)len, name);
  const char *near = ct_suggest(word, names, n);
  char where[96];
  if (a->command)
    snprintf(where, sizeof where, "'cortado %s'", a->command);
  else
    snprintf(where, sizeof where, "'cortado'");
  if (near)
    return ct_error_set(err, CT_ERR_INVALID, "unknown flag '--%s' for %s (did you mean '--%s'?)",
                        word, where, near);
  return ct_error_set(err, CT_ERR_INVALID, "unknown flag '--%s' for %s (see 'cortado help%s%s')",
                      word, where, a->command ? " " : "", a->command ? a->command : "");
}

/* Handles the flag word argv[*i] (and its value, which may be argv[*i + 1]). */
static ct_status parse_flag(ct_cli_args *a, int argc, char **argv, int *i, ct_error *err) {
  const char *arg = argv[*i];
  const char *body = arg + (arg[1] == '-' ? 2 : 1);
  if (!*body || *body == '-' || *body == '=')
    return ct_error_set(err, CT_ERR_INVALID, "malformed flag '%s'", arg);
  const char *eq = strchr(body, '=');
  size_t name_len = eq ? (size_t)(eq - body) : strlen(body);
  const char *value = eq ? eq + 1 : NULL;

  bool negated = false;
  long k = find_spec(a, body, name_len);
  if (k < 0 && name_len > 2 && strncmp(body, "no", 2) == 0) {
    k = find_spec(a, body + 2, name_len - 2);
    if (k >= 0 && spec_at(a, k)->type != CT_FLAG_BOOL)
      return ct_error_set(err, CT_ERR_INVALID,
                          "flag '--%.*s': only bool flags take the 'no' prefix, and '--%s' is a %s",
                          (int)name_len, body, spec_at(a, k)->name,
                          ct_flag_type_name(spec_at(a, k)->type));
    negated = k >= 0;
  }
  if (k < 0) return unknown_flag(a, body, name_len, err);
  const ct_flag_spec *spec = spec_at(a, k);

  if (negated) {
    if (value)
      return ct_error_set(err, CT_ERR_INVALID, "flag '--no%s' takes no value (got '%s')",
                          spec->name, value);
    value = "false";
  } else if (!value && spec->type == CT_FLAG_BOOL) {
    value = "true";
  } else if (!value) {
    if (*i + 1 >= argc || is_flag_word(argv[*i + 1]))
      return ct_error_set(err, CT_ERR_INVALID, "missing value for flag '--%s' (expected --%s=%s)",
                          spec->name, spec->name, spec_meta(spec));
    value = argv[++*i];
  }
  ct_flag_value v;
  CT_TRY(parse_value(spec, value, &v, err));
  v.set = true;
  a->values[k] = v;
  return CT_OK;
}

ct_status ct_flags_parse(const char *command, const ct_flag_spec *specs, size_t n_specs,
                         int argc, char **argv, ct_cli_args *out, ct_error *err) {
  memset(out, 0, sizeof *out);
  ct_cli_args a = {.command = command,
                   .specs = specs,
                   .n_command_specs = n_specs,
                   .n_specs = n_specs + ct_flags_n_global};
  a.values = ct_xcalloc(a.n_specs, sizeof *a.values);
  a.positional = ct_xcalloc((size_t)argc + 1, sizeof *a.positional);
  for (size_t k = 0; k < a.n_specs; k++) {
    const ct_flag_spec *spec = spec_at(&a, k);
    ct_error derr;
    ct_status s = parse_value(spec, default_text(spec), &a.values[k], &derr);
    CT_ASSERTF(s == CT_OK, "bad default for --%s: %s", spec->name, derr.msg);
  }
  bool flags_done = false;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (!flags_done && strcmp(arg, "--") == 0) {
      flags_done = true;
    } else if (flags_done || !is_flag_word(arg)) {
      a.positional[a.n_positional++] = arg;
    } else {
      ct_status s = parse_flag(&a, argc, argv, &i, err);
      if (s != CT_OK) {
        ct_cli_args_free(&a);
        return s;
      }
    }
  }
  *out = a;
  return CT_OK;
}

void ct_cli_args_free(ct_cli_args *args) {
  free(args->values);
  free(args->positional);
  memset(args, 0, sizeof *args);
}

int ct_flags_find_command(int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) return i + 1 < argc ? i + 1 : -1;
    if (!is_flag_word(arg)) return i;
    const char *body = arg + (arg[1] == '-' ? 2 : 1);
    if (strchr(body, '=')) continue;
    for (size_t k = 0; k < ct_flags_n_global; k++) {
      if (strcmp(body, ct_flags_global[k].name) == 0 && ct_flags_global[k].type != CT_FLAG_BOOL) {
        i++; /* skip its value */
        break;
      }
    }
  }
  return -1;
}

/* ---------------------------------------------------------------- lookups */

static const ct_flag_value *lookup(const ct_cli_args *a, const char *name, int want_type) {
  long k = find_spec(a, name, strlen(name));
  CT_ASSERTF(k >= 0, "flag --%s is not declared for '%s'", name,
             a->command ? a->command : "cortado");
  const ct_flag_spec *spec = spec_at(a, k);
  CT_ASSERTF(want_type < 0 || spec->type == (ct_flag_type)want_type ||
                 (want_type == CT_FLAG_INT64 && spec->type == CT_FLAG_INT),
             "flag --%s is a %s, read as a %s", name, ct_flag_type_name(spec->type),
             ct_flag_type_name((ct_flag_type)want_type));
  return &a->values[k];
}

bool ct_cli_is_set(const ct_cli_args *a, const char *name) { return lookup(a, name, -1)->set; }
bool ct_cli_has_flag(const ct_cli_args *a, const char *name) {
  for (size_t i = 0; i < a->n_command_specs; i++)
    if (strcmp(a->specs[i].name, name) == 0) return true;
  return false;
}
const char *ct_cli_string(const ct_cli_args *a, const char *name) {
  return lookup(a, name, CT_FLAG_STRING)->text;
}
const char *ct_cli_text(const ct_cli_args *a, const char *name) {
  return lookup(a, name, -1)->text;
}
int ct_cli_int(const ct_cli_args *a, const char *name) {
  return (int)lookup(a, name, CT_FLAG_INT)->i;
}
int64_t ct_cli_int64(const ct_cli_args *a, const char *name) {
  return lookup(a, name, CT_FLAG_INT64)->i;
}
double ct_cli_double(const ct_cli_args *a, const char *name) {
  return lookup(a, name, CT_FLAG_DOUBLE)->d;
}
bool ct_cli_bool(const ct_cli_args *a, const char *name) {
  return lookup(a, name, CT_FLAG_BOOL)->b;
}
const ct_gpu_list *ct_cli_gpus(const ct_cli_args *a, const char *name) {
  return &lookup(a, name, CT_FLAG_GPU_LIST)->gpus;
}

/* ---------------------------------------------------------------- help */

void ct_cli_print_wrapped(FILE *out, int indent, const char *text) {
  const int width = 80;
  int col = 0;
  while (*text) {
    size_t word = strcspn(text, " ");
    if (col > indent && col + 1 + (int)word > width) {
      fputc('\n', out);
      col = 0;
    }
    if (col == 0) {
      col = fprintf(out, "%*s", indent, "");
    } else {
      fputc(' ', out);
      col++;
    }
    col += fprintf(out, "%.*s", (int)word, text);
    text += word;
    while (*text == ' ') text++;
  }
  fputc('\n', out);
}

static const char *spec_meta(const ct_flag_spec *s) {
  if (s->meta) return s->meta;
  if (s->choices) return s->choices;
  return type_meta(s->type);
}

void ct_flags_print_help(const ct_flag_spec *specs, size_t n_specs, FILE *out) {
  for (size_t k = 0; k < n_specs; k++) {
    const ct_flag_spec *s = &specs[k];
    char head[128];
    if (s->type == CT_FLAG_BOOL)
      snprintf(head, sizeof head, "--%s", s->name);
    else
      snprintf(head, sizeof head, "--%s=%s", s->name, spec_meta(s));
    const char *def = default_text(s);
    bool quoted = s->type == CT_FLAG_STRING || s->type == CT_FLAG_GPU_LIST;
    fprintf(out, "  %-24s (%s, default %s%s%s)\n", head, ct_flag_type_name(s->type),
            quoted ? "\"" : "", def, quoted ? "\"" : "");
    ct_cli_print_wrapped(out, 6, s->help);
    if (s->min != s->max)
      fprintf(out, "      Range: %lld to %lld.\n", (long long)s->min, (long long)s->max);
  }
}
