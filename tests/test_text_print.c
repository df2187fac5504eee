/* Text-format printer and files on the test schema: exact output, float
 * formatting, escapes, print -> parse round trips of random messages, and
 * ct_text_parse_file / ct_text_write_file. */
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/textformat.h"
#include "tf_test.pb-c.h"

static ProtobufCMessage *parse_ok(const ProtobufCMessageDescriptor *desc, const char *text) {
  ProtobufCMessage *m = NULL;
  ct_error err = {0};
  if (ct_text_parse(desc, text, strlen(text), "t.prototxt", &m, &err) != CT_OK)
    fail_msg("unexpected parse error: %s\n--- text:\n%s", err.msg, text);
  return m;
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len) {
  *len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(*len + 1);
  assert_int_equal(protobuf_c_message_pack(m, buf), *len);
  return buf;
}

/* print -> parse gives the same packed bytes, and print -> parse -> print
 * gives the same text. */
static void assert_round_trip(const ProtobufCMessage *m) {
  char *text = ct_text_print(m);
  assert_non_null(text);
  ProtobufCMessage *again = parse_ok(m->descriptor, text);
  size_t n1, n2;
  uint8_t *b1 = pack(m, &n1), *b2 = pack(again, &n2);
  if (n1 != n2 || memcmp(b1, b2, n1) != 0) fail_msg("packed bytes differ after:\n%s", text);
  char *text2 = ct_text_print(again);
  assert_string_equal(text, text2);
  free(b1);
  free(b2);
  free(text);
  free(text2);
  protobuf_c_message_free_unpacked(again, NULL);
}

static void test_print_exact(void **state) {
  ProtobufCMessage *m = parse_ok(&cttest__all_kinds__descriptor,
                                 "title: \"T\"\n"
                                 "r_inner { a: 2 }\n"
                                 "i32: -5\n"
                                 "inner < s: 'in' child { a: 1 } >\n"
                                 "color: 1\n"
                                 "r_i32: [1, 2]\n"
                                 "named: \"none\"\n"
                                 "fl: 100 db: 0.1 b: f\n"
                                 "by: \"\\x01a\"\n"
                                 "k_str: \"k\"\n"
                                 "str: \"q\\\"b\\\\n\\nt\\tc\\x01 caf\xc3\xa9 \xff\"\n"
                                 "p_fl: [0.5, -inf, nan]\n");
  char *text = ct_text_print(m);
  assert_string_equal(text,
                      "i32: -5\n"
                      "fl: 100\n"
                      "db: 0.1\n"
                      "b: false\n"
                      "str: \"q\\\"b\\\\n\\nt\\tc\\001 caf\xc3\xa9 \\377\"\n"
                      "by: \"\\001a\"\n"
                      "color: GREEN\n"
                      "inner {\n"
                      "  s: \"in\"\n"
                      "  child {\n"
                      "    a: 1\n"
                      "  }\n"
                      "}\n"
                      "named: \"none\"\n"
                      "r_i32: 1\n"
                      "r_i32: 2\n"
                      "r_inner {\n"
                      "  a: 2\n"
                      "}\n"
                      "p_fl: 0.5\n"
                      "p_fl: -inf\n"
                      "p_fl: nan\n"
                      "k_str: \"k\"\n"
                      "title: \"T\"\n");
  free(text);
  assert_round_trip(m);
  protobuf_c_message_free_unpacked(m, NULL);
}

static void test_print_only_set_fields(void **state) {
  Cttest__AllKinds m = CTTEST__ALL_KINDS__INIT;
  char *text = ct_text_print(&m.base);
  assert_string_equal(text, "");
  free(text);
  /* Values without has_* are not printed; a default string pointer is not
   * printed; an enum number with no name prints as the number. */
  m.i32 = 5;
  m.has_color = 1;
  m.color = 7;
  Cttest__Inner empty = CTTEST__INNER__INIT;
  m.inner = &empty;
  m.kind_case = CTTEST__ALL_KINDS__KIND_K_INT;
  m.k_int = 0;
  text = ct_text_print(&m.base);
  assert_string_equal(text, "color: 7\ninner {\n}\nk_int: 0\n");
  free(text);
}

static void test_float_format(void **state) {
  static const struct {
    float v;
    const char *text;
  } floats[] = {{0.1f, "0.1"},           {1e-8f, "1e-08"},        {0.0005f, "0.0005"},
                {FLT_MAX, "3.4028235e+38"}, {FLT_MIN, "1.1754944e-38"}, {1e-45f, "1e-45"},
                {-0.0f, "-0"},           {100.0f, "100"},         {123456.0f, "123456"},
                {1e6f, "1e+06"},         {0.00390625f, "0.00390625"}, {16777216.0f, "16777216"},
                {2.0f / 3, "0.6666667"}, {-1.5f, "-1.5"},         {INFINITY, "inf"}};
  for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
    Cttest__AllKinds m = CTTEST__ALL_KINDS__INIT;
    m.has_fl = 1;
    m.fl = floats[i].v;
    char want[64];
    snprintf(want, sizeof want, "fl: %s\n", floats[i].text);
    char *text = ct_text_print(&m.base);
    assert_string_equal(text, want);
    free(text);
    assert_round_trip(&m.base);
  }
  static const struct {
    double v;
    const char *text;
  } doubles[] = {{0.1, "0.1"},
                 {1.0 / 3, "0.3333333333333333"},
                 {1e-300, "1e-300"},
                 {DBL_MAX, "1.7976931348623157e+308"},
                 {5e-324, "5e-324"},
                 {1e15, "1e+15"},
                 {123456789012345.0, "123456789012345"},
                 {-NAN, "-nan"}};
  for (size_t i = 0; i < sizeof doubles / sizeof doubles[0]; i++) {
    Cttest__AllKinds m = CTTEST__ALL_KINDS__INIT;
    m.has_db = 1;
    m.db = doubles[i].v;
    char want[64];
    snprintf(want, sizeof want, "db: %s\n", doubles[i].text);
    char *text = ct_text_print(&m.base);
    assert_string_equal(text, want);
    free(text);
    assert_round_trip(&m.base);
  }
}

/* ------------------------------------------------------------ random messages */

static uint64_t g_rng = 88172645463325252ull;

static uint64_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

static ProtobufCMessage *random_message(const ProtobufCMessageDescriptor *d, int depth);

static void random_scalar(const ProtobufCFieldDescriptor *f, void *dst, int depth) {
  uint64_t r = rnd();
  switch (f->type) {
    case PROTOBUF_C_TYPE_FLOAT: {
      uint32_t bits = (uint32_t)r;
      float x;
      memcpy(&x, &bits, 4);
      if (isnan(x)) x = (r >> 40) & 1 ? NAN : -NAN;
      *(float *)dst = x;
      break;
    }
    case PROTOBUF_C_TYPE_DOUBLE: {
      double x;
      memcpy(&x, &r, 8);
      if (isnan(x)) x = (r >> 3) & 1 ? NAN : -NAN;
      *(double *)dst = x;
      break;
    }
    case PROTOBUF_C_TYPE_BOOL: *(protobuf_c_boolean *)dst = r & 1; break;
    case PROTOBUF_C_TYPE_ENUM: {
      const ProtobufCEnumDescriptor *ed = f->descriptor;
      *(int32_t *)dst = ed->values[r % ed->n_values].value;
      break;
    }
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES: {
      size_t n = r % 9;
      uint8_t *s = malloc(n + 1);
      for (size_t i = 0; i < n; i++) {
        s[i] = (uint8_t)rnd();
        if (f->type == PROTOBUF_C_TYPE_STRING && s[i] == 0) s[i] = 'z';
      }
      s[n] = 0;
      if (f->type == PROTOBUF_C_TYPE_STRING) {
        *(char **)dst = (char *)s;
      } else {
        ((ProtobufCBinaryData *)dst)->data = s;
        ((ProtobufCBinaryData *)dst)->len = n;
      }
      break;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
      *(ProtobufCMessage **)dst = random_message(f->descriptor, depth + 1);
      break;
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32: {
      uint32_t x = (uint32_t)(r >> 8);
      if (r & 1) x = (uint32_t)(r >> 60); /* small values too */
      memcpy(dst, &x, 4);
      break;
    }
    default: {
      uint64_t x = r & 1 ? rnd() : r >> 58;
      memcpy(dst, &x, 8);
      break;
    }
  }
}

static size_t elt_size(ProtobufCType t) {
  switch (t) {
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE: return 8;
    case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    default: return 4;
  }
}

/* A message with a random subset of fields set, in protobuf-c's layout. */
static ProtobufCMessage *random_message(const ProtobufCMessageDescriptor *d, int depth) {
  ProtobufCMessage *m = malloc(d->sizeof_message);
  protobuf_c_message_init(d, m);
  char *base = (char *)m;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (rnd() % 3 == 0) continue;
    if (f->type == PROTOBUF_C_TYPE_MESSAGE && depth >= 3) continue;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = rnd() % 4;
      if (!n) continue;
      char *array = malloc(n * elt_size(f->type));
      for (size_t k = 0; k < n; k++) random_scalar(f, array + k * elt_size(f->type), depth);
      *(void **)(base + f->offset) = array;
      *(size_t *)(base + f->quantifier_offset) = n;
      continue;
    }
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      uint32_t *which = (uint32_t *)(base + f->quantifier_offset);
      if (*which) continue;
      *which = f->id;
    } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
               f->type != PROTOBUF_C_TYPE_MESSAGE) {
      *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
    }
    random_scalar(f, base + f->offset, depth);
  }
  return m;
}

static void test_random_round_trips(void **state) {
  for (int i = 0; i < 300; i++) {
    ProtobufCMessage *m = random_message(&cttest__all_kinds__descriptor, 0);
    assert_round_trip(m);
    protobuf_c_message_free_unpacked(m, NULL);
  }
}

/* ------------------------------------------------------------ files */

static void write_bytes(const char *dir, const char *name, const char *data, size_t len,
                        char *path, size_t size) {
  snprintf(path, size, "%s/%s", dir, name);
  tu_write_file(path, data, len);
}

static void expect_file_error(const char *path, ct_status code, const char *want) {
  ProtobufCMessage *m = (ProtobufCMessage *)1;
  ct_error err = {0};
  assert_int_equal(ct_text_parse_file(&cttest__all_kinds__descriptor, path, &m, &err), code);
  assert_null(m);
  assert_string_equal(err.msg, want);
}

static void test_files(void **state) {
  const char *dir = tu_tmpdir("test_text_print_files");
  char path[4096], want[4400];
  write_bytes(dir, "empty.prototxt", "", 0, path, sizeof path);
  snprintf(want, sizeof want, "%s: file is empty", path);
  expect_file_error(path, CT_ERR_PARSE, want);

  write_bytes(dir, "blank.prototxt", "\n  # just a comment\n\n", 21, path, sizeof path);
  snprintf(want, sizeof want, "%s: file is empty (only whitespace and comments)", path);
  expect_file_error(path, CT_ERR_PARSE, want);

  write_bytes(dir, "x.caffemodel", "\x0a\x05LeNet\x12\x00\x01", 10, path, sizeof path);
  snprintf(want, sizeof want,
           "%s:1:1: this looks like a binary file, not a text prototxt (a .caffemodel? use the "
           "binary reader)",
           path);
  expect_file_error(path, CT_ERR_PARSE, want);

  write_bytes(dir, "latin1.prototxt", "i32: 1\n# caf\xe9\n", 14, path, sizeof path);
  snprintf(want, sizeof want, "%s:2:6: invalid UTF-8 byte 0xE9 (save the file as UTF-8)", path);
  expect_file_error(path, CT_ERR_PARSE, want);

  write_bytes(dir, "typo.prototxt", "i32: 1\ninner {\n  aa: 2\n}\n", 24, path, sizeof path);
  snprintf(want, sizeof want, "%s:3:3: unknown field 'aa' in Inner at inner (did you mean 'a'?)",
           path);
  expect_file_error(path, CT_ERR_PARSE, want);

  snprintf(path, sizeof path, "%s/missing.prototxt", dir);
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
  expect_file_error(path, CT_ERR_NOTFOUND, want);

  /* Write, read back, and overwrite in place. */
  ProtobufCMessage *m = parse_ok(&cttest__all_kinds__descriptor,
                                 "str: \"caf\xc3\xa9\" inner { a: 3 } r_fl: [0.5, 1e-3]");
  snprintf(path, sizeof path, "%s/out.prototxt", dir);
  ct_error err = {0};
  assert_int_equal(ct_text_write_file(m, path, &err), CT_OK);
  assert_int_equal(ct_text_write_file(m, path, &err), CT_OK);
  size_t len;
  char *written = tu_read_file(path, &len);
  char *printed = ct_text_print(m);
  assert_string_equal(written, printed);
  ProtobufCMessage *back = NULL;
  assert_int_equal(ct_text_parse_file(&cttest__all_kinds__descriptor, path, &back, &err), CT_OK);
  char *printed_back = ct_text_print(back);
  assert_string_equal(printed_back, printed);
  char cmd[4200], *listing = NULL;
  snprintf(cmd, sizeof cmd, "ls '%s' | grep -c tmp", dir);
  tu_run(cmd, &listing);
  assert_string_equal(listing, "0\n"); /* no temporary file left behind */
  free(listing);
  free(written);
  free(printed);
  free(printed_back);
  protobuf_c_message_free_unpacked(back, NULL);

  snprintf(path, sizeof path, "%s/no/such/dir/out.prototxt", dir);
  assert_int_equal(ct_text_write_file(m, path, &err), CT_ERR_IO);
  snprintf(want, sizeof want, "%s: create failed: No such file or directory", path);
  assert_string_equal(err.msg, want);
  protobuf_c_message_free_unpacked(m, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_print_exact),        cmocka_unit_test(test_print_only_set_fields),
      cmocka_unit_test(test_float_format),       cmocka_unit_test(test_random_round_trips),
      cmocka_unit_test(test_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
