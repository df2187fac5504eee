/* ResNet-50 in Caffe's form: the builder's net and the committed
 * models/resnet50/train_val.prototxt are the same net, and it has the
 * published structure (53 convolutions, 16 shortcuts, 25.6 M parameters). */
#include "testutil.h"

#include "models/resnet.h"
#include "net/net_load.h"
#include "proto/textformat.h"

static ct_resnet_opts reference_opts(void) {
  ct_resnet_opts o = {.depth = 50, .num_labels = 1000, .num_channels = 3, .image_size = 224,
                      .batch_size = 128, .test_batch_size = 50,
                      .train_source = "examples/imagenet/ilsvrc12_train_lmdb",
                      .test_source = "examples/imagenet/ilsvrc12_val_lmdb", .backend = "LMDB"};
  return o;
}

static void test_committed_prototxt_matches_builder(void **state) {
  ct_resnet_opts o = reference_opts();
  Caffe__NetParameter *built, *file;
  ct_error err;
  assert_int_equal(ct_resnet_net(&o, &built, &err), CT_OK);
  if (ct_net_param_read(tu_src("models/resnet50/train_val.prototxt"), &file, &err) != CT_OK)
    fail_msg("%s", err.msg);
  char *a = ct_text_print(&built->base), *b = ct_text_print(&file->base);
  assert_string_equal(a, b);
  free(a);
  free(b);
  int convs = 0, eltwise = 0;
  for (size_t i = 0; i < built->n_layer; i++) {
    convs += strcmp(built->layer[i]->type, "Convolution") == 0;
    eltwise += strcmp(built->layer[i]->type, "Eltwise") == 0;
  }
  assert_int_equal(convs, 53);
  assert_int_equal(eltwise, 16);
  protobuf_c_message_free_unpacked(&built->base, NULL);
  protobuf_c_message_free_unpacked(&file->base, NULL);
}

static void test_bad_depth(void **state) {
  ct_resnet_opts o = reference_opts();
  o.depth = 34;
  char *text;
  ct_error err;
  assert_int_equal(ct_resnet_prototxt(&o, &text, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "ResNet depth 34 is not one of 50, 101, 152");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_committed_prototxt_matches_builder),
                                     cmocka_unit_test(test_bad_depth)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
