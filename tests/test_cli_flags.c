/* The command-line flag parser (src/cli/flags.c, compiled into this test
 * because src/cli/ is the executable, not the library). */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/flags.c"

static const ct_flag_spec specs[] = {
    {"solver", CT_FLAG_STRING, NULL, "solver file", .meta = "FILE"},
    {"iterations", CT_FLAG_INT, "50", "iterations", .min = 1, .max = 1000000},
    {"level", CT_FLAG_INT, "0", "level"},
    {"max_bytes", CT_FLAG_INT64, "0", "bytes"},
    {"lr", CT_FLAG_DOUBLE, "0.01", "rate"},
    {"dummy_data", CT_FLAG_BOOL, "false", "dummy"},
    {"verbose", CT_FLAG_BOOL, "true", "chatty"},
    {"gpu", CT_FLAG_GPU_LIST, NULL, "devices"},
    {"sigint_effect", CT_FLAG_STRING, "stop", "on SIGINT", .choices = "stop|snapshot|none"},
};
#define N_SPECS (sizeof specs / sizeof specs[0])

/* Parses a NULL-terminated word list; asserts success. */
static ct_cli_args parse_ok(const char **words) {
  int argc = 0;
  while (words[argc]) argc++;
  ct_cli_args a;
  ct_error err;
  ct_error_clear(&err);
  ct_status s = ct_flags_parse("train", specs, N_SPECS, argc, (char **)words, &a, &err);
  if (s != CT_OK) fail_msg("unexpected parse error: %s", err.msg);
  return a;
}

/* Parses and expects a usage error with exactly `msg`. */
static void parse_fails(const char **words, const char *msg) {
  int argc = 0;
  while (words[argc]) argc++;
  ct_cli_args a;
  ct_error err;
  ct_error_clear(&err);
  ct_status s = ct_flags_parse("train", specs, N_SPECS, argc, (char **)words, &a, &err);
  assert_int_equal(s, CT_ERR_INVALID);
  assert_string_equal(err.msg, msg);
  assert_null(a.values);
}

static void test_four_syntaxes(void **state) {
  const char *forms[][3] = {{"--solver=s.prototxt", NULL, NULL},
                            {"--solver", "s.prototxt", NULL},
                            {"-solver", "s.prototxt", NULL},
                            {"-solver=s.prototxt", NULL, NULL}};
  for (size_t i = 0; i < 4; i++) {
    ct_cli_args a = parse_ok(forms[i]);
    assert_string_equal(ct_cli_string(&a, "solver"), "s.prototxt");
    assert_true(ct_cli_is_set(&a, "solver"));
    assert_int_equal(a.n_positional, 0);
    ct_cli_args_free(&a);
  }
  /* Same for an int, and an '=' inside the value is kept. */
  ct_cli_args a = parse_ok((const char *[]){"-iterations", "7", "--solver=a=b", NULL});
  assert_int_equal(ct_cli_int(&a, "iterations"), 7);
  assert_string_equal(ct_cli_string(&a, "solver"), "a=b");
  ct_cli_args_free(&a);
}

static void test_defaults(void **state) {
  ct_cli_args a = parse_ok((const char *[]){NULL});
  assert_false(ct_cli_is_set(&a, "iterations"));
  assert_int_equal(ct_cli_int(&a, "iterations"), 50);
  assert_string_equal(ct_cli_string(&a, "solver"), "");
  assert_true(ct_cli_bool(&a, "verbose"));
  assert_false(ct_cli_bool(&a, "dummy_data"));
  assert_float_equal(ct_cli_double(&a, "lr"), 0.01, 1e-15);
  assert_string_equal(ct_cli_string(&a, "sigint_effect"), "stop");
  const ct_gpu_list *g = ct_cli_gpus(&a, "gpu");
  assert_false(g->all);
  assert_int_equal(g->n, 0);
  /* The global flags are there for every command. */
  assert_int_equal(ct_cli_int(&a, "log_level"), 0);
  assert_string_equal(ct_cli_string(&a, "log_file"), "");
  assert_false(ct_cli_bool(&a, "help"));
  ct_cli_args_free(&a);
}

static void test_bools(void **state) {
  ct_cli_args a = parse_ok((const char *[]){"--dummy_data", "--noverbose", NULL});
  assert_true(ct_cli_bool(&a, "dummy_data"));
  assert_false(ct_cli_bool(&a, "verbose"));
  assert_true(ct_cli_is_set(&a, "verbose"));
  ct_cli_args_free(&a);

  a = parse_ok((const char *[]){"--dummy_data=true", "-verbose=false", NULL});
  assert_true(ct_cli_bool(&a, "dummy_data"));
  assert_false(ct_cli_bool(&a, "verbose"));
  ct_cli_args_free(&a);

  a = parse_ok((const char *[]){"--dummy_data=0", "--verbose=YES", NULL});
  assert_false(ct_cli_bool(&a, "dummy_data"));
  assert_true(ct_cli_bool(&a, "verbose"));
  ct_cli_args_free(&a);

  /* A bool without '=' does not take the next word: it is positional. */
  a = parse_ok((const char *[]){"--dummy_data", "false", NULL});
  assert_true(ct_cli_bool(&a, "dummy_data"));
  assert_int_equal(a.n_positional, 1);
  assert_string_equal(a.positional[0], "false");
  ct_cli_args_free(&a);

  parse_fails((const char *[]){"--dummy_data=maybe", NULL},
              "invalid value 'maybe' for flag '--dummy_data': expected true or false");
  parse_fails((const char *[]){"--nodummy_data=true", NULL},
              "flag '--nodummy_data' takes no value (got 'true')");
  parse_fails((const char *[]){"--nosolver", NULL},
              "flag '--nosolver': only bool flags take the 'no' prefix, and '--solver' is a string");
}

static void test_numbers(void **state) {
  ct_cli_args a = parse_ok((const char *[]){"--max_bytes=1099511627776", "--lr", "1e-3",
                                            "--level", "-2", NULL});
  assert_int_equal(ct_cli_int64(&a, "max_bytes"), 1099511627776LL);
  assert_float_equal(ct_cli_double(&a, "lr"), 1e-3, 1e-18);
  assert_int_equal(ct_cli_int(&a, "level"), -2);
  ct_cli_args_free(&a);

  parse_fails((const char *[]){"--iterations=abc", NULL},
              "invalid value 'abc' for flag '--iterations': expected an integer");
  parse_fails((const char *[]){"--iterations=12x", NULL},
              "invalid value '12x' for flag '--iterations': expected an integer");
  parse_fails((const char *[]){"--iterations=", NULL},
              "invalid value '' for flag '--iterations': expected an integer");
  parse_fails((const char *[]){"--iterations=0", NULL},
              "invalid value '0' for flag '--iterations': must be between 1 and 1000000");
  parse_fails((const char *[]){"--level=3000000000", NULL},
              "invalid value '3000000000' for flag '--level': out of range for int");
  parse_fails((const char *[]){"--max_bytes=99999999999999999999", NULL},
              "invalid value '99999999999999999999' for flag '--max_bytes': out of range for int64");
  parse_fails((const char *[]){"--lr=fast", NULL},
              "invalid value 'fast' for flag '--lr': expected a number");
  parse_fails((const char *[]){"--lr=nan", NULL},
              "invalid value 'nan' for flag '--lr': expected a finite number");
}

static void test_gpu_lists(void **state) {
  ct_cli_args a = parse_ok((const char *[]){"--gpu=0,1", NULL});
  const ct_gpu_list *g = ct_cli_gpus(&a, "gpu");
  assert_false(g->all);
  assert_int_equal(g->n, 2);
  assert_int_equal(g->ids[0], 0);
  assert_int_equal(g->ids[1], 1);
  ct_cli_args_free(&a);

  a = parse_ok((const char *[]){"-gpu", "all", NULL});
  g = ct_cli_gpus(&a, "gpu");
  assert_true(g->all);
  assert_int_equal(g->n, 0);
  assert_string_equal(ct_cli_text(&a, "gpu"), "all");
  ct_cli_args_free(&a);

  a = parse_ok((const char *[]){"--gpu", "3", NULL});
  g = ct_cli_gpus(&a, "gpu");
  assert_int_equal(g->n, 1);
  assert_int_equal(g->ids[0], 3);
  ct_cli_args_free(&a);

  a = parse_ok((const char *[]){"--gpu", "none", NULL});
  g = ct_cli_gpus(&a, "gpu");
  assert_true(ct_cli_is_set(&a, "gpu"));
  assert_false(g->all);
  assert_int_equal(g->n, 0);
  ct_cli_args_free(&a);

  parse_fails((const char *[]){"--gpu=-1", NULL},
              "invalid value '-1' for flag '--gpu': device ids are 0 or more "
              "('none' runs on the CPU)");
  parse_fails((const char *[]){"--gpu", "-1", NULL},
              "invalid value '-1' for flag '--gpu': device ids are 0 or more "
              "('none' runs on the CPU)");
  parse_fails((const char *[]){"--gpu=0,0", NULL},
              "invalid value '0,0' for flag '--gpu': device 0 is listed twice");
  parse_fails((const char *[]){"--gpu=0,", NULL},
              "invalid value '0,' for flag '--gpu': expected device ids separated by ',' "
              "(e.g. 0,1), 'all' or 'none'");
  parse_fails((const char *[]){"--gpu=one", NULL},
              "invalid value 'one' for flag '--gpu': expected device ids separated by ',' "
              "(e.g. 0,1), 'all' or 'none'");
}

static void test_repeated_last_wins(void **state) {
  ct_cli_args a = parse_ok((const char *[]){"--iterations=5", "-iterations", "9", "--gpu=0",
                                            "--gpu=all", "--dummy_data", "--nodummy_data", NULL});
  assert_int_equal(ct_cli_int(&a, "iterations"), 9);
  assert_true(ct_cli_gpus(&a, "gpu")->all);
  assert_false(ct_cli_bool(&a, "dummy_data"));
  ct_cli_args_free(&a);
}

static void test_positional(void **state) {
  ct_cli_args a = parse_ok(
      (const char *[]){"in.prototxt", "--level=1", "out.prototxt", "-", "-5", NULL});
  assert_int_equal(a.n_positional, 4);
  assert_string_equal(a.positional[0], "in.prototxt");
  assert_string_equal(a.positional[1], "out.prototxt");
  assert_string_equal(a.positional[2], "-");
  assert_string_equal(a.positional[3], "-5");
  assert_int_equal(ct_cli_int(&a, "level"), 1);
  ct_cli_args_free(&a);

  /* "--" ends the flags. */
  a = parse_ok((const char *[]){"--level=2", "--", "--level=3", "x", NULL});
  assert_int_equal(ct_cli_int(&a, "level"), 2);
  assert_int_equal(a.n_positional, 2);
  assert_string_equal(a.positional[0], "--level=3");
  ct_cli_args_free(&a);
}

static void test_errors(void **state) {
  parse_fails((const char *[]){"--solvr=x", NULL},
              "unknown flag '--solvr' for 'cortado train' (did you mean '--solver'?)");
  parse_fails((const char *[]){"-solvr", "x", NULL},
              "unknown flag '--solvr' for 'cortado train' (did you mean '--solver'?)");
  parse_fails((const char *[]){"--log_levl=1", NULL},
              "unknown flag '--log_levl' for 'cortado train' (did you mean '--log_level'?)");
  parse_fails((const char *[]){"--zzzzzz", NULL},
              "unknown flag '--zzzzzz' for 'cortado train' (see 'cortado help train')");
  parse_fails((const char *[]){"-nan", NULL},
              "unknown flag '--nan' for 'cortado train' (see 'cortado help train')");
  parse_fails((const char *[]){"--solver", NULL},
              "missing value for flag '--solver' (expected --solver=FILE)");
  parse_fails((const char *[]){"--solver", "--gpu=0", NULL},
              "missing value for flag '--solver' (expected --solver=FILE)");
  parse_fails((const char *[]){"--iterations", NULL},
              "missing value for flag '--iterations' (expected --iterations=INT)");
  parse_fails((const char *[]){"---solver=x", NULL}, "malformed flag '---solver=x'");
  parse_fails((const char *[]){"--=x", NULL}, "malformed flag '--=x'");
  parse_fails((const char *[]){"--sigint_effect=stp", NULL},
              "invalid value 'stp' for flag '--sigint_effect': expected one of stop, snapshot, "
              "none (did you mean 'stop'?)");
  parse_fails((const char *[]){"--log_level=4", NULL},
              "invalid value '4' for flag '--log_level': must be between 0 and 3");

  /* Flags before any command. */
  ct_cli_args a;
  ct_error err;
  char *words[] = {"--solver=x"};
  assert_int_equal(ct_flags_parse(NULL, NULL, 0, 1, words, &a, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "unknown flag '--solver' for 'cortado' (see 'cortado help')");
}

static void test_find_command(void **state) {
  char *a[] = {"train", "--solver=x"};
  assert_int_equal(ct_flags_find_command(2, a), 0);
  char *b[] = {"--log_file", "x.log", "train"};
  assert_int_equal(ct_flags_find_command(3, b), 2);
  char *c[] = {"--log_level=1", "--help", "test"};
  assert_int_equal(ct_flags_find_command(3, c), 2);
  char *d[] = {"--help"};
  assert_int_equal(ct_flags_find_command(1, d), -1);
  assert_int_equal(ct_flags_find_command(0, d), -1);
}

static void test_help_text(void **state) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ct_flags_print_help(specs, 3, f);
  fclose(f);
  const char *want =
      "  --solver=FILE            (string, default \"\")\n"
      "      solver file\n"
      "  --iterations=INT         (int, default 50)\n"
      "      iterations\n"
      "      Range: 1 to 1000000.\n"
      "  --level=INT              (int, default 0)\n"
      "      level\n";
  assert_string_equal(buf, want);
  free(buf);

  f = open_memstream(&buf, &len);
  ct_cli_print_wrapped(f, 4,
                       "aaaaaaaaa bbbbbbbbb ccccccccc ddddddddd eeeeeeeee fffffffff ggggggggg "
                       "hhhhhhhhh");
  fclose(f);
  assert_string_equal(buf,
                      "    aaaaaaaaa bbbbbbbbb ccccccccc ddddddddd eeeeeeeee fffffffff ggggggggg\n"
                      "    hhhhhhhhh\n");
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_four_syntaxes),  cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_bools),          cmocka_unit_test(test_numbers),
      cmocka_unit_test(test_gpu_lists),      cmocka_unit_test(test_repeated_last_wins),
      cmocka_unit_test(test_positional),     cmocka_unit_test(test_errors),
      cmocka_unit_test(test_find_command),   cmocka_unit_test(test_help_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
