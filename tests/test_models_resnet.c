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

/* Caffe2's trainer: (x - 128) / 128 on every channel, accuracy in TRAIN too,
 * and no top-5 accuracy for 5 labels or fewer. */
static void test_caffe2_options(void **state) {
  ct_resnet_opts o = reference_opts();
  o.num_channels = 1;
  o.num_labels = 4;
  o.image_size = 32;
  o.caffe2_input = true;
  o.train_accuracy = true;
  Caffe__NetParameter *net;
  ct_error err;
  assert_int_equal(ct_resnet_net(&o, &net, &err), CT_OK);
  const Caffe__LayerParameter *data = net->layer[0];
  assert_string_equal(data->type, "Data");
  assert_true(data->transform_param->scale == 0.0078125f);
  assert_int_equal(data->transform_param->n_mean_value, 1);
  assert_true(data->transform_param->mean_value[0] == 128.0f);
  assert_int_equal(data->transform_param->crop_size, 32);
  int convs = 0, bns = 0, accuracies = 0;
  const Caffe__LayerParameter *fc = NULL;
  for (size_t i = 0; i < net->n_layer; i++) {
    const Caffe__LayerParameter *l = net->layer[i];
    convs += strcmp(l->type, "Convolution") == 0;
    bns += strcmp(l->type, "BatchNorm") == 0;
    if (strcmp(l->type, "InnerProduct") == 0) fc = l;
    if (strcmp(l->type, "Accuracy") == 0) {
      accuracies++;
      assert_string_equal(l->name, "accuracy");
      assert_int_equal(l->n_include, 0);
    }
  }
  assert_int_equal(convs, 53);
  assert_int_equal(bns, 53);
  assert_int_equal(accuracies, 1);
  assert_non_null(fc);
  assert_int_equal(fc->inner_product_param->num_output, 4);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_committed_prototxt_matches_builder),
                                     cmocka_unit_test(test_bad_depth),
                                     cmocka_unit_test(test_caffe2_options)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
