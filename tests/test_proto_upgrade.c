/* Upgrading V0 and V1 nets and old solvers, as BVLC Caffe does. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "caffe.pb-c.h"
#include "proto/io.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"

/* ------------------------------------------------------------- helpers */

/* Test messages are built on the stack; upgrades need heap trees like
 * unpack makes, so each goes through the wire format. */
static ProtobufCMessage *heap_copy(const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(len ? len : 1);
  protobuf_c_message_pack(m, buf);
  ProtobufCMessage *copy = protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
  free(buf);
  assert_non_null(copy);
  return copy;
}

static uint8_t *packed(const ProtobufCMessage *m, size_t *len) {
  *len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(*len ? *len : 1);
  protobuf_c_message_pack(m, buf);
  return buf;
}

/* Upgrading again changes nothing, byte for byte. */
static void assert_upgrade_is_stable(Caffe__NetParameter *net) {
  size_t before_len, after_len;
  uint8_t *before = packed(&net->base, &before_len);
  bool changed = true;
  ct_error err;
  assert_int_equal(ct_net_upgrade(net, &changed, "again", &err), CT_OK);
  assert_false(changed);
  uint8_t *after = packed(&net->base, &after_len);
  assert_int_equal(before_len, after_len);
  assert_memory_equal(before, after, before_len);
  free(before);
  free(after);
}

static void assert_strings(char **got, size_t n_got, const char *a, const char *b) {
  assert_int_equal(n_got, b ? 2 : 1);
  assert_string_equal(got[0], a);
  if (b) assert_string_equal(got[1], b);
}

/* ---------------------------------------------------------------- V1 */

static void test_v1_net(void **state) {
  float w[3] = {1, 2, 3};
  Caffe__BlobProto blob = CAFFE__BLOB_PROTO__INIT;
  blob.n_data = 3, blob.data = w;
  blob.has_width = 1, blob.width = 3;
  Caffe__BlobProto *blobs[] = {&blob};

  Caffe__NetStateRule train = CAFFE__NET_STATE_RULE__INIT;
  train.has_phase = 1, train.phase = CAFFE__PHASE__TRAIN;
  Caffe__NetStateRule *include[] = {&train};
  Caffe__DataParameter dp = CAFFE__DATA_PARAMETER__INIT;
  dp.source = "db";
  dp.has_batch_size = 1, dp.batch_size = 64;
  dp.has_scale = 1, dp.scale = 0.00390625f;
  dp.has_mirror = 1, dp.mirror = 1;
  char *data_tops[] = {"data", "label"};
  Caffe__V1LayerParameter data = CAFFE__V1_LAYER_PARAMETER__INIT;
  data.name = "mnist";
  data.has_type = 1, data.type = CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__DATA;
  data.n_top = 2, data.top = data_tops;
  data.data_param = &dp;
  data.n_include = 1, data.include = include;

  Caffe__ConvolutionParameter cp = CAFFE__CONVOLUTION_PARAMETER__INIT;
  uint32_t kernel[] = {5};
  cp.has_num_output = 1, cp.num_output = 20;
  cp.n_kernel_size = 1, cp.kernel_size = kernel;
  char *conv_bottom[] = {"data"}, *conv_top[] = {"conv1"}, *names[] = {"w", "b"};
  float lr[] = {1, 2}, decay[] = {1, 0};
  Caffe__V1LayerParameter__DimCheckMode share[] = {CAFFE__V1_LAYER_PARAMETER__DIM_CHECK_MODE__PERMISSIVE};
  Caffe__V1LayerParameter conv = CAFFE__V1_LAYER_PARAMETER__INIT;
  conv.name = "conv1";
  conv.has_type = 1, conv.type = CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__CONVOLUTION;
  conv.n_bottom = 1, conv.bottom = conv_bottom;
  conv.n_top = 1, conv.top = conv_top;
  conv.n_param = 2, conv.param = names;
  conv.n_blob_share_mode = 1, conv.blob_share_mode = share;
  conv.n_blobs_lr = 2, conv.blobs_lr = lr;
  conv.n_weight_decay = 2, conv.weight_decay = decay;
  conv.convolution_param = &cp;
  conv.n_blobs = 1, conv.blobs = blobs;

  Caffe__LossParameter lp = CAFFE__LOSS_PARAMETER__INIT;
  lp.has_ignore_label = 1, lp.ignore_label = 3;
  char *loss_bottom[] = {"conv1", "label"}, *loss_top[] = {"loss"};
  float loss_weight[] = {2};
  Caffe__V1LayerParameter loss = CAFFE__V1_LAYER_PARAMETER__INIT;
  loss.name = "loss";
  loss.has_type = 1, loss.type = CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__SOFTMAX_LOSS;
  loss.n_bottom = 2, loss.bottom = loss_bottom;
  loss.n_top = 1, loss.top = loss_top;
  loss.n_loss_weight = 1, loss.loss_weight = loss_weight;
  loss.loss_param = &lp;

  Caffe__V1LayerParameter *layers[] = {&data, &conv, &loss};
  char *inputs[] = {"extra"};
  int32_t dims[] = {1, 2, 3, 4};
  Caffe__NetParameter v1 = CAFFE__NET_PARAMETER__INIT;
  v1.name = "old";
  v1.n_layers = 3, v1.layers = layers;
  v1.n_input = 1, v1.input = inputs;
  v1.n_input_dim = 4, v1.input_dim = dims;

  Caffe__NetParameter *net = (Caffe__NetParameter *)heap_copy(&v1.base);
  bool changed = false;
  ct_error err;
  assert_int_equal(ct_net_upgrade(net, &changed, "v1.prototxt", &err), CT_OK);
  assert_true(changed);
  assert_string_equal(net->name, "old");
  assert_int_equal(net->n_layers, 0);
  assert_int_equal(net->n_input, 0);
  assert_int_equal(net->n_input_dim, 0);
  assert_int_equal(net->n_layer, 4);

  const Caffe__LayerParameter *in = net->layer[0];
  assert_string_equal(in->name, "input");
  assert_string_equal(in->type, "Input");
  assert_strings(in->top, in->n_top, "extra", NULL);
  assert_int_equal(in->input_param->n_shape, 1);
  assert_int_equal(in->input_param->shape[0]->n_dim, 4);
  assert_int_equal(in->input_param->shape[0]->dim[0], 1);
  assert_int_equal(in->input_param->shape[0]->dim[3], 4);

  const Caffe__LayerParameter *d = net->layer[1];
  assert_string_equal(d->name, "mnist");
  assert_string_equal(d->type, "Data");
  assert_strings(d->top, d->n_top, "data", "label");
  assert_int_equal(d->n_include, 1);
  assert_int_equal(d->include[0]->phase, CAFFE__PHASE__TRAIN);
  assert_string_equal(d->data_param->source, "db");
  assert_int_equal(d->data_param->batch_size, 64);
  assert_false(d->data_param->has_scale);
  assert_false(d->data_param->has_mirror);
  assert_non_null(d->transform_param);
  assert_true(d->transform_param->has_scale);
  assert_float_equal(d->transform_param->scale, 0.00390625f, 0.0f);
  assert_true(d->transform_param->mirror);
  assert_false(d->transform_param->has_crop_size);

  const Caffe__LayerParameter *c = net->layer[2];
  assert_string_equal(c->type, "Convolution");
  assert_strings(c->bottom, c->n_bottom, "data", NULL);
  assert_int_equal(c->convolution_param->num_output, 20);
  assert_int_equal(c->convolution_param->kernel_size[0], 5);
  assert_int_equal(c->n_param, 2);
  assert_string_equal(c->param[0]->name, "w");
  assert_true(c->param[0]->has_share_mode);
  assert_int_equal(c->param[0]->share_mode, CAFFE__PARAM_SPEC__DIM_CHECK_MODE__PERMISSIVE);
  assert_float_equal(c->param[0]->lr_mult, 1.0f, 0.0f);
  assert_float_equal(c->param[0]->decay_mult, 1.0f, 0.0f);
  assert_string_equal(c->param[1]->name, "b");
  assert_false(c->param[1]->has_share_mode);
  assert_true(c->param[1]->has_lr_mult);
  assert_float_equal(c->param[1]->lr_mult, 2.0f, 0.0f);
  assert_true(c->param[1]->has_decay_mult);
  assert_float_equal(c->param[1]->decay_mult, 0.0f, 0.0f);
  assert_int_equal(c->n_blobs, 1);
  assert_int_equal(c->blobs[0]->width, 3);
  assert_float_equal(c->blobs[0]->data[2], 3.0f, 0.0f);

  const Caffe__LayerParameter *l = net->layer[3];
  assert_string_equal(l->type, "SoftmaxWithLoss");
  assert_strings(l->bottom, l->n_bottom, "conv1", "label");
  assert_int_equal(l->n_loss_weight, 1);
  assert_float_equal(l->loss_weight[0], 2.0f, 0.0f);
  assert_int_equal(l->loss_param->ignore_label, 3);

  assert_upgrade_is_stable(net);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* ---------------------------------------------------------------- V0 */

static Caffe__V1LayerParameter v0_entry(Caffe__V0LayerParameter *v0, char **bottom, size_t n_bottom,
                                        char **top, size_t n_top) {
  Caffe__V1LayerParameter e = CAFFE__V1_LAYER_PARAMETER__INIT;
  e.layer = v0;
  e.bottom = bottom, e.n_bottom = n_bottom;
  e.top = top, e.n_top = n_top;
  return e;
}

static void test_v0_net(void **state) {
  Caffe__V0LayerParameter pad = CAFFE__V0_LAYER_PARAMETER__INIT;
  pad.name = "pad1", pad.type = "padding";
  pad.has_pad = 1, pad.pad = 2;
  Caffe__FillerParameter gauss = CAFFE__FILLER_PARAMETER__INIT;
  gauss.type = "gaussian";
  gauss.has_std = 1, gauss.std = 0.01f;
  float lr[] = {1, 2}, decay[] = {1, 0};
  Caffe__V0LayerParameter conv = CAFFE__V0_LAYER_PARAMETER__INIT;
  conv.name = "conv1", conv.type = "conv";
  conv.has_num_output = 1, conv.num_output = 96;
  conv.has_kernelsize = 1, conv.kernelsize = 11;
  conv.has_stride = 1, conv.stride = 4;
  conv.weight_filler = &gauss;
  conv.n_blobs_lr = 2, conv.blobs_lr = lr;
  conv.n_weight_decay = 2, conv.weight_decay = decay;
  Caffe__V0LayerParameter pool = CAFFE__V0_LAYER_PARAMETER__INIT;
  pool.name = "pool1", pool.type = "pool";
  pool.has_pool = 1, pool.pool = CAFFE__V0_LAYER_PARAMETER__POOL_METHOD__AVE;
  pool.has_kernelsize = 1, pool.kernelsize = 3;
  pool.has_stride = 1, pool.stride = 2;
  Caffe__V0LayerParameter drop = CAFFE__V0_LAYER_PARAMETER__INIT;
  drop.name = "drop", drop.type = "dropout";
  drop.has_dropout_ratio = 1, drop.dropout_ratio = 0.4f;
  drop.has_num_output = 1, drop.num_output = 5; /* does not apply: dropped */
  Caffe__V0LayerParameter data = CAFFE__V0_LAYER_PARAMETER__INIT;
  data.name = "data2", data.type = "data";
  data.source = "x", data.meanfile = "m";
  data.has_batchsize = 1, data.batchsize = 32;
  data.has_cropsize = 1, data.cropsize = 227;
  data.has_mirror = 1, data.mirror = 1;
  data.has_scale = 1, data.scale = 2.0f;

  char *b_data[] = {"data"}, *t_pad[] = {"pad1"}, *t_conv[] = {"conv1"}, *t_pool[] = {"pool1"},
       *t_data2[] = {"d2", "l2"};
  Caffe__V1LayerParameter e_pad = v0_entry(&pad, b_data, 1, t_pad, 1);
  Caffe__V1LayerParameter e_conv = v0_entry(&conv, t_pad, 1, t_conv, 1);
  Caffe__V1LayerParameter e_pool = v0_entry(&pool, t_conv, 1, t_pool, 1);
  Caffe__V1LayerParameter e_drop = v0_entry(&drop, t_pool, 1, t_pool, 1);
  Caffe__V1LayerParameter e_data = v0_entry(&data, NULL, 0, t_data2, 2);
  Caffe__V1LayerParameter *layers[] = {&e_pad, &e_conv, &e_pool, &e_drop, &e_data};
  char *inputs[] = {"data"};
  int32_t dims[] = {10, 3, 227, 227};
  Caffe__NetParameter v0 = CAFFE__NET_PARAMETER__INIT;
  v0.n_layers = 5, v0.layers = layers;
  v0.n_input = 1, v0.input = inputs;
  v0.n_input_dim = 4, v0.input_dim = dims;

  Caffe__NetParameter *net = (Caffe__NetParameter *)heap_copy(&v0.base);
  bool changed = false;
  ct_error err;
  assert_int_equal(ct_net_upgrade(net, &changed, "v0.prototxt", &err), CT_OK);
  assert_true(changed);
  assert_int_equal(net->n_layers, 0);
  assert_int_equal(net->n_layer, 5); /* Input + 4: the padding layer is gone */

  assert_string_equal(net->layer[0]->type, "Input");
  assert_int_equal(net->layer[0]->input_param->shape[0]->dim[2], 227);

  const Caffe__LayerParameter *c = net->layer[1];
  assert_string_equal(c->name, "conv1");
  assert_string_equal(c->type, "Convolution");
  assert_strings(c->bottom, c->n_bottom, "data", NULL); /* reads the padding's input */
  const Caffe__ConvolutionParameter *cp = c->convolution_param;
  assert_int_equal(cp->num_output, 96);
  assert_int_equal(cp->n_pad, 1);
  assert_int_equal(cp->pad[0], 2);
  assert_int_equal(cp->n_kernel_size, 1);
  assert_int_equal(cp->kernel_size[0], 11);
  assert_int_equal(cp->n_stride, 1);
  assert_int_equal(cp->stride[0], 4);
  assert_string_equal(cp->weight_filler->type, "gaussian");
  assert_float_equal(cp->weight_filler->std, 0.01f, 0.0f);
  assert_int_equal(c->n_param, 2);
  assert_float_equal(c->param[1]->lr_mult, 2.0f, 0.0f);
  assert_float_equal(c->param[1]->decay_mult, 0.0f, 0.0f);
  assert_null(c->transform_param);

  const Caffe__LayerParameter *p = net->layer[2];
  assert_string_equal(p->type, "Pooling");
  assert_int_equal(p->pooling_param->pool, CAFFE__POOLING_PARAMETER__POOL_METHOD__AVE);
  assert_int_equal(p->pooling_param->kernel_size, 3);
  assert_int_equal(p->pooling_param->stride, 2);
  assert_false(p->pooling_param->has_pad);

  const Caffe__LayerParameter *dr = net->layer[3];
  assert_string_equal(dr->type, "Dropout");
  assert_float_equal(dr->dropout_param->dropout_ratio, 0.4f, 0.0f);
  assert_null(dr->inner_product_param);
  assert_null(dr->convolution_param);

  const Caffe__LayerParameter *d = net->layer[4];
  assert_string_equal(d->type, "Data");
  assert_string_equal(d->data_param->source, "x");
  assert_int_equal(d->data_param->batch_size, 32);
  assert_int_equal(d->transform_param->crop_size, 227);
  assert_true(d->transform_param->mirror);
  assert_string_equal(d->transform_param->mean_file, "m");
  assert_float_equal(d->transform_param->scale, 2.0f, 0.0f);

  assert_upgrade_is_stable(net);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* ------------------------------------------------------- current nets */

static void test_v2_net_unchanged(void **state) {
  ProtobufCMessage *msg = NULL;
  ct_error err;
  assert_int_equal(ct_proto_read_binary(&caffe__net_parameter__descriptor,
                                        tu_fixture("lenet_iter_10000.caffemodel"), &msg, &err),
                   CT_OK);
  assert_upgrade_is_stable((Caffe__NetParameter *)msg);
  protobuf_c_message_free_unpacked(msg, NULL);
}

static void test_batch_norm_params(void **state) {
  Caffe__ParamSpec s0 = CAFFE__PARAM_SPEC__INIT, s1 = CAFFE__PARAM_SPEC__INIT,
                   s2 = CAFFE__PARAM_SPEC__INIT;
  s0.has_lr_mult = 1, s0.lr_mult = 0; /* decay_mult unset */
  s1.has_lr_mult = 1, s1.lr_mult = 1;
  s1.name = "shared";
  Caffe__ParamSpec *specs[] = {&s0, &s1, &s2};
  Caffe__LayerParameter bn = CAFFE__LAYER_PARAMETER__INIT;
  bn.name = "bn", bn.type = "BatchNorm";
  bn.n_param = 3, bn.param = specs;
  Caffe__LayerParameter two = bn; /* two specs: left alone */
  two.name = "bn2", two.n_param = 2;
  Caffe__LayerParameter *layers[] = {&bn, &two};
  Caffe__NetParameter src = CAFFE__NET_PARAMETER__INIT;
  src.n_layer = 2, src.layer = layers;

  Caffe__NetParameter *net = (Caffe__NetParameter *)heap_copy(&src.base);
  bool changed = false;
  ct_error err;
  assert_int_equal(ct_net_upgrade(net, &changed, NULL, &err), CT_OK);
  assert_true(changed);
  for (int i = 0; i < 3; i++) {
    assert_true(net->layer[0]->param[i]->has_lr_mult);
    assert_float_equal(net->layer[0]->param[i]->lr_mult, 0.0f, 0.0f);
    assert_true(net->layer[0]->param[i]->has_decay_mult);
    assert_float_equal(net->layer[0]->param[i]->decay_mult, 0.0f, 0.0f);
  }
  assert_string_equal(net->layer[0]->param[1]->name, "shared");
  assert_float_equal(net->layer[1]->param[1]->lr_mult, 1.0f, 0.0f);
  assert_false(net->layer[1]->param[0]->has_decay_mult);
  assert_upgrade_is_stable(net);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_input_shape_to_layer(void **state) {
  Caffe__LayerParameter relu = CAFFE__LAYER_PARAMETER__INIT;
  char *b[] = {"a"};
  relu.name = "r", relu.type = "ReLU";
  relu.n_bottom = 1, relu.bottom = b;
  relu.n_top = 1, relu.top = b;
  Caffe__LayerParameter *layers[] = {&relu};
  int64_t d0[] = {2, 5}, d1[] = {7};
  Caffe__BlobShape s0 = CAFFE__BLOB_SHAPE__INIT, s1 = CAFFE__BLOB_SHAPE__INIT;
  s0.n_dim = 2, s0.dim = d0;
  s1.n_dim = 1, s1.dim = d1;
  Caffe__BlobShape *shapes[] = {&s0, &s1};
  char *inputs[] = {"a", "b"};
  Caffe__NetParameter src = CAFFE__NET_PARAMETER__INIT;
  src.n_layer = 1, src.layer = layers;
  src.n_input = 2, src.input = inputs;
  src.n_input_shape = 2, src.input_shape = shapes;

  Caffe__NetParameter *net = (Caffe__NetParameter *)heap_copy(&src.base);
  bool changed = false;
  ct_error err;
  assert_int_equal(ct_net_upgrade(net, &changed, "deploy", &err), CT_OK);
  assert_true(changed);
  assert_int_equal(net->n_layer, 2);
  assert_int_equal(net->n_input_shape, 0);
  const Caffe__LayerParameter *in = net->layer[0];
  assert_strings(in->top, in->n_top, "a", "b");
  assert_int_equal(in->input_param->shape[0]->dim[1], 5);
  assert_int_equal(in->input_param->shape[1]->dim[0], 7);
  assert_string_equal(net->layer[1]->name, "r");
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

/* -------------------------------------------------------------- errors */

static void expect_net_error(const ProtobufCMessage *src, const char *want) {
  Caffe__NetParameter *net = (Caffe__NetParameter *)heap_copy(src);
  size_t before_len, after_len;
  uint8_t *before = packed(&net->base, &before_len);
  ct_error err;
  bool changed = true;
  assert_int_equal(ct_net_upgrade(net, &changed, "bad.prototxt", &err), CT_ERR_INVALID);
  assert_false(changed);
  assert_string_equal(err.msg, want);
  uint8_t *after = packed(&net->base, &after_len); /* left unmodified */
  assert_int_equal(before_len, after_len);
  assert_memory_equal(before, after, before_len);
  free(before);
  free(after);
  protobuf_c_message_free_unpacked(&net->base, NULL);
}

static void test_net_errors(void **state) {
  Caffe__LayerParameter v2 = CAFFE__LAYER_PARAMETER__INIT;
  v2.name = "x", v2.type = "ReLU";
  Caffe__LayerParameter *v2s[] = {&v2};
  Caffe__V1LayerParameter v1 = CAFFE__V1_LAYER_PARAMETER__INIT;
  v1.name = "y";
  v1.has_type = 1, v1.type = CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__RELU;
  Caffe__V1LayerParameter *v1s[] = {&v1};
  Caffe__NetParameter both = CAFFE__NET_PARAMETER__INIT;
  both.n_layer = 1, both.layer = v2s;
  both.n_layers = 1, both.layers = v1s;
  expect_net_error(&both.base,
                   "bad.prototxt: the net has both 'layer' and 'layers' entries (1 and 1); "
                   "'layers' is the old V1 format and cannot be mixed with 'layer'");

  Caffe__V1LayerParameter bad_type = v1;
  bad_type.type = (Caffe__V1LayerParameter__LayerType)99;
  Caffe__V1LayerParameter *bad_types[] = {&v1, &bad_type};
  Caffe__NetParameter unknown_v1 = CAFFE__NET_PARAMETER__INIT;
  unknown_v1.n_layers = 2, unknown_v1.layers = bad_types;
  expect_net_error(&unknown_v1.base, "bad.prototxt: layers[1] ('y'): unknown V1 layer type 99");

  Caffe__V0LayerParameter conv = CAFFE__V0_LAYER_PARAMETER__INIT;
  conv.name = "c", conv.type = "convolution";
  char *in[] = {"data"}, *out[] = {"c"}, *other[] = {"nowhere"};
  Caffe__V1LayerParameter e_conv = v0_entry(&conv, in, 1, out, 1);
  Caffe__V1LayerParameter *mixed_layers[] = {&e_conv, &v1};
  Caffe__NetParameter mixed = CAFFE__NET_PARAMETER__INIT;
  mixed.n_layers = 2, mixed.layers = mixed_layers;
  expect_net_error(&mixed.base,
                   "bad.prototxt: 1 of the 2 'layers' entries are V0 (with a nested 'layer') "
                   "and the others V1; a net must use one format");

  char *inputs[] = {"data"};
  Caffe__V1LayerParameter *one_conv[] = {&e_conv};
  Caffe__NetParameter unknown_v0 = CAFFE__NET_PARAMETER__INIT;
  unknown_v0.n_layers = 1, unknown_v0.layers = one_conv;
  unknown_v0.n_input = 1, unknown_v0.input = inputs;
  expect_net_error(&unknown_v0.base,
                   "bad.prototxt: layers[0] ('c'): unknown V0 layer type \"convolution\"");

  conv.type = "conv";
  e_conv.bottom = other;
  expect_net_error(&unknown_v0.base,
                   "bad.prototxt: layers[0] ('c'): bottom 'nowhere' is neither a net input nor "
                   "the top of an earlier layer");

  Caffe__V0LayerParameter pad = CAFFE__V0_LAYER_PARAMETER__INIT, relu = CAFFE__V0_LAYER_PARAMETER__INIT;
  pad.name = "p", pad.type = "padding";
  relu.name = "r", relu.type = "relu";
  char *padded[] = {"padded"};
  Caffe__V1LayerParameter e_pad = v0_entry(&pad, in, 1, padded, 1);
  Caffe__V1LayerParameter e_relu = v0_entry(&relu, padded, 1, padded, 1);
  Caffe__V1LayerParameter *pad_relu[] = {&e_pad, &e_relu};
  Caffe__NetParameter bad_pad = CAFFE__NET_PARAMETER__INIT;
  bad_pad.n_layers = 2, bad_pad.layers = pad_relu;
  bad_pad.n_input = 1, bad_pad.input = inputs;
  expect_net_error(&bad_pad.base,
                   "bad.prototxt: layers[1] ('r'): padding layer 'p' feeds a layer of type "
                   "\"relu\"; only conv and pool layers can absorb padding");

  int32_t dims[] = {1, 2, 3};
  Caffe__NetParameter bad_dims = CAFFE__NET_PARAMETER__INIT;
  bad_dims.n_input = 1, bad_dims.input = inputs;
  bad_dims.n_input_dim = 3, bad_dims.input_dim = dims;
  expect_net_error(&bad_dims.base,
                   "bad.prototxt: 1 'input' entries need 4 'input_dim' values (4 each), not 3");
}

/* -------------------------------------------------------------- solver */

static Caffe__SolverParameter *solver_with(bool enum_set, int solver_type, const char *type) {
  Caffe__SolverParameter s = CAFFE__SOLVER_PARAMETER__INIT;
  s.has_base_lr = 1, s.base_lr = 0.01f;
  if (enum_set) {
    s.has_solver_type = 1;
    s.solver_type = (Caffe__SolverParameter__SolverType)solver_type;
  }
  if (type) s.type = (char *)type;
  return (Caffe__SolverParameter *)heap_copy(&s.base);
}

static void test_solver_upgrade(void **state) {
  ct_error err;
  bool changed = false;
  Caffe__SolverParameter *s = solver_with(true, CAFFE__SOLVER_PARAMETER__SOLVER_TYPE__ADAM, NULL);
  assert_int_equal(ct_solver_upgrade(s, &changed, "solver.prototxt", &err), CT_OK);
  assert_true(changed);
  assert_string_equal(s->type, "Adam");
  assert_false(s->has_solver_type);
  size_t len;
  uint8_t *bytes = packed(&s->base, &len);
  /* base_lr (5) then type (40) "Adam"; no solver_type (30) left. */
  const uint8_t want[] = {0x2D, 0x0A, 0xD7, 0x23, 0x3C, 0xC2, 0x02, 0x04, 'A', 'd', 'a', 'm'};
  assert_int_equal(len, sizeof want);
  assert_memory_equal(bytes, want, sizeof want);
  free(bytes);
  assert_int_equal(ct_solver_upgrade(s, &changed, "solver.prototxt", &err), CT_OK);
  assert_false(changed);
  protobuf_c_message_free_unpacked(&s->base, NULL);

  s = solver_with(true, CAFFE__SOLVER_PARAMETER__SOLVER_TYPE__NESTEROV, "Nesterov");
  assert_int_equal(ct_solver_upgrade(s, &changed, "solver.prototxt", &err), CT_OK);
  assert_true(changed);
  assert_string_equal(s->type, "Nesterov");
  assert_false(s->has_solver_type);
  protobuf_c_message_free_unpacked(&s->base, NULL);

  s = solver_with(true, CAFFE__SOLVER_PARAMETER__SOLVER_TYPE__ADAM, "SGD");
  assert_int_equal(ct_solver_upgrade(s, &changed, "solver.prototxt", &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "solver.prototxt: solver_type: ADAM disagrees with type: \"SGD\"; remove "
                      "solver_type");
  assert_true(s->has_solver_type);
  assert_string_equal(s->type, "SGD");
  protobuf_c_message_free_unpacked(&s->base, NULL);

  s = solver_with(true, 17, NULL);
  assert_int_equal(ct_solver_upgrade(s, &changed, "solver.prototxt", &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "solver.prototxt: unknown solver_type 17");
  protobuf_c_message_free_unpacked(&s->base, NULL);

  s = solver_with(false, 0, "RMSProp");
  assert_int_equal(ct_solver_upgrade(s, &changed, "solver.prototxt", &err), CT_OK);
  assert_false(changed);
  assert_string_equal(s->type, "RMSProp");
  protobuf_c_message_free_unpacked(&s->base, NULL);
}

/* Inline V1 nets (Caffe's lenet_consolidated_solver.prototxt) are upgraded
 * as net files are; their errors name the solver file and the field. */
static Caffe__SolverParameter *parse_solver(const char *text) {
  ProtobufCMessage *m;
  ct_error err;
  assert_int_equal(ct_text_parse(&caffe__solver_parameter__descriptor, text, strlen(text), "s.prototxt", &m, &err),
                   CT_OK);
  return (Caffe__SolverParameter *)m;
}

static void test_solver_inline_nets(void **state) {
  Caffe__SolverParameter *s = parse_solver(
      "net_param { name: 'n' layers { name: 'ip' type: INNER_PRODUCT bottom: 'x' top: 'y' blobs_lr: 2 } }\n"
      "test_net_param { layers { name: 'r' type: RELU bottom: 'y' top: 'y' } }\n");
  bool changed = false;
  ct_error err;
  assert_int_equal(ct_solver_upgrade(s, &changed, "s.prototxt", &err), CT_OK);
  assert_true(changed);
  assert_int_equal(s->net_param->n_layers, 0);
  assert_int_equal(s->net_param->n_layer, 1);
  assert_string_equal(s->net_param->layer[0]->type, "InnerProduct");
  assert_int_equal(s->net_param->layer[0]->n_param, 1);
  assert_true(s->net_param->layer[0]->param[0]->lr_mult == 2.0f);
  assert_string_equal(s->test_net_param[0]->layer[0]->type, "ReLU");
  assert_int_equal(ct_solver_upgrade(s, &changed, "s.prototxt", &err), CT_OK);
  assert_false(changed);
  protobuf_c_message_free_unpacked(&s->base, NULL);

  s = parse_solver("test_net_param { layers { name: 'r' type: RELU } }\n"
                   "test_net_param { layers { layer { name: 'a' type: 'relu' } } layers { name: 'b' type: RELU } }\n");
  assert_int_equal(ct_solver_upgrade(s, &changed, "s.prototxt", &err), CT_ERR_INVALID);
  assert_non_null(strstr(err.msg, "s.prototxt: test_net_param[1]: 1 of the 2 'layers' entries are V0"));
  protobuf_c_message_free_unpacked(&s->base, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_solver_inline_nets),
      cmocka_unit_test(test_v1_net),           cmocka_unit_test(test_v0_net),
      cmocka_unit_test(test_v2_net_unchanged), cmocka_unit_test(test_batch_norm_params),
      cmocka_unit_test(test_input_shape_to_layer), cmocka_unit_test(test_net_errors),
      cmocka_unit_test(test_solver_upgrade),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
