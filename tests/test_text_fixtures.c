/* The real BVLC prototxts under CORTADO_FIXTURES: every one parses (solver
 * files as caffe.SolverParameter, the rest as caffe.NetParameter), prints,
 * and parses back to the same packed bytes; printing is a fixed point; and
 * spot values match what the files say. */
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caffe.pb-c.h"
#include "proto/textformat.h"

static const ProtobufCMessageDescriptor *desc_for(const char *name) {
  return strstr(name, "solver") ? &caffe__solver_parameter__descriptor
                                 : &caffe__net_parameter__descriptor;
}

static ProtobufCMessage *parse_fixture(const char *name) {
  ProtobufCMessage *m = NULL;
  ct_error err = {0};
  if (ct_text_parse_file(desc_for(name), tu_fixture(name), &m, &err) != CT_OK)
    fail_msg("%s", err.msg);
  return m;
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len) {
  *len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(*len + 1);
  assert_int_equal(protobuf_c_message_pack(m, buf), *len);
  return buf;
}

static void check_round_trip(const char *name) {
  ProtobufCMessage *m = parse_fixture(name);
  char *text = ct_text_print(m);
  assert_non_null(text);
  ProtobufCMessage *again = NULL;
  ct_error err = {0};
  if (ct_text_parse(m->descriptor, text, strlen(text), name, &again, &err) != CT_OK)
    fail_msg("%s: printed text does not parse: %s", name, err.msg);
  size_t n1, n2;
  uint8_t *b1 = pack(m, &n1), *b2 = pack(again, &n2);
  if (n1 != n2 || memcmp(b1, b2, n1) != 0) fail_msg("%s: packed bytes differ after printing", name);
  assert_true(n1 > 0);
  char *text2 = ct_text_print(again);
  if (strcmp(text, text2) != 0) fail_msg("%s: print-parse-print is not a fixed point", name);
  free(b1);
  free(b2);
  free(text);
  free(text2);
  protobuf_c_message_free_unpacked(m, NULL);
  protobuf_c_message_free_unpacked(again, NULL);
}

/* Google's own text parser agrees byte for byte: tests/data/text/golden/
 * NAME.pb holds each fixture encoded by
 *   protoc --proto_path=src/proto --encode=caffe.NetParameter (or
 *   caffe.SolverParameter) src/proto/caffe.proto < NAME.prototxt */
static void check_matches_protoc(const char *name) {
  char rel[512];
  snprintf(rel, sizeof rel, "tests/data/text/golden/%.*s.pb", (int)(strlen(name) - 9), name);
  size_t want_len;
  char *want = tu_read_file(tu_src(rel), &want_len);
  if (!want) fail_msg("missing %s: regenerate it with protoc (see test_text_fixtures.c)", rel);
  ProtobufCMessage *m = parse_fixture(name);
  size_t len;
  uint8_t *got = pack(m, &len);
  if (len != want_len || memcmp(got, want, len) != 0)
    fail_msg("%s: packed bytes differ from protoc's encoding (%zu vs %zu bytes)", name, len,
             want_len);
  free(got);
  free(want);
  protobuf_c_message_free_unpacked(m, NULL);
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_every_fixture_round_trips(void **state) {
  const char *dir = tu_fixture("");
  DIR *d = opendir(dir);
  assert_non_null(d);
  char *names[256];
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < 256) {
    size_t len = strlen(e->d_name);
    if (len > 9 && strcmp(e->d_name + len - 9, ".prototxt") == 0) names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof names[0], by_name);
  size_t solvers = 0;
  for (size_t i = 0; i < n; i++) {
    check_round_trip(names[i]);
    check_matches_protoc(names[i]);
    solvers += desc_for(names[i]) == &caffe__solver_parameter__descriptor;
    free(names[i]);
  }
  /* The BVLC set: 14 nets and 10 solvers at least. */
  assert_true(n >= 24);
  assert_true(solvers >= 10);
}

static void test_lenet_values(void **state) {
  Caffe__NetParameter *net = (Caffe__NetParameter *)parse_fixture("lenet.prototxt");
  assert_string_equal(net->name, "LeNet");
  assert_int_equal(net->n_layer, 9);
  Caffe__LayerParameter *data = net->layer[0], *conv1 = net->layer[1];
  assert_string_equal(data->type, "Input");
  assert_int_equal(data->input_param->n_shape, 1);
  Caffe__BlobShape *shape = data->input_param->shape[0];
  assert_int_equal(shape->n_dim, 4);
  assert_true(shape->dim[0] == 64 && shape->dim[1] == 1 && shape->dim[2] == 28 &&
              shape->dim[3] == 28);
  assert_string_equal(conv1->name, "conv1");
  assert_string_equal(conv1->type, "Convolution");
  assert_int_equal(conv1->n_bottom, 1);
  assert_string_equal(conv1->bottom[0], "data");
  assert_int_equal(conv1->n_param, 2);
  assert_true(conv1->param[0]->has_lr_mult && conv1->param[0]->lr_mult == 1.0f);
  assert_true(conv1->param[1]->lr_mult == 2.0f);
  Caffe__ConvolutionParameter *cp = conv1->convolution_param;
  assert_true(cp->has_num_output && cp->num_output == 20);
  assert_int_equal(cp->n_kernel_size, 1);
  assert_int_equal(cp->kernel_size[0], 5);
  assert_int_equal(cp->stride[0], 1);
  assert_string_equal(cp->weight_filler->type, "xavier");
  assert_string_equal(cp->bias_filler->type, "constant");
  Caffe__LayerParameter *pool1 = net->layer[2];
  assert_true(pool1->pooling_param->has_pool &&
              pool1->pooling_param->pool == CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_solver_values(void **state) {
  Caffe__SolverParameter *s = (Caffe__SolverParameter *)parse_fixture("lenet_solver.prototxt");
  assert_string_equal(s->net, "examples/mnist/lenet_train_test.prototxt");
  assert_int_equal(s->n_test_iter, 1);
  assert_int_equal(s->test_iter[0], 100);
  assert_true(s->has_test_interval && s->test_interval == 500);
  assert_true(s->has_base_lr && s->base_lr == 0.01f);
  assert_true(s->momentum == 0.9f && s->weight_decay == 0.0005f);
  assert_string_equal(s->lr_policy, "inv");
  assert_true(s->gamma == 0.0001f && s->power == 0.75f);
  assert_true(s->has_max_iter && s->max_iter == 10000);
  assert_true(s->has_solver_mode &&
              s->solver_mode == CAFFE__SOLVER_PARAMETER__SOLVER_MODE__GPU);
  protobuf_c_message_free_unpacked(&s->base, NULL);

  s = (Caffe__SolverParameter *)parse_fixture("cifar10_full_solver.prototxt");
  assert_true(s->has_snapshot_format &&
              s->snapshot_format == CAFFE__SOLVER_PARAMETER__SNAPSHOT_FORMAT__HDF5);
  assert_string_equal(s->lr_policy, "fixed");
  protobuf_c_message_free_unpacked(&s->base, NULL);
}

static void test_big_nets(void **state) {
  Caffe__NetParameter *net =
      (Caffe__NetParameter *)parse_fixture("bvlc_googlenet_train_val.prototxt");
  assert_int_equal(net->n_layer, 166);
  protobuf_c_message_free_unpacked(&net->base, NULL);
  net = (Caffe__NetParameter *)parse_fixture("bvlc_alexnet_train_val.prototxt");
  assert_int_equal(net->n_layer, 26);
  Caffe__TransformationParameter *tp = net->layer[0]->transform_param;
  assert_true(tp->has_mirror && tp->mirror == 1);
  assert_int_equal(tp->crop_size, 227);
  assert_string_equal(tp->mean_file, "data/ilsvrc12/imagenet_mean.binaryproto");
  assert_true(net->layer[1]->transform_param->has_mirror && net->layer[1]->transform_param->mirror == 0);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* The printed form of a small net, exactly: Caffe's layout. */
static void test_print_style(void **state) {
  const char *text =
      "name: 'tiny' layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
      "  inner_product_param { num_output: 10 weight_filler { type: \"gaussian\" std: 0.01 } }\n"
      "  include { phase: TRAIN } }\n"
      "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: ['ip', 'label'] loss_weight: 1 }\n";
  ProtobufCMessage *m = NULL;
  ct_error err = {0};
  assert_int_equal(
      ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), "tiny", &m, &err),
      CT_OK);
  char *out = ct_text_print(m);
  assert_string_equal(out,
                      "name: \"tiny\"\n"
                      "layer {\n"
                      "  name: \"ip\"\n"
                      "  type: \"InnerProduct\"\n"
                      "  bottom: \"data\"\n"
                      "  top: \"ip\"\n"
                      "  include {\n"
                      "    phase: TRAIN\n"
                      "  }\n"
                      "  inner_product_param {\n"
                      "    num_output: 10\n"
                      "    weight_filler {\n"
                      "      type: \"gaussian\"\n"
                      "      std: 0.01\n"
                      "    }\n"
                      "  }\n"
                      "}\n"
                      "layer {\n"
                      "  name: \"loss\"\n"
                      "  type: \"SoftmaxWithLoss\"\n"
                      "  bottom: \"ip\"\n"
                      "  bottom: \"label\"\n"
                      "  loss_weight: 1\n"
                      "}\n");
  free(out);
  protobuf_c_message_free_unpacked(m, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_fixture_round_trips), cmocka_unit_test(test_lenet_values),
      cmocka_unit_test(test_solver_values),             cmocka_unit_test(test_big_nets),
      cmocka_unit_test(test_print_style),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
