/* Binary proto files: reading, atomic writing, model info and errors. */
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "caffe.pb-c.h"
#include "core/fileio.h"
#include "proto/io.h"

static char *model_info_text(const char *path, ct_status *status, ct_error *err) {
  char *text = NULL;
  size_t size = 0;
  FILE *mem = open_memstream(&text, &size);
  assert_non_null(mem);
  *status = ct_model_info_print(path, mem, err);
  fclose(mem);
  return text;
}

static int count_dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

/* ------------------------------------------------------------ model info */

static void test_model_info_lenet(void **state) {
  ct_error err;
  ct_status s;
  char *text = model_info_text(tu_fixture("lenet_iter_10000.caffemodel"), &s, &err);
  assert_int_equal(s, CT_OK);
  assert_string_equal(text,
                      "mnist  Data\n"
                      "conv1  Convolution  20x1x5x5 20\n"
                      "pool1  Pooling\n"
                      "conv2  Convolution  50x20x5x5 50\n"
                      "pool2  Pooling\n"
                      "ip1  InnerProduct  500x800 500\n"
                      "relu1  ReLU\n"
                      "ip2  InnerProduct  10x500 10\n"
                      "loss  SoftmaxWithLoss\n");
  free(text);
}

/* A V1 net whose blobs use the legacy 4-D fields. */
static void test_model_info_v1_legacy_blobs(void **state) {
  const char *dir = tu_tmpdir("proto_io_v1");
  char path[4200];
  snprintf(path, sizeof path, "%s/v1.caffemodel", dir);

  Caffe__BlobProto w = CAFFE__BLOB_PROTO__INIT, b = CAFFE__BLOB_PROTO__INIT;
  float wdata[6] = {1, 2, 3, 4, 5, 6}, bdata[2] = {7, 8};
  w.has_num = w.has_channels = w.has_height = w.has_width = 1;
  w.num = 1, w.channels = 1, w.height = 2, w.width = 3;
  w.n_data = 6, w.data = wdata;
  b.has_width = 1, b.width = 2; /* only width set: the others count as 0 */
  b.n_data = 2, b.data = bdata;
  Caffe__BlobProto *blobs[] = {&w, &b};
  Caffe__V1LayerParameter ip = CAFFE__V1_LAYER_PARAMETER__INIT, relu = CAFFE__V1_LAYER_PARAMETER__INIT;
  ip.name = "fc";
  ip.has_type = 1, ip.type = CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__INNER_PRODUCT;
  ip.n_blobs = 2, ip.blobs = blobs;
  relu.name = "act";
  relu.has_type = 1, relu.type = CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__SOFTMAX_LOSS;
  Caffe__V1LayerParameter *layers[] = {&ip, &relu};
  Caffe__NetParameter net = CAFFE__NET_PARAMETER__INIT;
  net.n_layers = 2, net.layers = layers;

  ct_error err;
  assert_int_equal(ct_proto_write_binary(&net.base, path, &err), CT_OK);
  ct_status s;
  char *text = model_info_text(path, &s, &err);
  assert_int_equal(s, CT_OK);
  assert_string_equal(text, "fc  InnerProduct  1x1x2x3 0x0x0x2\nact  SoftmaxWithLoss\n");
  free(text);

  int64_t dims[4] = {0};
  assert_int_equal(ct_blob_proto_shape(&w, dims, 4), 4);
  assert_int_equal(dims[2], 2);
  assert_int_equal(dims[3], 3);
  assert_int_equal(ct_blob_proto_shape(&w, dims, 2), 4); /* too short: count still 4 */
  const int64_t two_by_three[] = {2, 3}, six[] = {6}, one_two_three[] = {1, 1, 2, 3};
  assert_true(ct_blob_proto_shape_matches(&w, two_by_three, 2));
  assert_true(ct_blob_proto_shape_matches(&w, one_two_three, 4));
  assert_false(ct_blob_proto_shape_matches(&w, six, 1));

  Caffe__BlobShape shape = CAFFE__BLOB_SHAPE__INIT;
  int64_t sdims[] = {20, 1, 5, 5};
  shape.n_dim = 4, shape.dim = sdims;
  Caffe__BlobProto nd = CAFFE__BLOB_PROTO__INIT;
  nd.shape = &shape;
  assert_int_equal(ct_blob_proto_shape(&nd, dims, 4), 4);
  assert_int_equal(dims[0], 20);
  assert_true(ct_blob_proto_shape_matches(&nd, sdims, 4));
  assert_false(ct_blob_proto_shape_matches(&nd, sdims, 3));
  Caffe__BlobProto scalar = CAFFE__BLOB_PROTO__INIT;
  assert_int_equal(ct_blob_proto_shape(&scalar, dims, 4), 0);
}

/* ------------------------------------------------------------ round trip */

static void test_round_trip_identical(void **state) {
  const char *src = tu_fixture("lenet_iter_10000.caffemodel");
  size_t len = 0;
  char *orig = tu_read_file(src, &len);
  assert_non_null(orig);

  ProtobufCMessage *msg = NULL;
  ct_error err;
  assert_int_equal(ct_proto_read_binary(&caffe__net_parameter__descriptor, src, &msg, &err), CT_OK);
  /* protobuf-c writes fields in number order, as Caffe's C++ writer did. */
  size_t packed_len = protobuf_c_message_get_packed_size(msg);
  assert_int_equal(packed_len, len);
  uint8_t *packed = malloc(packed_len);
  protobuf_c_message_pack(msg, packed);
  assert_memory_equal(packed, orig, len);
  free(packed);

  const char *dir = tu_tmpdir("proto_io_round_trip");
  char path[4200];
  snprintf(path, sizeof path, "%s/copy.caffemodel", dir);
  assert_int_equal(ct_proto_write_binary(msg, path, &err), CT_OK);
  /* Writing over an existing file replaces it. */
  assert_int_equal(ct_proto_write_binary(msg, path, &err), CT_OK);
  assert_int_equal(count_dir_entries(dir), 1); /* no temporary file left */

  size_t copy_len = 0;
  char *copy = tu_read_file(path, &copy_len);
  assert_int_equal(copy_len, len);
  assert_memory_equal(copy, orig, len);

  ProtobufCMessage *again = NULL;
  assert_int_equal(ct_proto_read_binary(&caffe__net_parameter__descriptor, path, &again, &err),
                   CT_OK);
  Caffe__NetParameter *a = (Caffe__NetParameter *)msg, *b = (Caffe__NetParameter *)again;
  assert_int_equal(a->n_layer, b->n_layer);
  for (size_t i = 0; i < a->n_layer; i++) {
    assert_int_equal(a->layer[i]->n_blobs, b->layer[i]->n_blobs);
    for (size_t j = 0; j < a->layer[i]->n_blobs; j++) {
      const Caffe__BlobProto *x = a->layer[i]->blobs[j], *y = b->layer[i]->blobs[j];
      assert_int_equal(x->n_data, y->n_data);
      assert_memory_equal(x->data, y->data, x->n_data * sizeof(float));
    }
  }
  protobuf_c_message_free_unpacked(again, NULL);
  protobuf_c_message_free_unpacked(msg, NULL);
  free(copy);
  free(orig);
}

static void test_atomic_write_file(void **state) {
  const char *dir = tu_tmpdir("proto_io_atomic");
  char path[4200];
  snprintf(path, sizeof path, "%s/f.bin", dir);
  ct_error err;
  assert_int_equal(ct_file_write_atomic(path, "old", 3, &err), CT_OK);
  assert_int_equal(ct_file_write_atomic(path, "newer", 5, &err), CT_OK);
  char *data = NULL;
  size_t len = 0;
  assert_int_equal(ct_file_read_all(path, &data, &len, 100, &err), CT_OK);
  assert_int_equal(len, 5);
  assert_string_equal(data, "newer"); /* NUL-terminated */
  free(data);
  assert_int_equal(count_dir_entries(dir), 1);
  assert_int_equal(ct_file_write_atomic(path, NULL, 0, &err), CT_OK);
  assert_int_equal(ct_file_read_all(path, &data, &len, 100, &err), CT_OK);
  assert_int_equal(len, 0);
  free(data);

  /* A missing folder: nothing is created, the error names the path. */
  char bad[4300];
  snprintf(bad, sizeof bad, "%s/no/such/f.bin", dir);
  assert_int_equal(ct_file_write_atomic(bad, "x", 1, &err), CT_ERR_IO);
  char want[4400];
  snprintf(want, sizeof want, "%s: create failed: No such file or directory", bad);
  assert_string_equal(err.msg, want);

  assert_int_equal(ct_file_read_all(path, &data, &len, 0, &err), CT_OK); /* empty fits 0 */
  free(data);
  assert_int_equal(ct_file_write_atomic(path, "12345", 5, &err), CT_OK);
  assert_int_equal(ct_file_read_all(path, &data, &len, 4, &err), CT_ERR_INVALID);
  assert_null(data);
  snprintf(want, sizeof want, "%s: file too large (5 bytes; the limit is 4 bytes)", path);
  assert_string_equal(err.msg, want);
}

/* ---------------------------------------------------------------- errors */

static void expect_read_error(const char *path, ct_status code, const char *suffix) {
  ProtobufCMessage *msg = (ProtobufCMessage *)1;
  ct_error err;
  assert_int_equal(ct_proto_read_binary(&caffe__net_parameter__descriptor, path, &msg, &err),
                   code);
  assert_null(msg);
  char want[4600];
  snprintf(want, sizeof want, "%s: %s", path, suffix);
  assert_string_equal(err.msg, want);
}

static void test_read_errors(void **state) {
  const char *dir = tu_tmpdir("proto_io_errors");
  char path[4200];

  snprintf(path, sizeof path, "%s/missing.caffemodel", dir);
  expect_read_error(path, CT_ERR_NOTFOUND, "cannot open: No such file or directory");

  expect_read_error(dir, CT_ERR_IO, "is a directory");

  snprintf(path, sizeof path, "%s/empty.caffemodel", dir);
  tu_write_file(path, "", 0);
  expect_read_error(path, CT_ERR_PARSE, "file is empty, expected a binary caffe.NetParameter");

  snprintf(path, sizeof path, "%s/garbage.caffemodel", dir);
  tu_write_file(path, "this is not a caffemodel\n", 25);
  expect_read_error(path, CT_ERR_PARSE,
                    "not a valid binary caffe.NetParameter (truncated or corrupt, 25 bytes)");

  /* The first 1000 bytes of a real model: cut inside a blob. */
  size_t len = 0;
  char *model = tu_read_file(tu_fixture("lenet_iter_10000.caffemodel"), &len);
  snprintf(path, sizeof path, "%s/truncated.caffemodel", dir);
  tu_write_file(path, model, 1000);
  free(model);
  expect_read_error(path, CT_ERR_PARSE,
                    "not a valid binary caffe.NetParameter (truncated or corrupt, 1000 bytes)");

  /* Bytes that decode, but only into fields NetParameter does not have
   * (field 9, varint 1). */
  snprintf(path, sizeof path, "%s/foreign.bin", dir);
  tu_write_file(path, "\x48\x01", 2);
  expect_read_error(path, CT_ERR_PARSE,
                    "no caffe.NetParameter fields in 2 bytes (a text prototxt, or another kind "
                    "of file?)");

  /* A sparse file just over the limit is refused before it is read. */
  snprintf(path, sizeof path, "%s/huge.caffemodel", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)2147483648LL), 0);
  close(fd);
  expect_read_error(path, CT_ERR_INVALID,
                    "file too large (2147483648 bytes; the limit is 2147483647 bytes)");
  unlink(path);
}

static void test_read_other_types(void **state) {
  /* A SolverState round trip through the generic reader/writer. */
  const char *dir = tu_tmpdir("proto_io_state");
  char path[4200];
  snprintf(path, sizeof path, "%s/s.solverstate", dir);
  Caffe__SolverState st = CAFFE__SOLVER_STATE__INIT;
  st.has_iter = 1, st.iter = 1234;
  st.learned_net = "x_iter_1234.caffemodel";
  ct_error err;
  assert_int_equal(ct_proto_write_binary(&st.base, path, &err), CT_OK);
  ProtobufCMessage *msg = NULL;
  assert_int_equal(ct_proto_read_binary(&caffe__solver_state__descriptor, path, &msg, &err), CT_OK);
  Caffe__SolverState *back = (Caffe__SolverState *)msg;
  assert_int_equal(back->iter, 1234);
  assert_string_equal(back->learned_net, "x_iter_1234.caffemodel");
  protobuf_c_message_free_unpacked(msg, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_model_info_lenet),   cmocka_unit_test(test_model_info_v1_legacy_blobs),
      cmocka_unit_test(test_round_trip_identical), cmocka_unit_test(test_atomic_write_file),
      cmocka_unit_test(test_read_errors),        cmocka_unit_test(test_read_other_types),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
