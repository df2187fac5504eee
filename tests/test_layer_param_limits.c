/* Messages state numbers as the user wrote them and the limit that was
 * crossed: a kernel size of 2^31 is not "must be positive" (it became
 * negative as an int), num_output 2e9 is not "must be given and positive"
 * (the limit is 2^30), an odd local_size of 2^32 - 1 is not "must be odd", a
 * blob dim of -500 in a .caffemodel does not print a count of
 * 18446744073709551116, an input dim of 2^32 does not become 0, and a table
 * of 2e9 x 2e9 values is an error, not an abort.  Exact texts. */
#include "core/log.h"
#include "net/net.h"
#include "proto/io.h"
#include "proto/textformat.h"
#include "testutil.h"

#define INPUT "layer { name: 'x' type: 'Input' top: 'x' input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }\n"

/* Builds the net of `text` on the CPU; the build must fail with `want`
 * (after the net's name). */
static void expect_build_error(const char *text, const char *want) {
  ProtobufCMessage *m = NULL;
  ct_error err;
  if (ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), "limits", &m, &err) != CT_OK)
    fail_msg("parse: %s", err.msg);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_net *net = NULL;
  ct_net_opts o = {.quiet = true, .source_name = "limits"};
  assert_int_equal(ct_net_init(&net, (Caffe__NetParameter *)m, &o, &ctx, &err), CT_ERR_INVALID);
  assert_null(net);
  char full[2048];
  snprintf(full, sizeof full, "limits: %s", want);
  assert_string_equal(err.msg, full);
  protobuf_c_message_free_unpacked(m, NULL);
  ct_context_free(&ctx);
}

static void test_convolution_limits(void **state) {
  (void)state;
  expect_build_error(INPUT "layer { name: 'c' type: 'Convolution' bottom: 'x' top: 'y'\n"
                           "  convolution_param { num_output: 4 kernel_size: 2147483648 } }",
                     "layer 'c' (Convolution): convolution_param.kernel_size 2147483648 is too large "
                     "(the limit is 2^30 = 1073741824)");
  expect_build_error(INPUT "layer { name: 'c' type: 'Convolution' bottom: 'x' top: 'y'\n"
                           "  convolution_param { num_output: 2000000000 kernel_size: 3 } }",
                     "layer 'c' (Convolution): convolution_param.num_output 2000000000 is too large "
                     "(the limit is 2^30 = 1073741824)");
  expect_build_error(INPUT "layer { name: 'c' type: 'Convolution' bottom: 'x' top: 'y'\n"
                           "  convolution_param { num_output: 4 kernel_h: 3 kernel_w: 4294967295 } }",
                     "layer 'c' (Convolution): convolution_param.kernel_w 4294967295 is too large "
                     "(the limit is 2^30 = 1073741824)");
  expect_build_error(INPUT "layer { name: 'c' type: 'Convolution' bottom: 'x' top: 'y'\n"
                           "  convolution_param { num_output: 4 kernel_size: 3 group: 2147483648 } }",
                     "layer 'c' (Convolution): convolution_param.group 2147483648 is too large (the "
                     "limit is 2^30 = 1073741824)");
  expect_build_error(INPUT "layer { name: 'c' type: 'Convolution' bottom: 'x' top: 'y'\n"
                           "  convolution_param { num_output: 4 kernel_size: 3 pad: 1073741824 } }",
                     "layer 'c' (Convolution): output size 2147483654 along spatial axis 0 is too "
                     "large (input 8, kernel extent 3, pad 1073741824, stride 1; the limit is 2^30 = "
                     "1073741824)");
  expect_build_error(INPUT "layer { name: 'c' type: 'Convolution' bottom: 'x' top: 'y'\n"
                           "  convolution_param { num_output: 4 kernel_size: 0 } }",
                     "layer 'c' (Convolution): convolution_param.kernel_size is 0 (must be at least 1)");
}

static void test_other_layer_limits(void **state) {
  (void)state;
  expect_build_error(INPUT "layer { name: 'i' type: 'InnerProduct' bottom: 'x' top: 'y'\n"
                           "  inner_product_param { num_output: 2000000000 } }",
                     "layer 'i' (InnerProduct): inner_product_param.num_output 2000000000 is too large "
                     "(the limit is 2^30 = 1073741824)");
  expect_build_error(INPUT "layer { name: 'p' type: 'Pooling' bottom: 'x' top: 'y'\n"
                           "  pooling_param { kernel_size: 2147483648 } }",
                     "layer 'p' (Pooling): pooling_param.kernel_size 2147483648 is too large (the "
                     "limit is 2^30 = 1073741824)");
  expect_build_error(INPUT "layer { name: 'p' type: 'Pooling' bottom: 'x' top: 'y'\n"
                           "  pooling_param { kernel_size: 2 stride: 4294967295 } }",
                     "layer 'p' (Pooling): pooling_param.stride 4294967295 is too large (the limit "
                     "is 2^30 = 1073741824)");
  expect_build_error(INPUT "layer { name: 'l' type: 'LRN' bottom: 'x' top: 'y'\n"
                           "  lrn_param { local_size: 4294967295 } }",
                     "layer 'l' (LRN): lrn_param.local_size 4294967295 is too large (the limit is "
                     "2^20 = 1048576)");
  expect_build_error(INPUT "layer { name: 'e' type: 'Embed' bottom: 'x' top: 'y'\n"
                           "  embed_param { num_output: 1000000000 input_dim: 1000000000 } }",
                     "layer 'e' (Embed): the table (embed_param.input_dim 1000000000 x num_output "
                     "1000000000) would have more than 2^31 - 1 values");
  expect_build_error("input: 'x' input_shape { dim: 2 dim: 4294967296 }\n"
                     "layer { name: 'r' type: 'ReLU' bottom: 'x' top: 'y' }",
                     "input 'x' dim 1 is 4294967296 (must be in [0, 2147483647])");
}

/* A blob of dims 3 x -500 in a .caffemodel: the shape mismatch message
 * shows the dims as written and no wrapped count. */
static void test_caffemodel_shape_message(void **state) {
  (void)state;
  const char *dir = tu_tmpdir("limits_caffemodel");
  char path[4300];
  snprintf(path, sizeof path, "%s/bad.caffemodel", dir);
  int64_t dims[2] = {3, -500};
  Caffe__BlobShape shape = CAFFE__BLOB_SHAPE__INIT;
  shape.n_dim = 2;
  shape.dim = dims;
  float w = 1;
  Caffe__BlobProto blob = CAFFE__BLOB_PROTO__INIT, *blobs[1] = {&blob};
  blob.shape = &shape;
  blob.n_data = 1;
  blob.data = &w;
  Caffe__LayerParameter layer = CAFFE__LAYER_PARAMETER__INIT, *layers[1] = {&layer};
  layer.name = "i";
  layer.n_blobs = 1;
  layer.blobs = blobs;
  Caffe__NetParameter model = CAFFE__NET_PARAMETER__INIT;
  model.n_layer = 1;
  model.layer = layers;
  ct_error err;
  assert_int_equal(ct_proto_write_binary(&model.base, path, &err), CT_OK);

  const char *text = INPUT "layer { name: 'i' type: 'InnerProduct' bottom: 'x' top: 'y'\n"
                           "  inner_product_param { num_output: 3 bias_term: false } }";
  ProtobufCMessage *m = NULL;
  assert_int_equal(ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), "t", &m, &err), CT_OK);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_net *net = NULL;
  ct_net_opts o = {.quiet = true};
  assert_int_equal(ct_net_init(&net, (Caffe__NetParameter *)m, &o, &ctx, &err), CT_OK);
  assert_int_equal(ct_net_copy_trained_file(net, path, &err), CT_ERR_INVALID);
  char want[9000];
  snprintf(want, sizeof want,
           "%s: cannot copy param 0 weights from layer 'i'; shape mismatch. Source param shape is 3 "
           "-500 (not a valid shape); target param shape is 3 192 (576). To learn this layer's "
           "parameters from scratch rather than copying from a saved net, rename the layer.",
           path);
  assert_string_equal(err.msg, want);
  assert_null(strstr(err.msg, "18446744073709551116"));
  ct_net_free(net);
  protobuf_c_message_free_unpacked(m, NULL);
  ct_context_free(&ctx);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  ct_log_set_level(CT_LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_convolution_limits),
      cmocka_unit_test(test_other_layer_limits),
      cmocka_unit_test(test_caffemodel_shape_message),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
