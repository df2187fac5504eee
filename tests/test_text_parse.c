/* Text-format parser on the test schema tests/data/text/tf_test.proto:
 * every field kind, every accepted syntax, and exact error messages. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/textformat.h"
#include "tf_test.pb-c.h"

static Cttest__AllKinds *parse_ok(const char *text) {
  ProtobufCMessage *m = NULL;
  ct_error err = {0};
  ct_status st =
      ct_text_parse(&cttest__all_kinds__descriptor, text, strlen(text), "t.prototxt", &m, &err);
  if (st != CT_OK) fail_msg("unexpected parse error: %s\n--- text:\n%s", err.msg, text);
  assert_non_null(m);
  return (Cttest__AllKinds *)m;
}

static void free_msg(Cttest__AllKinds *m) { protobuf_c_message_free_unpacked(&m->base, NULL); }

static void expect_error(const char *text, const char *want) {
  ProtobufCMessage *m = (ProtobufCMessage *)1;
  ct_error err = {0};
  ct_status st =
      ct_text_parse(&cttest__all_kinds__descriptor, text, strlen(text), "t.prototxt", &m, &err);
  if (st == CT_OK) fail_msg("parsed but should fail with: %s\n--- text:\n%s", want, text);
  assert_int_equal(st, CT_ERR_PARSE);
  assert_null(m);
  if (strcmp(err.msg, want) != 0)
    fail_msg("wrong message\n  got:  %s\n  want: %s\n--- text:\n%s", err.msg, want, text);
}

static void test_every_kind(void **state) {
  Cttest__AllKinds *m = parse_ok(
      "i32: -5 i64: -9000000000 u32: 4000000000 u64: 18000000000000000000\n"
      "s32: -7 s64: -8 f32: 9 f64: 10 sf32: -11 sf64: -12\n"
      "fl: 0.25 db: 1e-300 b: true str: \"hello\" by: \"\\000\\377\"\n"
      "color: BLUE inner { a: 3 s: 'x' child { a: 4 } v: [1, 2.5] }\n"
      "mode: FAST named: \"given\" scale: 2 blob: \"z\"\n"
      "title: \"T\"\n");
  assert_true(m->has_i32 && m->i32 == -5);
  assert_true(m->has_i64 && m->i64 == -9000000000LL);
  assert_true(m->has_u32 && m->u32 == 4000000000u);
  assert_true(m->has_u64 && m->u64 == 18000000000000000000ull);
  assert_true(m->has_s32 && m->s32 == -7);
  assert_true(m->has_s64 && m->s64 == -8);
  assert_true(m->has_f32 && m->f32 == 9);
  assert_true(m->has_f64 && m->f64 == 10);
  assert_true(m->has_sf32 && m->sf32 == -11);
  assert_true(m->has_sf64 && m->sf64 == -12);
  assert_true(m->has_fl && m->fl == 0.25f);
  assert_true(m->has_db && m->db == 1e-300);
  assert_true(m->has_b && m->b == 1);
  assert_string_equal(m->str, "hello");
  assert_true(m->has_by && m->by.len == 2 && m->by.data[0] == 0 && m->by.data[1] == 0xff);
  assert_true(m->has_color && m->color == CTTEST__COLOR__BLUE);
  assert_non_null(m->inner);
  assert_true(m->inner->has_a && m->inner->a == 3);
  assert_string_equal(m->inner->s, "x");
  assert_int_equal(m->inner->n_child, 1);
  assert_int_equal(m->inner->child[0]->a, 4);
  assert_int_equal(m->inner->n_v, 2);
  assert_true(m->inner->v[0] == 1.0f && m->inner->v[1] == 2.5f);
  assert_true(m->has_mode && m->mode == CTTEST__ALL_KINDS__MODE__FAST);
  assert_string_equal(m->named, "given");
  assert_true(m->has_scale && m->scale == 2.0f);
  assert_true(m->has_blob && m->blob.len == 1 && m->blob.data[0] == 'z');
  assert_string_equal(m->title, "T");
  free_msg(m);
}

static void test_defaults_untouched(void **state) {
  Cttest__AllKinds *m = parse_ok("# nothing but a comment\n");
  assert_false(m->has_i32);
  assert_null(m->str);
  assert_null(m->inner);
  assert_false(m->has_mode);
  assert_int_equal(m->mode, CTTEST__ALL_KINDS__MODE__SLOW);
  assert_string_equal(m->named, "none");
  assert_true(m->scale == 1.5f);
  assert_int_equal(m->kind_case, CTTEST__ALL_KINDS__KIND__NOT_SET);
  free_msg(m);
}

static void test_message_syntax(void **state) {
  Cttest__AllKinds *m = parse_ok(
      "r_inner { a: 1 }\n"
      "r_inner: { a: 2 }\n"
      "r_inner < a: 3 >\n"
      "r_inner: < a: 4; s: \"four\", >\n"
      "r_inner: [ { a: 5 }, < a: 6 > ]\n"
      "r_inner: []\n"
      "inner { child { child { a: 9 } } }\n");
  assert_int_equal(m->n_r_inner, 6);
  for (int i = 0; i < 6; i++) assert_int_equal(m->r_inner[i]->a, i + 1);
  assert_string_equal(m->r_inner[3]->s, "four");
  assert_int_equal(m->inner->child[0]->child[0]->a, 9);
  free_msg(m);
}

static void test_repeated_scalars(void **state) {
  Cttest__AllKinds *m = parse_ok(
      "r_i32: 1 r_i32: [2, 3] r_i32: [] r_i32: 4,\n"
      "r_str: 'a' r_str: [\"b\", 'c']\n"
      "r_b: [true, f, 1, False]\n"
      "r_color: [RED, 2, -3]\n"
      "p_i32: [7, 8, 9] p_fl: 1 p_fl: [2, inf]\n"
      "r_by: \"\\x01\" r_u64: 0xFFFFFFFFFFFFFFFF r_i64: [-1] r_db: [1.5] r_s32: -2 r_fl: [.5]\n"
      "r_u32: 017\n");
  assert_int_equal(m->n_r_i32, 4);
  for (int i = 0; i < 4; i++) assert_int_equal(m->r_i32[i], i + 1);
  assert_int_equal(m->n_r_str, 3);
  assert_string_equal(m->r_str[0], "a");
  assert_string_equal(m->r_str[2], "c");
  assert_int_equal(m->n_r_b, 4);
  assert_true(m->r_b[0] == 1 && m->r_b[1] == 0 && m->r_b[2] == 1 && m->r_b[3] == 0);
  assert_int_equal(m->n_r_color, 3);
  assert_int_equal(m->r_color[1], CTTEST__COLOR__BLUE);
  assert_int_equal(m->r_color[2], CTTEST__COLOR__INFRARED);
  assert_int_equal(m->n_p_i32, 3);
  assert_int_equal(m->p_i32[2], 9);
  assert_int_equal(m->n_p_fl, 3);
  assert_true(isinf(m->p_fl[2]));
  assert_int_equal(m->r_by[0].len, 1);
  assert_int_equal(m->r_by[0].data[0], 1);
  assert_true(m->r_u64[0] == UINT64_MAX);
  assert_true(m->r_i64[0] == -1 && m->r_db[0] == 1.5 && m->r_s32[0] == -2 && m->r_fl[0] == 0.5f);
  assert_int_equal(m->r_u32[0], 15);
  free_msg(m);
}

static void test_numbers(void **state) {
  Cttest__AllKinds *m = parse_ok("i32: 0x7fffffff i64: -0x8000000000000000 u32: 0 fl: 5.");
  assert_int_equal(m->i32, INT32_MAX);
  assert_true(m->i64 == INT64_MIN);
  assert_true(m->fl == 5.0f);
  free_msg(m);
  m = parse_ok("i32: -2147483648 u64: 18446744073709551615 s64: 9223372036854775807 db: 1f");
  assert_int_equal(m->i32, INT32_MIN);
  assert_true(m->u64 == UINT64_MAX && m->s64 == INT64_MAX && m->db == 1.0);
  free_msg(m);
  const char *reals[][2] = {{"1e-4", "0.0001"}, {".5", "0.5"},     {"5.", "5"},
                            {"1.5f", "1.5"},    {"2F", "2"},       {"-0.75", "-0.75"},
                            {"1E+2", "100"},    {"0x10", "16"},    {"3", "3"}};
  for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
    char text[64];
    snprintf(text, sizeof text, "db: %s fl: %s", reals[i][0], reals[i][0]);
    m = parse_ok(text);
    assert_true(m->db == strtod(reals[i][1], NULL));
    assert_true(m->fl == strtof(reals[i][1], NULL));
    free_msg(m);
  }
  m = parse_ok("fl: inf db: -Infinity r_fl: [nan, -nan, -inf, INF]");
  assert_true(isinf(m->fl) && m->fl > 0);
  assert_true(isinf(m->db) && m->db < 0);
  assert_true(isnan(m->r_fl[0]) && !signbit(m->r_fl[0]));
  assert_true(isnan(m->r_fl[1]) && signbit(m->r_fl[1]));
  assert_true(isinf(m->r_fl[2]) && m->r_fl[2] < 0 && isinf(m->r_fl[3]));
  free_msg(m);
  m = parse_ok("fl: 0.1 db: 0.1 i32: - 4");
  assert_true(m->fl == 0.1f && m->db == 0.1 && m->i32 == -4);
  free_msg(m);
}

static void test_bools(void **state) {
  const char *yes[] = {"true", "True", "t", "1"}, *no[] = {"false", "False", "f", "0"};
  for (int i = 0; i < 4; i++) {
    char text[32];
    snprintf(text, sizeof text, "b: %s", yes[i]);
    Cttest__AllKinds *m = parse_ok(text);
    assert_true(m->has_b && m->b == 1);
    free_msg(m);
    snprintf(text, sizeof text, "b: %s", no[i]);
    m = parse_ok(text);
    assert_true(m->has_b && m->b == 0);
    free_msg(m);
  }
}

static void test_strings(void **state) {
  Cttest__AllKinds *m = parse_ok(
      "str: \"a\\n\\t\\\\\\\"\\'b\" \"c\" 'd\"e'\n"
      "r_str: \"\\x41\\101\\x7\\a\\?\"\n"
      "r_str: \"caf\xc3\xa9 \xe2\x82\xac\"\n"
      "by: \"\\0\\00\\000\\0001\" \"\\xff\"\n"
      "title: ''\n");
  assert_string_equal(m->str, "a\n\t\\\"'bcd\"e");
  assert_string_equal(m->r_str[0], "AA\x07\a?");
  assert_string_equal(m->r_str[1], "caf\xc3\xa9 \xe2\x82\xac");
  assert_int_equal(m->by.len, 6);
  assert_memory_equal(m->by.data, "\0\0\0\0" "1\xff", 6);
  assert_string_equal(m->title, "");
  free_msg(m);
}

static void test_last_wins_and_merge(void **state) {
  Cttest__AllKinds *m = parse_ok(
      "i32: 1 i32: 2 str: \"a\" str: \"b\" named: \"x\" named: \"y\" by: \"p\" by: \"q\"\n"
      "inner { a: 1 s: \"one\" v: 1 } inner { s: \"two\" v: 2 }\n"
      "k_str: \"k1\" k_str: \"k2\"\n");
  assert_int_equal(m->i32, 2);
  assert_string_equal(m->str, "b");
  assert_string_equal(m->named, "y");
  assert_memory_equal(m->by.data, "q", 1);
  assert_int_equal(m->inner->a, 1);
  assert_string_equal(m->inner->s, "two");
  assert_int_equal(m->inner->n_v, 2);
  assert_int_equal(m->kind_case, CTTEST__ALL_KINDS__KIND_K_STR);
  assert_string_equal(m->k_str, "k2");
  free_msg(m);
  m = parse_ok("k_msg { a: 1 } k_msg { s: \"z\" }");
  assert_int_equal(m->kind_case, CTTEST__ALL_KINDS__KIND_K_MSG);
  assert_int_equal(m->k_msg->a, 1);
  assert_string_equal(m->k_msg->s, "z");
  free_msg(m);
}

static void test_required(void **state) {
  Cttest__AllKinds *m = parse_ok("req { id: 1 } req { id: 2 label: \"b\" } one_req { id: 0 }\n"
                                 "one_req { label: \"merged later\" }");
  assert_int_equal(m->n_req, 2);
  assert_int_equal(m->req[1]->id, 2);
  assert_string_equal(m->one_req->label, "merged later");
  free_msg(m);
  expect_error("req { id: 1 }\nreq {\n  label: \"x\"\n}\n",
               "t.prototxt:4:1: missing required field 'id' (int32) in Req at req[1]");
}

static void test_empty_and_separators(void **state) {
  Cttest__AllKinds *m = parse_ok("");
  free_msg(m);
  m = parse_ok("\xEF\xBB\xBFi32: 1;\r\ni64: 2,\n  # comment\n\tu32: 3 # trailing\n");
  assert_true(m->i32 == 1 && m->i64 == 2 && m->u32 == 3);
  free_msg(m);
  ProtobufCMessage *pm = NULL;
  assert_int_equal(ct_text_parse(&cttest__all_kinds__descriptor, "i32: 7 garbage", 6, NULL, &pm,
                                 NULL),
                   CT_OK);
  assert_int_equal(((Cttest__AllKinds *)pm)->i32, 7);
  protobuf_c_message_free_unpacked(pm, NULL);
}

/* Every error kind, with its exact message. */
static void test_errors(void **state) {
  static const char *const cases[][2] = {
      {"i32: 1\nu33: 2", "t.prototxt:2:1: unknown field 'u33' in AllKinds (did you mean 'u32'?)"},
      {"zzzzzz: 1", "t.prototxt:1:1: unknown field 'zzzzzz' in AllKinds"},
      {"inner {\n  child {\n    aa: 1\n  }\n}",
       "t.prototxt:3:5: unknown field 'aa' in Inner at inner.child[0] (did you mean 'a'?)"},
      {"r_inner {}\nr_inner { child {} child { ss: 1 } }",
       "t.prototxt:2:28: unknown field 'ss' in Inner at r_inner[1].child[1] (did you mean 's'?)"},
      {"i32: \"abc\"",
       "t.prototxt:1:6: expected an integer for field 'i32' (int32) in AllKinds, got \"abc\""},
      {"inner { a: 1.5 }",
       "t.prototxt:1:12: expected an integer for field 'a' (int32) in Inner at inner, got 1.5"},
      {"i32: 2147483648",
       "t.prototxt:1:6: value 2147483648 is out of range for field 'i32' (int32) in AllKinds "
       "(-2147483648 to 2147483647)"},
      {"i32: -2147483649",
       "t.prototxt:1:6: value -2147483649 is out of range for field 'i32' (int32) in AllKinds "
       "(-2147483648 to 2147483647)"},
      {"u32: -1",
       "t.prototxt:1:6: value -1 is out of range for field 'u32' (uint32) in AllKinds "
       "(0 to 4294967295)"},
      {"u32: 0x100000000",
       "t.prototxt:1:6: value 0x100000000 is out of range for field 'u32' (uint32) in AllKinds "
       "(0 to 4294967295)"},
      {"u64: 18446744073709551616",
       "t.prototxt:1:6: value 18446744073709551616 is out of range for field 'u64' (uint64) in "
       "AllKinds (0 to 18446744073709551615)"},
      {"i64: 9223372036854775808",
       "t.prototxt:1:6: value 9223372036854775808 is out of range for field 'i64' (int64) in "
       "AllKinds (-9223372036854775808 to 9223372036854775807)"},
      {"fl: 1e39", "t.prototxt:1:5: value 1e39 is out of range for field 'fl' (float) in AllKinds"},
      {"db: -1e400",
       "t.prototxt:1:5: value -1e400 is out of range for field 'db' (double) in AllKinds"},
      {"fl: abc", "t.prototxt:1:5: expected a number for field 'fl' (float) in AllKinds, got 'abc'"},
      {"b: yes", "t.prototxt:1:4: expected true or false for field 'b' (bool) in AllKinds, got 'yes'"},
      {"b: 2", "t.prototxt:1:4: expected true or false for field 'b' (bool) in AllKinds, got 2"},
      {"color: BLEU",
       "t.prototxt:1:8: unknown value 'BLEU' for enum Color of field 'color' in AllKinds (did you "
       "mean 'BLUE'?)"},
      {"color: PURPLE",
       "t.prototxt:1:8: unknown value 'PURPLE' for enum Color of field 'color' in AllKinds "
       "(expected one of INFRARED, RED, GREEN, BLUE)"},
      {"color: 7",
       "t.prototxt:1:8: value 7 is not a member of enum Color of field 'color' in AllKinds "
       "(expected one of INFRARED, RED, GREEN, BLUE)"},
      {"color: \"RED\"",
       "t.prototxt:1:8: expected an enum value for field 'color' (enum Color) in AllKinds, got "
       "\"RED\" (enum values are written without quotes)"},
      {"str: hello",
       "t.prototxt:1:6: expected a quoted string for field 'str' (string) in AllKinds, got "
       "'hello' (strings need quotes: \"hello\")"},
      {"str: 3",
       "t.prototxt:1:6: expected a quoted string for field 'str' (string) in AllKinds, got 3 "
       "(strings need quotes: \"3\")"},
      {"str: \"abc",
       "t.prototxt:1:6: unterminated string: reached end of file before the closing \""},
      {"str: 'abc\ni32: 1",
       "t.prototxt:1:6: unterminated string: missing closing ' before the end of the line"},
      {"str: \"a\\qb\"",
       "t.prototxt:1:8: invalid escape '\\q' in string (use \\n \\t \\\\ \\\" \\' \\xHH or \\ooo "
       "with ooo at most 377)"},
      {"str: \"\\400\"",
       "t.prototxt:1:7: invalid escape '\\400' in string (use \\n \\t \\\\ \\\" \\' \\xHH or "
       "\\ooo with ooo at most 377)"},
      {"str: \"a\\0b\"",
       "t.prototxt:1:6: a NUL byte cannot go in field 'str' (string) in AllKinds (only bytes "
       "fields can hold one)"},
      {"inner {\n  a: 1\n", "t.prototxt:3:1: reached end of file inside 'inner' opened at 1:1 "
                            "(missing '}')"},
      {"inner <\n  child { a: 1 }", "t.prototxt:2:17: reached end of file inside 'inner' opened "
                                    "at 1:1 (missing '>')"},
      {"inner { a: 1 >", "t.prototxt:1:14: expected '}' to close 'inner' opened at 1:1, got '>'"},
      {"i32: 1\n}\n", "t.prototxt:2:1: unexpected '}' with no open message to close"},
      {"inner { { a: 1 } }", "t.prototxt:1:9: expected a field name in Inner at inner, got '{'"},
      {"i32: 1 5", "t.prototxt:1:8: expected a field name in AllKinds, got 5"},
      {"i32:\ni64: 2", "t.prototxt:1:1: missing value for field 'i32' (int32) in AllKinds"},
      {"inner { a: }", "t.prototxt:1:9: missing value for field 'a' (int32) in Inner at inner"},
      {"str:", "t.prototxt:1:1: missing value for field 'str' (string) in AllKinds"},
      {"i32 { }", "t.prototxt:1:5: field 'i32' (int32) in AllKinds is not a message, so it cannot "
                  "take '{'; write 'i32: value'"},
      {"i32 5", "t.prototxt:1:5: expected ':' after field 'i32' (int32) in AllKinds, got 5"},
      {"inner: 5", "t.prototxt:1:8: field 'inner' in AllKinds is a message (Inner): expected '{', "
                   "got 5"},
      {"inner \"x\"", "t.prototxt:1:7: field 'inner' in AllKinds is a message (Inner): expected "
                      "'{', got \"x\""},
      {"i32: [1, 2]", "t.prototxt:1:6: field 'i32' (int32) in AllKinds is not repeated, so it "
                      "cannot take a list [...]"},
      {"r_i32: [1 2]", "t.prototxt:1:11: expected ',' or ']' in the list of field 'r_i32' in "
                       "AllKinds, got 2"},
      {"r_inner: [{}, 5]", "t.prototxt:1:15: field 'r_inner' in AllKinds is a message (Inner): "
                           "expected '{', got 5"},
      {"k_int: 1 k_str: \"s\"", "t.prototxt:1:10: field 'k_str' in AllKinds is given along with "
                                "field 'k_int', another member of the same oneof"},
      {"i32: 5abc", "t.prototxt:1:6: invalid number '5abc'"},
      {"i32: 09", "t.prototxt:1:6: invalid number '09' (a leading 0 means octal)"},
      {"fl: 1e", "t.prototxt:1:5: invalid number '1e'"},
      {"i32: 0x", "t.prototxt:1:6: invalid number '0x'"},
      {"i32: @", "t.prototxt:1:6: unexpected character '@'"},
      {"i32: 1\n\x01", "t.prototxt:2:1: unexpected control character 0x01"},
      {"i32: 1 \xc3\xa4", "t.prototxt:1:8: unexpected byte 0xC3 (non-ASCII text is only allowed "
                          "inside quoted strings and comments)"},
      {"[ext.field]: 1", "t.prototxt:1:1: extension and Any fields ('[...]') are not supported "
                         "in AllKinds"},
      {"req { label: \"x\" }", "t.prototxt:1:18: missing required field 'id' (int32) in Req at "
                               "req[0]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) expect_error(cases[i][0], cases[i][1]);
}

static void test_depth_limit(void **state) {
  size_t depth = CT_TEXT_MAX_DEPTH + 5;
  char *text = malloc(depth * 16 + 1);
  size_t n = 0;
  n += (size_t)sprintf(text + n, "inner { ");
  for (size_t i = 1; i < depth; i++) n += (size_t)sprintf(text + n, "child { ");
  ProtobufCMessage *m = NULL;
  ct_error err = {0};
  assert_int_equal(ct_text_parse(&cttest__all_kinds__descriptor, text, n, "deep", &m, &err),
                   CT_ERR_PARSE);
  assert_null(m);
  assert_string_equal(err.msg, "deep:1:807: messages nested more than 100 deep");
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_kind),       cmocka_unit_test(test_defaults_untouched),
      cmocka_unit_test(test_message_syntax),   cmocka_unit_test(test_repeated_scalars),
      cmocka_unit_test(test_numbers),          cmocka_unit_test(test_bools),
      cmocka_unit_test(test_strings),          cmocka_unit_test(test_last_wins_and_merge),
      cmocka_unit_test(test_required),         cmocka_unit_test(test_empty_and_separators),
      cmocka_unit_test(test_errors),           cmocka_unit_test(test_depth_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
