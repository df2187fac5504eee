/* Source positions of text-parsed messages (proto/srcpos.h): recorded per
 * field occurrence, kept through the wire format, left out of binary files
 * and printed text, moved by upgrades, used to locate errors. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "caffe.pb-c.h"
#include "core/fileio.h"
#include "proto/io.h"
#include "proto/srcpos.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"

static const char k_net[] =
    "name: \"n\"\n"
    "layer {\n"
    "  name: \"ip\"\n"
    "  type: \"InnerProduct\"\n"
    "  bottom: \"x\" bottom: \"y\"\n"
    "  inner_product_param {\n"
    "    num_output: 3\n"
    "  }\n"
    "}\n";

static ProtobufCMessage *parse(const ProtobufCMessageDescriptor *d, const char *text, unsigned flags) {
  ProtobufCMessage *m;
  ct_error err;
  assert_int_equal(ct_text_parse_with(d, text, strlen(text), "n.prototxt", flags, &m, &err), CT_OK);
  return m;
}

static void expect_at(const ProtobufCMessage *m, const char *field, size_t index, const char *want) {
  char at[256];
  bool found = ct_srcpos_find(m, field, index, at, sizeof at);
  if (!want) {
    assert_false(found);
    return;
  }
  assert_true(found);
  assert_string_equal(at, want);
}

static void test_positions_recorded(void **state) {
  Caffe__NetParameter *net = (Caffe__NetParameter *)parse(&caffe__net_parameter__descriptor, k_net,
                                                          CT_TEXT_POSITIONS);
  expect_at(&net->base, NULL, 0, "n.prototxt:1:1");
  expect_at(&net->base, "name", 0, "n.prototxt:1:1");
  expect_at(&net->base, "layer", 0, "n.prototxt:2:1");
  const ProtobufCMessage *l = &net->layer[0]->base;
  expect_at(l, NULL, 0, "n.prototxt:2:1");
  expect_at(l, "type", 0, "n.prototxt:4:3");
  expect_at(l, "bottom", 0, "n.prototxt:5:3");
  expect_at(l, "bottom", 1, "n.prototxt:5:15");
  expect_at(l, "bottom", 2, NULL);
  expect_at(l, "top", 0, NULL);
  expect_at(&net->layer[0]->inner_product_param->base, "num_output", 0, "n.prototxt:7:5");
  protobuf_c_message_free_unpacked(&net->base, NULL);

  /* without the option: no record at all */
  net = (Caffe__NetParameter *)parse(&caffe__net_parameter__descriptor, k_net, 0);
  assert_int_equal(net->layer[0]->base.n_unknown_fields, 0);
  expect_at(&net->layer[0]->base, "type", 0, NULL);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* The record rides through the wire format (clones) but never reaches a
 * binary file: those bytes equal a parse without positions. */
static void test_wire_and_files(void **state) {
  ProtobufCMessage *with = parse(&caffe__net_parameter__descriptor, k_net, CT_TEXT_POSITIONS);
  ProtobufCMessage *without = parse(&caffe__net_parameter__descriptor, k_net, 0);
  size_t n = protobuf_c_message_get_packed_size(with);
  uint8_t *buf = malloc(n);
  protobuf_c_message_pack(with, buf);
  ProtobufCMessage *clone = protobuf_c_message_unpack(&caffe__net_parameter__descriptor, NULL, n, buf);
  free(buf);
  assert_non_null(clone);
  expect_at(&((Caffe__NetParameter *)clone)->layer[0]->base, "bottom", 1, "n.prototxt:5:15");

  uint8_t *a, *b = malloc(protobuf_c_message_get_packed_size(without));
  size_t na = ct_srcpos_pack_without(clone, &a), nb = protobuf_c_message_pack(without, b);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  expect_at(&((Caffe__NetParameter *)clone)->layer[0]->base, "type", 0, "n.prototxt:4:3"); /* restored */

  const char *dir = tu_tmpdir("test_proto_srcpos");
  char path[4096];
  snprintf(path, sizeof path, "%s/n.binaryproto", dir);
  ct_error err;
  assert_int_equal(ct_proto_write_binary(clone, path, &err), CT_OK);
  char *data;
  size_t len;
  assert_int_equal(ct_file_read_all(path, &data, &len, 1 << 20, &err), CT_OK);
  assert_int_equal(len, nb);
  assert_memory_equal(data, b, nb);
  free(data);

  char *t1 = ct_text_print(clone), *t2 = ct_text_print(without);
  assert_string_equal(t1, t2);
  free(t1);
  free(t2);
  free(a);
  free(b);
  protobuf_c_message_free_unpacked(clone, NULL);
  protobuf_c_message_free_unpacked(with, NULL);
  protobuf_c_message_free_unpacked(without, NULL);
}

/* A message given in two blocks keeps the positions of both; a V1 layer's
 * positions move to its LayerParameter. */
static void test_merge_and_upgrade(void **state) {
  Caffe__NetParameter *net = (Caffe__NetParameter *)parse(
      &caffe__net_parameter__descriptor,
      "state { phase: TRAIN }\nstate { level: 2 }\n"
      "layers {\n  name: \"r\"\n  type: RELU\n  bottom: \"a\"\n}\n",
      CT_TEXT_POSITIONS);
  expect_at(&net->state->base, "phase", 0, "n.prototxt:1:9");
  expect_at(&net->state->base, "level", 0, "n.prototxt:2:9");
  ct_error err;
  assert_int_equal(ct_net_upgrade(net, NULL, "n.prototxt", &err), CT_OK);
  assert_int_equal(net->n_layer, 1);
  expect_at(&net->layer[0]->base, NULL, 0, "n.prototxt:3:1");
  expect_at(&net->layer[0]->base, "type", 0, "n.prototxt:5:3");
  expect_at(&net->layer[0]->base, "bottom", 0, "n.prototxt:6:3");
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* Errors get the position of what they are about, once. */
static void test_prefix_and_locate(void **state) {
  Caffe__SolverParameter *sp = (Caffe__SolverParameter *)parse(
      &caffe__solver_parameter__descriptor, "base_lr: 0.1\ntest_iter: 5\n  test_iter: 6\nlr_policy: \"stepp\"\n",
      CT_TEXT_POSITIONS);
  ct_error err;
  ct_error_set(&err, CT_ERR_INVALID, "lr_policy: unknown policy 'stepp'");
  ct_srcpos_locate(&err, &sp->base);
  assert_string_equal(err.msg, "n.prototxt:4:1: lr_policy: unknown policy 'stepp'");
  ct_srcpos_locate(&err, &sp->base); /* already located */
  assert_string_equal(err.msg, "n.prototxt:4:1: lr_policy: unknown policy 'stepp'");
  ct_error_set(&err, CT_ERR_INVALID, "test_iter[1]: must be >= 0, got -6");
  ct_srcpos_locate(&err, &sp->base);
  assert_string_equal(err.msg, "n.prototxt:3:3: test_iter[1]: must be >= 0, got -6");
  ct_error_set(&err, CT_ERR_INVALID, "momentum: too large");
  ct_srcpos_locate(&err, &sp->base); /* not in the text: as it was */
  assert_string_equal(err.msg, "momentum: too large");
  ct_error_set(&err, CT_ERR_INVALID, "Solver failed: no net");
  ct_srcpos_locate(&err, &sp->base);
  assert_string_equal(err.msg, "Solver failed: no net");
  ct_error_set(&err, CT_ERR_INVALID, "no net");
  ct_srcpos_prefix(&err, &sp->base, "net", 0); /* not in the text: the message's own */
  assert_string_equal(err.msg, "n.prototxt:1:1: no net");
  assert_true(ct_srcpos_starts_with("a/b c.prototxt:12:3: x"));
  assert_false(ct_srcpos_starts_with("layer 'a': 1:2: x"));
  assert_false(ct_srcpos_starts_with("x.prototxt:12: x"));
  protobuf_c_message_free_unpacked(&sp->base, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_positions_recorded), cmocka_unit_test(test_wire_and_files),
                                     cmocka_unit_test(test_merge_and_upgrade), cmocka_unit_test(test_prefix_and_locate)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
