/* Settings from the environment: every CORTADO_* variable that Cortado, its
 * launcher or its test harness reads is declared once, in the table of
 * settings.c, with its type, default and meaning; code reads them through
 * the getters below, by name (a name missing from the table is a bug and
 * asserts).  `cortado help environment` prints the table, the README's is
 * checked against it by a test, and an unknown CORTADO_* name in the
 * environment gets a warning with a suggestion (ct_settings_check_environment).
 *
 * The environment is read at every call (tests set variables between runs);
 * a value that does not parse is warned about once and the default is used.
 * A setting that repeats a command-line option (its table entry names the
 * option) is only the option's default: the option, when given, wins. */
#ifndef CT_CORE_SETTINGS_H
#define CT_CORE_SETTINGS_H

#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_setting_type {
  CT_SETTING_BOOL = 0, /* 0/1 (also false/true, no/yes, off/on) */
  CT_SETTING_INT,      /* a whole number in [min, max] */
  CT_SETTING_NUMBER,   /* a real number in [min, max] */
  CT_SETTING_CHOICE,   /* one of `choices` ("a|b|c") */
  CT_SETTING_TEXT      /* any text (a path, an id) */
} ct_setting_type;

/* Who the variable is for: users (the README's table), Cortado's own
 * processes talking to each other, or the test and benchmark scripts. */
typedef enum ct_setting_scope {
  CT_SETTING_USER = 0,
  CT_SETTING_INTERNAL,
  CT_SETTING_HARNESS
} ct_setting_scope;

typedef struct ct_setting_info {
  const char *name;      /* "CORTADO_FUSE" */
  ct_setting_type type;
  ct_setting_scope scope;
  const char *def;       /* the default as written in the environment; NULL: chosen at run
                            time (the meaning says how) or none */
  const char *choices;   /* CHOICE: "1|0|force" */
  double min, max;       /* INT, NUMBER: the accepted range */
  const char *option;    /* the command-line option this is the default of ("--comm_timeout"),
                            or NULL */
  const char *meaning;   /* one paragraph, as the README's table shows it */
} ct_setting_info;

/* The table, in the README's order, and its size. */
const ct_setting_info *ct_settings_table(int *count);
/* The entry of `name`, or NULL when it is not a setting. */
const ct_setting_info *ct_setting_find(const char *name);

/* BOOL settings: the environment's value, else the default. */
bool ct_setting_bool(const char *name);
/* NUMBER settings with a numeric default: the environment's value, else
 * the default. */
double ct_setting_number(const char *name);
/* INT and NUMBER settings whose default is chosen at run time: true and *out
 * set when the environment gives a valid value; false otherwise (the caller
 * chooses). */
bool ct_setting_given_int(const char *name, long *out);
/* CHOICE and TEXT settings: the environment's value (when valid), else the
 * default (NULL when none).  The string belongs to the environment. */
const char *ct_setting_text(const char *name);

/* The setting's text as the environment gives it when it is valid for the
 * setting's type, else the default (NULL when none): for a command-line
 * option whose default the setting is, parsed as the option's value. */
const char *ct_setting_raw(const char *name);

/* Warns (once per name and process) about each CORTADO_* variable of the
 * environment that is not in the table, suggesting the nearest name:
 *   "unknown environment variable CORTADO_FUZE=0 ignored (did you mean CORTADO_FUSE?)"
 * Returns how many it found. */
int ct_settings_check_environment(void);

/* Writes the table as Markdown rows `| NAME | meaning (default ...) |` for
 * the given scope, as the README holds them. */
void ct_settings_print_markdown(FILE *f, ct_setting_scope scope);

#ifdef __cplusplus
}
#endif

#endif
