/* The Caffe schema: a real BVLC caffemodel decodes, and field numbers, types,
 * labels, defaults and enum values are those of BVLC Caffe.  The expected
 * numbers here are written out independently of caffe.proto, so a typo in the
 * schema fails one of these checks. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "caffe.pb-c.h"

/* ------------------------------------------------------------ helpers */

static Caffe__NetParameter *load_lenet(void) {
  size_t len = 0;
  char *buf = tu_read_file(tu_fixture("lenet_iter_10000.caffemodel"), &len);
  assert_non_null(buf);
  Caffe__NetParameter *net = caffe__net_parameter__unpack(NULL, len, (const uint8_t *)buf);
  free(buf);
  assert_non_null(net);
  return net;
}

static void assert_blob_dims(const Caffe__BlobProto *b, int n, const int64_t *dims) {
  assert_non_null(b->shape);
  assert_int_equal(b->shape->n_dim, n);
  size_t count = 1;
  for (int i = 0; i < n; i++) {
    assert_int_equal(b->shape->dim[i], dims[i]);
    count *= (size_t)dims[i];
  }
  assert_int_equal(b->n_data, count);
}

/* --------------------------------------------------- the real caffemodel */

static void test_lenet_caffemodel_decodes(void **state) {
  Caffe__NetParameter *net = load_lenet();
  assert_string_equal(net->name, "LeNet");
  assert_int_equal(net->n_layers, 0);
  assert_int_equal(net->n_layer, 9);

  const char *names[] = {"mnist", "conv1", "pool1", "conv2", "pool2",
                         "ip1",   "relu1", "ip2",   "loss"};
  const char *types[] = {"Data",    "Convolution",  "Pooling", "Convolution",
                         "Pooling", "InnerProduct", "ReLU",    "InnerProduct",
                         "SoftmaxWithLoss"};
  for (int i = 0; i < 9; i++) {
    assert_string_equal(net->layer[i]->name, names[i]);
    assert_string_equal(net->layer[i]->type, types[i]);
    assert_true(net->layer[i]->has_phase);
    assert_int_equal(net->layer[i]->phase, CAFFE__PHASE__TRAIN);
  }

  const int64_t conv1_w[] = {20, 1, 5, 5}, conv1_b[] = {20};
  const int64_t conv2_w[] = {50, 20, 5, 5}, conv2_b[] = {50};
  const int64_t ip1_w[] = {500, 800}, ip1_b[] = {500};
  const int64_t ip2_w[] = {10, 500}, ip2_b[] = {10};
  assert_int_equal(net->layer[1]->n_blobs, 2);
  assert_blob_dims(net->layer[1]->blobs[0], 4, conv1_w);
  assert_blob_dims(net->layer[1]->blobs[1], 1, conv1_b);
  assert_blob_dims(net->layer[3]->blobs[0], 4, conv2_w);
  assert_blob_dims(net->layer[3]->blobs[1], 1, conv2_b);
  assert_blob_dims(net->layer[5]->blobs[0], 2, ip1_w);
  assert_blob_dims(net->layer[5]->blobs[1], 1, ip1_b);
  assert_blob_dims(net->layer[7]->blobs[0], 2, ip2_w);
  assert_blob_dims(net->layer[7]->blobs[1], 1, ip2_b);
  assert_int_equal(net->layer[0]->n_blobs, 0);

  /* Layer settings stored with the weights. */
  const Caffe__LayerParameter *conv1 = net->layer[1];
  assert_non_null(conv1->convolution_param);
  assert_int_equal(conv1->convolution_param->num_output, 20);
  assert_int_equal(conv1->convolution_param->n_kernel_size, 1);
  assert_int_equal(conv1->convolution_param->kernel_size[0], 5);
  assert_int_equal(conv1->n_param, 2);
  assert_float_equal(conv1->param[1]->lr_mult, 2.0f, 0.0f);
  const Caffe__LayerParameter *data = net->layer[0];
  assert_non_null(data->data_param);
  assert_int_equal(data->data_param->batch_size, 64);
  assert_int_equal(data->data_param->backend, CAFFE__DATA_PARAMETER__DB__LMDB);
  assert_non_null(data->transform_param);
  assert_float_equal(data->transform_param->scale, 0.00390625f, 0.0f);
  assert_int_equal(net->layer[2]->pooling_param->pool, CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX);
  assert_int_equal(net->layer[2]->pooling_param->stride, 2);
  /* First weights as stored by Caffe, to the bit. */
  assert_float_equal(conv1->blobs[0]->data[0], 0.0483467f, 1e-7f);
  assert_float_equal(net->layer[7]->blobs[1]->data[0], -0.0199746f, 1e-7f);

  caffe__net_parameter__free_unpacked(net, NULL);
}

/* ------------------------------------------------ numbers, by hand bytes */

static void test_layer_conv_num_output_bytes(void **state) {
  Caffe__LayerParameter layer = CAFFE__LAYER_PARAMETER__INIT;
  Caffe__ConvolutionParameter conv = CAFFE__CONVOLUTION_PARAMETER__INIT;
  conv.has_num_output = 1;
  conv.num_output = 7;
  layer.convolution_param = &conv;
  uint8_t buf[32];
  size_t n = caffe__layer_parameter__pack(&layer, buf);
  /* field 106, wire type 2 = varint 850 = D2 06; length 2; field 1 varint 7 */
  const uint8_t want[] = {0xD2, 0x06, 0x02, 0x08, 0x07};
  assert_int_equal(n, sizeof want);
  assert_memory_equal(buf, want, sizeof want);
}

static void test_hand_encoded_messages_decode(void **state) {
  /* NetParameter: name "n" (1), layers (2) { type: CONVOLUTION (5) },
   * layer (100) { name "x" (1) }, input_dim (4) 3. */
  const uint8_t net_bytes[] = {0x0A, 0x01, 'n', 0x12, 0x02, 0x28, 0x04,
                               0xA2, 0x06, 0x03, 0x0A, 0x01, 'x', 0x20, 0x03};
  Caffe__NetParameter *net = caffe__net_parameter__unpack(NULL, sizeof net_bytes, net_bytes);
  assert_non_null(net);
  assert_string_equal(net->name, "n");
  assert_int_equal(net->n_layers, 1);
  assert_int_equal(net->layers[0]->type, CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__CONVOLUTION);
  assert_int_equal(net->n_layer, 1);
  assert_string_equal(net->layer[0]->name, "x");
  assert_int_equal(net->n_input_dim, 1);
  assert_int_equal(net->input_dim[0], 3);
  caffe__net_parameter__free_unpacked(net, NULL);

  /* SolverParameter: base_lr (5, fixed32) 0.5, type (40) "Adam",
   * solver_type (30) 5, weights (42) "w", layer_wise_reduce (41) 0. */
  const uint8_t solver_bytes[] = {0x2D, 0x00, 0x00, 0x00, 0x3F, 0xC2, 0x02, 0x04, 'A', 'd',
                                  'a',  'm',  0xF0, 0x01, 0x05, 0xD2, 0x02, 0x01, 'w', 0xC8,
                                  0x02, 0x00};
  Caffe__SolverParameter *s =
      caffe__solver_parameter__unpack(NULL, sizeof solver_bytes, solver_bytes);
  assert_non_null(s);
  assert_true(s->has_base_lr);
  assert_float_equal(s->base_lr, 0.5f, 0.0f);
  assert_string_equal(s->type, "Adam");
  assert_true(s->has_solver_type);
  assert_int_equal(s->solver_type, CAFFE__SOLVER_PARAMETER__SOLVER_TYPE__ADAM);
  assert_int_equal(s->n_weights, 1);
  assert_string_equal(s->weights[0], "w");
  assert_true(s->has_layer_wise_reduce);
  assert_false(s->layer_wise_reduce);
  caffe__solver_parameter__free_unpacked(s, NULL);

  /* BlobProto: shape (7) { dim (1, packed) [2, 3] }, data (5, packed) [1.0],
   * num (1) 4. */
  const uint8_t blob_bytes[] = {0x3A, 0x04, 0x0A, 0x02, 0x02, 0x03, 0x2A,
                                0x04, 0x00, 0x00, 0x80, 0x3F, 0x08, 0x04};
  Caffe__BlobProto *b = caffe__blob_proto__unpack(NULL, sizeof blob_bytes, blob_bytes);
  assert_non_null(b);
  assert_int_equal(b->shape->n_dim, 2);
  assert_int_equal(b->shape->dim[0], 2);
  assert_int_equal(b->shape->dim[1], 3);
  assert_int_equal(b->n_data, 1);
  assert_float_equal(b->data[0], 1.0f, 0.0f);
  assert_int_equal(b->num, 4);
  caffe__blob_proto__free_unpacked(b, NULL);
}

static void test_solver_state_cortado_fields(void **state) {
  Caffe__SolverState st = CAFFE__SOLVER_STATE__INIT;
  Caffe__CortadoDataPosition pos = CAFFE__CORTADO_DATA_POSITION__INIT;
  Caffe__CortadoDataPosition *positions[] = {&pos};
  uint8_t rng[2] = {0xAB, 0xCD};
  st.has_iter = 1;
  st.iter = 3;
  st.has_cortado_rng_state = 1;
  st.cortado_rng_state.len = 2;
  st.cortado_rng_state.data = rng;
  st.has_cortado_extension_version = 1;
  st.cortado_extension_version = 1;
  pos.layer = "d";
  pos.has_cursor = 1;
  pos.cursor = 9;
  st.n_cortado_data_position = 1;
  st.cortado_data_position = positions;
  uint8_t buf[64];
  size_t n = caffe__solver_state__pack(&st, buf);
  /* iter (1) 3; 1000 bytes = C2 3E; 1001 msg = CA 3E { layer (1) "d", cursor (3) 9 };
   * 1002 varint = D0 3E. */
  const uint8_t want[] = {0x08, 0x03, 0xC2, 0x3E, 0x02, 0xAB, 0xCD, 0xCA, 0x3E, 0x05,
                          0x0A, 0x01, 'd',  0x18, 0x09, 0xD0, 0x3E, 0x01};
  assert_int_equal(n, sizeof want);
  assert_memory_equal(buf, want, sizeof want);
}

/* --------------------------------------------- numbers, by descriptor */

typedef struct field_fact {
  const ProtobufCMessageDescriptor *desc;
  const char *name;
  unsigned number;
  ProtobufCLabel label;
  ProtobufCType type;
} field_fact;

#define OPT PROTOBUF_C_LABEL_OPTIONAL
#define REP PROTOBUF_C_LABEL_REPEATED
#define REQ PROTOBUF_C_LABEL_REQUIRED

static void test_field_numbers(void **state) {
  const field_fact facts[] = {
      {&caffe__blob_proto__descriptor, "double_data", 8, REP, PROTOBUF_C_TYPE_DOUBLE},
      {&caffe__blob_proto__descriptor, "width", 4, OPT, PROTOBUF_C_TYPE_INT32},
      {&caffe__datum__descriptor, "encoded", 7, OPT, PROTOBUF_C_TYPE_BOOL},
      {&caffe__datum__descriptor, "float_data", 6, REP, PROTOBUF_C_TYPE_FLOAT},
      {&caffe__filler_parameter__descriptor, "variance_norm", 8, OPT, PROTOBUF_C_TYPE_ENUM},
      {&caffe__filler_parameter__descriptor, "sparse", 7, OPT, PROTOBUF_C_TYPE_INT32},
      {&caffe__net_parameter__descriptor, "input_shape", 8, REP, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__net_parameter__descriptor, "state", 6, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__solver_parameter__descriptor, "net", 24, OPT, PROTOBUF_C_TYPE_STRING},
      {&caffe__solver_parameter__descriptor, "test_initialization", 32, OPT, PROTOBUF_C_TYPE_BOOL},
      {&caffe__solver_parameter__descriptor, "iter_size", 36, OPT, PROTOBUF_C_TYPE_INT32},
      {&caffe__solver_parameter__descriptor, "clip_gradients", 35, OPT, PROTOBUF_C_TYPE_FLOAT},
      {&caffe__solver_parameter__descriptor, "snapshot_format", 37, OPT, PROTOBUF_C_TYPE_ENUM},
      {&caffe__solver_parameter__descriptor, "random_seed", 20, OPT, PROTOBUF_C_TYPE_INT64},
      {&caffe__solver_parameter__descriptor, "momentum2", 39, OPT, PROTOBUF_C_TYPE_FLOAT},
      {&caffe__solver_parameter__descriptor, "rms_decay", 38, OPT, PROTOBUF_C_TYPE_FLOAT},
      {&caffe__solver_parameter__descriptor, "stepvalue", 34, REP, PROTOBUF_C_TYPE_INT32},
      {&caffe__solver_state__descriptor, "current_step", 4, OPT, PROTOBUF_C_TYPE_INT32},
      {&caffe__net_state_rule__descriptor, "not_stage", 5, REP, PROTOBUF_C_TYPE_STRING},
      {&caffe__param_spec__descriptor, "decay_mult", 4, OPT, PROTOBUF_C_TYPE_FLOAT},
      {&caffe__layer_parameter__descriptor, "propagate_down", 11, REP, PROTOBUF_C_TYPE_BOOL},
      {&caffe__layer_parameter__descriptor, "loss_weight", 5, REP, PROTOBUF_C_TYPE_FLOAT},
      {&caffe__layer_parameter__descriptor, "loss_param", 101, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__layer_parameter__descriptor, "batch_norm_param", 139, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__layer_parameter__descriptor, "crop_param", 144, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__layer_parameter__descriptor, "input_param", 143, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__layer_parameter__descriptor, "recurrent_param", 146, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__layer_parameter__descriptor, "swish_param", 147, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__layer_parameter__descriptor, "clip_param", 148, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__layer_parameter__descriptor, "spp_param", 132, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__layer_parameter__descriptor, "window_data_param", 129, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__layer_parameter__descriptor, "embed_param", 137, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__layer_parameter__descriptor, "parameter_param", 145, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__convolution_parameter__descriptor, "dilation", 18, REP, PROTOBUF_C_TYPE_UINT32},
      {&caffe__convolution_parameter__descriptor, "stride", 6, REP, PROTOBUF_C_TYPE_UINT32},
      {&caffe__convolution_parameter__descriptor, "group", 5, OPT, PROTOBUF_C_TYPE_UINT32},
      {&caffe__pooling_parameter__descriptor, "round_mode", 13, OPT, PROTOBUF_C_TYPE_ENUM},
      {&caffe__pooling_parameter__descriptor, "pad", 4, OPT, PROTOBUF_C_TYPE_UINT32},
      {&caffe__data_parameter__descriptor, "backend", 8, OPT, PROTOBUF_C_TYPE_ENUM},
      {&caffe__data_parameter__descriptor, "prefetch", 10, OPT, PROTOBUF_C_TYPE_UINT32},
      {&caffe__transformation_parameter__descriptor, "force_gray", 7, OPT, PROTOBUF_C_TYPE_BOOL},
      {&caffe__loss_parameter__descriptor, "normalization", 3, OPT, PROTOBUF_C_TYPE_ENUM},
      {&caffe__concat_parameter__descriptor, "axis", 2, OPT, PROTOBUF_C_TYPE_INT32},
      {&caffe__slice_parameter__descriptor, "axis", 3, OPT, PROTOBUF_C_TYPE_INT32},
      {&caffe__dummy_data_parameter__descriptor, "shape", 6, REP, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__clip_parameter__descriptor, "max", 2, REQ, PROTOBUF_C_TYPE_FLOAT},
      {&caffe__image_data_parameter__descriptor, "root_folder", 12, OPT, PROTOBUF_C_TYPE_STRING},
      {&caffe__infogain_loss_parameter__descriptor, "axis", 2, OPT, PROTOBUF_C_TYPE_INT32},
      {&caffe__exp_parameter__descriptor, "base", 1, OPT, PROTOBUF_C_TYPE_FLOAT},
      {&caffe__log_parameter__descriptor, "base", 1, OPT, PROTOBUF_C_TYPE_FLOAT},
      {&caffe__sppparameter__descriptor, "engine", 6, OPT, PROTOBUF_C_TYPE_ENUM},
      {&caffe__window_data_parameter__descriptor, "root_folder", 13, OPT, PROTOBUF_C_TYPE_STRING},
      {&caffe__v1_layer_parameter__descriptor, "param", 1001, REP, PROTOBUF_C_TYPE_STRING},
      {&caffe__v1_layer_parameter__descriptor, "blob_share_mode", 1002, REP, PROTOBUF_C_TYPE_ENUM},
      {&caffe__v1_layer_parameter__descriptor, "include", 32, REP, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__v1_layer_parameter__descriptor, "loss_weight", 35, REP, PROTOBUF_C_TYPE_FLOAT},
      {&caffe__v1_layer_parameter__descriptor, "transform_param", 36, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__v1_layer_parameter__descriptor, "loss_param", 42, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__v1_layer_parameter__descriptor, "layer", 1, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__v1_layer_parameter__descriptor, "exp_param", 41, OPT, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__v0_layer_parameter__descriptor, "blobs", 50, REP, PROTOBUF_C_TYPE_MESSAGE},
      {&caffe__v0_layer_parameter__descriptor, "k", 22, OPT, PROTOBUF_C_TYPE_FLOAT},
      {&caffe__v0_layer_parameter__descriptor, "det_context_pad", 58, OPT, PROTOBUF_C_TYPE_UINT32},
      {&caffe__v0_layer_parameter__descriptor, "concat_dim", 65, OPT, PROTOBUF_C_TYPE_UINT32},
      {&caffe__v0_layer_parameter__descriptor, "hdf5_output_param", 1001, OPT,
       PROTOBUF_C_TYPE_MESSAGE},
  };
  for (size_t i = 0; i < sizeof facts / sizeof facts[0]; i++) {
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field_by_name(facts[i].desc, facts[i].name);
    if (!f || f->id != facts[i].number || f->label != facts[i].label ||
        f->type != facts[i].type) {
      fail_msg("%s.%s: want number %u label %d type %d, have %s %u %d %d", facts[i].desc->name,
               facts[i].name, facts[i].number, facts[i].label, facts[i].type,
               f ? "field" : "no field", f ? f->id : 0, f ? f->label : -1, f ? f->type : -1);
    }
  }
  assert_true(caffe__blob_shape__descriptor.fields[0].flags & PROTOBUF_C_FIELD_FLAG_PACKED);
  assert_true(caffe__blob_proto__descriptor.n_fields == 9);
}

static void test_defaults_and_enums(void **state) {
  Caffe__SolverParameter s = CAFFE__SOLVER_PARAMETER__INIT;
  assert_float_equal(s.delta, 1e-8f, 0.0f);
  assert_float_equal(s.momentum2, 0.999f, 0.0f);
  assert_float_equal(s.rms_decay, 0.99f, 0.0f);
  assert_float_equal(s.clip_gradients, -1.0f, 0.0f);
  assert_int_equal(s.random_seed, -1);
  assert_int_equal(s.average_loss, 1);
  assert_int_equal(s.iter_size, 1);
  assert_true(s.test_initialization);
  assert_true(s.snapshot_after_train);
  assert_true(s.layer_wise_reduce);
  assert_int_equal(s.solver_mode, CAFFE__SOLVER_PARAMETER__SOLVER_MODE__GPU);
  assert_int_equal(s.snapshot_format, CAFFE__SOLVER_PARAMETER__SNAPSHOT_FORMAT__BINARYPROTO);
  assert_string_equal(s.type, "SGD");
  assert_string_equal(s.regularization_type, "L2");

  Caffe__ConvolutionParameter c = CAFFE__CONVOLUTION_PARAMETER__INIT;
  assert_true(c.bias_term);
  assert_int_equal(c.group, 1);
  assert_int_equal(c.axis, 1);
  Caffe__PoolingParameter p = CAFFE__POOLING_PARAMETER__INIT;
  assert_int_equal(p.stride, 1);
  assert_int_equal(p.round_mode, CAFFE__POOLING_PARAMETER__ROUND_MODE__CEIL);
  Caffe__LRNParameter lrn = CAFFE__LRNPARAMETER__INIT;
  assert_int_equal(lrn.local_size, 5);
  assert_float_equal(lrn.beta, 0.75f, 0.0f);
  Caffe__BatchNormParameter bn = CAFFE__BATCH_NORM_PARAMETER__INIT;
  assert_float_equal(bn.moving_average_fraction, 0.999f, 0.0f);
  assert_float_equal(bn.eps, 1e-5f, 0.0f);
  Caffe__FillerParameter f = CAFFE__FILLER_PARAMETER__INIT;
  assert_string_equal(f.type, "constant");
  assert_int_equal(f.sparse, -1);
  Caffe__ExpParameter e = CAFFE__EXP_PARAMETER__INIT;
  assert_float_equal(e.base_, -1.0f, 0.0f);
  Caffe__LossParameter l = CAFFE__LOSS_PARAMETER__INIT;
  assert_int_equal(l.normalization, CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__VALID);
  Caffe__NetState ns = CAFFE__NET_STATE__INIT;
  assert_int_equal(ns.phase, CAFFE__PHASE__TEST);
  Caffe__WindowDataParameter w = CAFFE__WINDOW_DATA_PARAMETER__INIT;
  assert_string_equal(w.crop_mode, "warp");
  assert_float_equal(w.fg_fraction, 0.25f, 0.0f);
  Caffe__MVNParameter mvn = CAFFE__MVNPARAMETER__INIT;
  assert_float_equal(mvn.eps, 1e-9f, 0.0f);
  Caffe__DataParameter d = CAFFE__DATA_PARAMETER__INIT;
  assert_int_equal(d.prefetch, 4);
  assert_int_equal(d.backend, CAFFE__DATA_PARAMETER__DB__LEVELDB);
  Caffe__HingeLossParameter h = CAFFE__HINGE_LOSS_PARAMETER__INIT;
  assert_int_equal(h.norm, CAFFE__HINGE_LOSS_PARAMETER__NORM__L1);
  Caffe__V0LayerParameter v0 = CAFFE__V0_LAYER_PARAMETER__INIT;
  assert_true(v0.biasterm);
  assert_string_equal(v0.det_crop_mode, "warp");

  assert_int_equal(CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__ABSVAL, 35);
  assert_int_equal(CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__DECONVOLUTION, 39);
  assert_int_equal(CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__DUMMY_DATA, 32);
  assert_int_equal(CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__ELTWISE, 25);
  assert_int_equal(CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__MVN, 34);
  assert_int_equal(CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__SILENCE, 36);
  assert_int_equal(CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__SOFTMAX_LOSS, 21);
  assert_int_equal(CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__THRESHOLD, 31);
  assert_int_equal(CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__SLICE, 33);
  assert_int_equal(CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__CONTRASTIVE_LOSS, 37);
  assert_int_equal(CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__EXP, 38);
  assert_int_equal(CAFFE__SOLVER_PARAMETER__SOLVER_TYPE__ADADELTA, 4);
  assert_int_equal(CAFFE__REDUCTION_PARAMETER__REDUCTION_OP__MEAN, 4);
  assert_int_equal(CAFFE__ELTWISE_PARAMETER__ELTWISE_OP__MAX, 2);
  assert_int_equal(CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__NONE, 3);
  assert_int_equal(CAFFE__FILLER_PARAMETER__VARIANCE_NORM__AVERAGE, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lenet_caffemodel_decodes),
      cmocka_unit_test(test_layer_conv_num_output_bytes),
      cmocka_unit_test(test_hand_encoded_messages_decode),
      cmocka_unit_test(test_solver_state_cortado_fields),
      cmocka_unit_test(test_field_numbers),
      cmocka_unit_test(test_defaults_and_enums),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
