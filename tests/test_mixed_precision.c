/* Mixed precision on the host: element-type conversions, the layers that
 * run in bfloat16 against their float32 twins (bounds below), the Cast
 * layer, the net's dtype pass (which layer runs in what, where Cast layers
 * go, in-place layers of another type), and what the CPU refuses.
 *
 * Bounds, relative to the largest float32 magnitude of each array:
 * bfloat16 keeps 8 significant bits, so one rounding of an input or output
 * is at most 2^-9 of it; a product accumulated in float32 over K terms of
 * rounded inputs stays within a few roundings of its largest term.  The
 * bound 2^-6 (1.6%) leaves room for that and for cancellation in sums of
 * mixed signs (measured: 0.2-0.45% for tops and bottom gradients, 3e-7 for
 * parameter gradients, which come out in float32); a layer computing in
 * float32 on bfloat16 values (ReLU, Split) must be within one rounding,
 * 2^-8. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "layertest.h"
#include "math/typed.h"
#include "mptest.h"
#include "net/net.h"
#include "proto/catalog.h"
#include "proto/textformat.h"
#include "testutil.h"

#define BF16_BOUND (1.0 / 64)
#define BF16_ONE_ROUNDING (1.0 / 256)

static Caffe__NetParameter *net_from(const char *text) {
  ProtobufCMessage *m = NULL;
  ct_error err;
  if (ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), NULL, &m, &err) != CT_OK)
    fail_msg("%s", err.msg);
  return (Caffe__NetParameter *)m;
}

static void skip_without_bf16(void) {
  if (!ct_cpu_has_bf16()) {
    print_message("this CPU has no AVX512_BF16 or AMX: bfloat16 layers are not tested here\n");
    skip();
  }
}

/* ---------------------------------------------------------------- conversions */

static uint16_t bf(float f) { return ct_f32_to_bf16(f); }
static uint16_t hf(float f) { return ct_f32_to_f16(f); }

static void test_bf16_rounding(void **state) {
  assert_int_equal(bf(1.0f), 0x3f80);
  assert_int_equal(bf(-2.0f), 0xc000);
  /* 1 + 2^-8 lies half way between 1 and 1 + 2^-7: ties go to the even 1 */
  assert_int_equal(bf(1.0f + 0x1p-8f), 0x3f80);
  /* 1 + 3 * 2^-8 lies half way between 1 + 2^-7 and 1 + 2^-6: to the even one */
  assert_int_equal(bf(1.0f + 3 * 0x1p-8f), 0x3f82);
  assert_int_equal(bf(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81); /* just past half: up */
  assert_true(isnan(ct_bf16_to_f32(bf(NAN))));
  assert_int_equal(bf(INFINITY), 0x7f80);
  assert_int_equal(bf(3.4e38f), 0x7f80); /* rounds past the largest finite */
  assert_int_equal(bf(-0.0f), 0x8000);
  for (int i = -1000; i <= 1000; i++) { /* every bf16 value of this range is exact */
    float v = ct_bf16_to_f32((uint16_t)(0x3f80 + i));
    assert_int_equal(bf(v), (uint16_t)(0x3f80 + i));
  }
}

static void test_f16_rounding(void **state) {
  assert_int_equal(hf(1.0f), 0x3c00);
  assert_int_equal(hf(65504.0f), 0x7bff);
  assert_int_equal(hf(65519.0f), 0x7bff);   /* below half way to 65536: the largest */
  assert_int_equal(hf(65520.0f), 0x7c00);   /* half way: ties to even, infinity */
  assert_int_equal(hf(0x1p-24f), 0x0001);   /* the least subnormal */
  assert_int_equal(hf(0x1p-25f), 0x0000);   /* half of it: ties to even, zero */
  assert_int_equal(hf(0x1.8p-24f), 0x0002); /* 1.5 of it: to even, 2 */
  assert_int_equal(hf(1.0f + 0x1p-11f), 0x3c00);
  assert_int_equal(hf(1.0f + 3 * 0x1p-11f), 0x3c02);
  assert_true(isnan(ct_f16_to_f32(hf(NAN))));
  assert_float_equal(ct_f16_to_f32(0x0001), 0x1p-24f, 0);
  assert_float_equal(ct_f16_to_f32(0xfbff), -65504.0f, 0);
  for (uint32_t h = 0; h < 0x7c00; h++) /* every finite half round-trips */
    assert_int_equal(hf(ct_f16_to_f32((uint16_t)h)), h);
}

/* Tensors keep 16-bit storage and convert on upload and download. */
static void test_tensor_storage(void **state) {
  int shape[2] = {3, 5};
  ct_tensor *t = ct_tensor_new_shape(CT_DEVICE_CPU, "t", 2, shape, true);
  ct_tensor_set_dtype(t, CT_BF16);
  ct_tensor_reshape_or_die(t, 2, shape);
  assert_int_equal(ct_tensor_bytes(t, t->count), 30);
  float in[15], out[15];
  for (int i = 0; i < 15; i++) in[i] = 0.1f * (float)i - 0.7f;
  ct_tensor_upload(t, in);
  ct_tensor_download(t, out);
  for (int i = 0; i < 15; i++) assert_float_equal(out[i], in[i], fabsf(in[i]) / 256);
  assert_int_equal(((const uint16_t *)t->data)[10], bf(in[10]));
  ct_tensor_free(t);
}

/* The host's array conversions and sums in bfloat16 (math/typed.h; their
 * own vectorised loops) give each element what the scalar conversions
 * give, NaNs, infinities and ties included, below and above the size at
 * which threads share the work. */
static void test_typed_arrays(void **state) {
  const size_t sizes[2] = {37, 70001};
  for (int k = 0; k < 2; k++) {
    const size_t n = sizes[k];
    float *x = malloc(n * sizeof *x), *back = malloc(n * sizeof *back), *acc = malloc(n * sizeof *acc);
    uint16_t *h = malloc(n * sizeof *h), *sum = malloc(n * sizeof *sum);
    for (size_t i = 0; i < n; i++) {
      x[i] = (float)((double)i * 1.000123 - (double)n / 3) * 0.0137f;
      acc[i] = 0.5f;
    }
    x[0] = NAN, x[1] = -INFINITY, x[2] = INFINITY, x[3] = 1.00390625f; /* a tie: 1 + 2^-8 */
    ct_cpu_convert(n, CT_F32, x, CT_BF16, h);
    for (size_t i = 0; i < n; i++) assert_int_equal(h[i], bf(x[i]));
    ct_cpu_convert(n, CT_BF16, h, CT_F32, back);
    for (size_t i = 0; i < n; i++)
      if (i) assert_true(back[i] == ct_bf16_to_f32(h[i]));
    assert_true(isnan(back[0]));
    ct_cpu_axpy_from(n, 2.0f, CT_BF16, h, acc);
    for (size_t i = 4; i < n; i++) assert_true(acc[i] == 0.5f + 2.0f * ct_bf16_to_f32(h[i]));
    ct_cpu_add_typed(CT_BF16, n, h, h, sum);
    for (size_t i = 1; i < n; i++)
      assert_int_equal(sum[i], bf(ct_bf16_to_f32(h[i]) + ct_bf16_to_f32(h[i])));
    free(x), free(back), free(acc), free(h), free(sum);
  }
}

/* ---------------------------------------------------------------- layers */

static void test_twin_convolution(void **state) {
  skip_without_bf16();
  Caffe__LayerParameter *p = tu_layer_from(
      "name: 'conv' type: 'Convolution' convolution_param { num_output: 16 kernel_size: 3 pad: 1 "
      "weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'constant' value: 0.2 } }");
  tu_twin_check(p, CT_DEVICE_CPU, CT_BF16, "4,8,10,10", 1, BF16_BOUND);
  /* channels-last, as a bfloat16 net runs it on the host (oneDNN on the
   * blobs' own order, no reorders) */
  tu_twin_check_layout(p, CT_DEVICE_CPU, CT_BF16, CT_NHWC, "4,8,10,10", 1, BF16_BOUND);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  /* strided, grouped, without bias, one input channel per group */
  p = tu_layer_from(
      "name: 'conv' type: 'Convolution' convolution_param { num_output: 6 kernel_size: 5 stride: 2 "
      "group: 3 bias_term: false weight_filler { type: 'xavier' } }");
  tu_twin_check(p, CT_DEVICE_CPU, CT_BF16, "2,3,13,11", 1, BF16_BOUND);
  tu_twin_check_layout(p, CT_DEVICE_CPU, CT_BF16, CT_NHWC, "2,3,13,11", 1, BF16_BOUND);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  /* a net's first convolution: one input channel (the weight gradient by
   * the direct kernel on float32 copies where oneDNN's is a GEMM) */
  p = tu_layer_from(
      "name: 'conv' type: 'Convolution' convolution_param { num_output: 20 kernel_size: 5 "
      "weight_filler { type: 'xavier' } bias_filler { type: 'constant' value: 0.1 } }");
  tu_twin_check(p, CT_DEVICE_CPU, CT_BF16, "3,1,28,28", 1, BF16_BOUND);
  tu_twin_check_layout(p, CT_DEVICE_CPU, CT_BF16, CT_NHWC, "3,1,28,28", 1, BF16_BOUND);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

static void test_twin_inner_product(void **state) {
  skip_without_bf16();
  Caffe__LayerParameter *p = tu_layer_from(
      "name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 10 "
      "weight_filler { type: 'xavier' } bias_filler { type: 'constant' value: -0.1 } }");
  tu_twin_check(p, CT_DEVICE_CPU, CT_BF16, "7,4,5,6", 1, BF16_BOUND);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  p = tu_layer_from(
      "name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 33 transpose: true "
      "weight_filler { type: 'gaussian' std: 0.3 } bias_term: false }");
  tu_twin_check(p, CT_DEVICE_CPU, CT_BF16, "5,64", 1, BF16_BOUND);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

static void test_twin_relu_split(void **state) {
  skip_without_bf16();
  Caffe__LayerParameter *p = tu_layer_from("name: 'relu' type: 'ReLU'");
  tu_twin_check(p, CT_DEVICE_CPU, CT_BF16, "2,3,4,5", 1, 0.0);  /* exact: a select */
  protobuf_c_message_free_unpacked(&p->base, NULL);
  p = tu_layer_from("name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.1 }");
  tu_twin_check(p, CT_DEVICE_CPU, CT_BF16, "2,3,4,5", 1, BF16_ONE_ROUNDING);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  p = tu_layer_from("name: 'split' type: 'Split'");
  tu_twin_check(p, CT_DEVICE_CPU, CT_BF16, "3,7,2", 3, BF16_ONE_ROUNDING);
  tu_twin_check_layout(p, CT_DEVICE_CPU, CT_BF16, CT_NHWC, "2,8,3,3", 2, BF16_ONE_ROUNDING);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  /* Concat of channels-last blobs along the channels */
  p = tu_layer_from("name: 'cat' type: 'Concat'");
  tu_twin_check_layout(p, CT_DEVICE_CPU, CT_BF16, CT_NHWC, "2,3,4,5;2,5,4,5;2,1,4,5", 1, 0.0);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

/* Cast: float32 -> bfloat16 rounds each value once; its backward converts
 * the gradient back exactly. */
/* Pooling: MAX and AVE read bfloat16 into float32 rows and round each
 * output once, so top and bottom gradient are within one rounding (Caffe's
 * rounded-up windows, padding, strides, widths that fill no vector of 8,
 * global); STOCHASTIC and a mask top are refused in bfloat16. */
static void test_twin_pooling(void **state) {
  skip_without_bf16();
  static const char *const pools[][2] = {
      {"pool: MAX kernel_size: 3 stride: 2", "2,16,9,9"},
      {"pool: MAX kernel_size: 3 stride: 2 pad: 1", "3,5,13,19"},
      {"pool: MAX kernel_size: 2 stride: 2", "2,4,32,32"},
      /* channels-last MAX in blocks of 16 channels, the last one overlapping
       * the block before (LeNet's 20 channels; 40: three blocks) */
      {"pool: MAX kernel_size: 2 stride: 2", "2,20,8,8"},
      {"pool: MAX kernel_size: 3 stride: 2 pad: 1", "2,40,9,9"},
      {"pool: AVE kernel_size: 3 stride: 1 pad: 1", "2,8,6,7"},
      {"pool: AVE kernel_size: 3 stride: 2", "2,6,15,15"},
      {"pool: AVE global_pooling: true", "4,32,7,7"},
      /* a window of more than 255 positions: the channels-last argmax as floats */
      {"pool: MAX global_pooling: true", "2,8,17,17"},
  };
  for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "name: 'p' type: 'Pooling' pooling_param { %s }", pools[i][0]);
    Caffe__LayerParameter *p = tu_layer_from(text);
    tu_twin_check(p, CT_DEVICE_CPU, CT_BF16, pools[i][1], 1, BF16_ONE_ROUNDING);
    /* channels-last (pooling_nhwc_cpu.c): the same sums, maxima and indices */
    tu_twin_check_layout(p, CT_DEVICE_CPU, CT_BF16, CT_NHWC, pools[i][1], 1, BF16_ONE_ROUNDING);
    protobuf_c_message_free_unpacked(&p->base, NULL);
  }
  static const char *const refused[][2] = {
      {"name: 'p' type: 'Pooling' pooling_param { pool: STOCHASTIC kernel_size: 2 stride: 2 }",
       "STOCHASTIC"},
      {"name: 'p' type: 'Pooling' pooling_param { pool: MAX kernel_size: 2 stride: 2 }",
       "mask top"},
  };
  for (int i = 0; i < 2; i++) {
    Caffe__LayerParameter *p = tu_layer_from(refused[i][0]);
    tu_layer_case c;
    ct_error err;
    assert_int_equal(tu_layer_case_try_typed(&c, p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "2,3,4,4", i + 1,
                                             CT_BF16, &err),
                     CT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, refused[i][1]));
    assert_non_null(strstr(err.msg, "forward_type: FLOAT"));
    tu_layer_case_free(&c);
    protobuf_c_message_free_unpacked(&p->base, NULL);
  }
}

static void test_cast_layer(void **state) {
  Caffe__LayerParameter *p = tu_layer_from("name: 'c' type: 'Cast' forward_type: BFLOAT16");
  tu_layer_case c;
  tu_layer_case_init(&c, p, CT_DEVICE_CPU, CT_PHASE_TRAIN, "4,9", 1);
  ct_tensor_set_dtype(c.top[0], CT_BF16);
  c.l->dtype = CT_BF16;
  ct_error err;
  assert_int_equal(ct_layer_reshape(c.l, c.bottom, c.top, &err), CT_OK);
  ct_tensor_need_diff(c.top[0]);
  tu_forward(&c);
  const float *x = c.bottom[0]->data;
  const uint16_t *y = c.top[0]->data;
  for (int i = 0; i < 36; i++) assert_int_equal(y[i], bf(x[i]));
  uint16_t *dy = c.top[0]->diff;
  for (int i = 0; i < 36; i++) dy[i] = bf(0.25f * (float)i - 3.0f);
  bool down = true;
  ct_layer_backward(c.l, c.top, &down, c.bottom);
  const float *dx = c.bottom[0]->diff;
  for (int i = 0; i < 36; i++) assert_float_equal(dx[i], 0.25f * (float)i - 3.0f, 0);
  tu_layer_case_free(&c);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

/* ---------------------------------------------------------------- the net's pass */

static const char k_net[] =
    "name: 'n' "
    "layer { name: 'data' type: 'Input' top: 'data' top: 'label' "
    "        input_param { shape { dim: 2 dim: 1 dim: 8 dim: 8 } shape { dim: 2 } } } "
    "layer { name: 'conv' type: 'Convolution' bottom: 'data' top: 'conv' "
    "        convolution_param { num_output: 4 kernel_size: 3 } } "
    "layer { name: 'relu' type: 'ReLU' bottom: 'conv' top: 'conv' } "
    "layer { name: 'sig' type: 'Sigmoid' bottom: 'conv' top: 'conv' } "
    "layer { name: 'ip' type: 'InnerProduct' bottom: 'conv' top: 'ip' "
    "        inner_product_param { num_output: 3 } } "
    "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' } "
    "layer { name: 'acc' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'acc' }";

static const char *layer_line(const Caffe__LayerParameter *l, char *buf, size_t len) {
  int k = snprintf(buf, len, "%s:%s:%d", l->name, l->type, (int)l->forward_type);
  for (size_t j = 0; j < l->n_bottom; j++) k += snprintf(buf + k, len - k, " <%s", l->bottom[j]);
  for (size_t j = 0; j < l->n_top; j++) k += snprintf(buf + k, len - k, " >%s", l->top[j]);
  return buf;
}

static void test_dtype_pass(void **state) {
  skip_without_bf16();
  Caffe__NetParameter *n = net_from(k_net);
  ct_error err;
  assert_int_equal(ct_net_plan_dtypes(n, CT_DEVICE_CPU, CT_BF16, true, true, &err), CT_OK);
  const int F = CAFFE__TYPE__FLOAT, B = CAFFE__TYPE__BFLOAT16;
  /* conv and relu in bfloat16 (channels-last); Sigmoid has no bfloat16 path: it works in
   * place on a float32 Cast of conv, which ip (bfloat16) reads through a
   * Cast back; the loss and accuracy share one float32 Cast of ip */
  char want[9][160];
  snprintf(want[0], 160, "data:Input:%d >data >label", F);
  snprintf(want[1], 160, "data@bf16.nhwc:Cast:%d <data >data@bf16.nhwc", B);
  snprintf(want[2], 160, "conv:Convolution:%d <data@bf16.nhwc >conv", B);
  snprintf(want[3], 160, "relu:ReLU:%d <conv >conv", B);
  snprintf(want[4], 160, "conv@f32:Cast:%d <conv >conv@f32", F);
  snprintf(want[5], 160, "sig:Sigmoid:%d <conv@f32 >conv@f32", F);
  snprintf(want[6], 160, "conv@f32@bf16:Cast:%d <conv@f32 >conv@f32@bf16", B);
  snprintf(want[7], 160, "ip:InnerProduct:%d <conv@f32@bf16 >ip", B);
  snprintf(want[8], 160, "ip@f32:Cast:%d <ip >ip@f32", F);
  assert_int_equal(n->n_layer, 11);
  char got[256];
  for (int i = 0; i < 9; i++) assert_string_equal(layer_line(n->layer[i], got, sizeof got), want[i]);
  snprintf(want[0], 160, "loss:SoftmaxWithLoss:%d <ip@f32 <label >loss", F);
  assert_string_equal(layer_line(n->layer[9], got, sizeof got), want[0]);
  snprintf(want[0], 160, "acc:Accuracy:%d <ip@f32 <label >acc", F);
  assert_string_equal(layer_line(n->layer[10], got, sizeof got), want[0]);
  protobuf_c_message_free_unpacked(&n->base, NULL);
}

/* A ResNet-like block planned for a GPU (the pass needs no GPU): the 16-bit
 * layers with a channels-last path run NHWC, element-wise ones follow their
 * bottom, the BatchNorm in place gets a top of its own (conv1@bn1) that the
 * layers after it read, LRN (no 16-bit path) reads a float32 NCHW Cast, InnerProduct a
 * bfloat16 NCHW one; a prototxt's cortado_layout: NCHW keeps pool2
 * channels-first. */
static const char k_block[] =
    "layer { name: 'data' type: 'Input' top: 'data' top: 'label' input_param { shape { dim: 2 "
    "dim: 3 dim: 8 dim: 8 } shape { dim: 2 } } }"
    "layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1' convolution_param { "
    "num_output: 8 kernel_size: 3 pad: 1 } }"
    "layer { name: 'bn1' type: 'BatchNorm' bottom: 'conv1' top: 'conv1' }"
    "layer { name: 'sc1' type: 'Scale' bottom: 'conv1' top: 'conv1' scale_param { bias_term: true } }"
    "layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }"
    "layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1' pooling_param { pool: MAX "
    "kernel_size: 2 stride: 2 } }"
    "layer { name: 'conv2' type: 'Convolution' bottom: 'pool1' top: 'conv2' convolution_param { "
    "num_output: 8 kernel_size: 1 } }"
    "layer { name: 'sum' type: 'Eltwise' bottom: 'pool1' bottom: 'conv2' top: 'sum' }"
    "layer { name: 'cat' type: 'Concat' bottom: 'sum' bottom: 'conv2' top: 'cat' }"
    "layer { name: 'lrn' type: 'LRN' bottom: 'cat' top: 'lrn' }"
    "layer { name: 'pool2' type: 'Pooling' bottom: 'lrn' top: 'pool2' cortado_layout: NCHW "
    "pooling_param { pool: AVE kernel_size: 2 stride: 2 } }"
    "layer { name: 'ip' type: 'InnerProduct' bottom: 'pool2' top: 'ip' inner_product_param { "
    "num_output: 3 } }"
    "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }";

/* Plans text for device in bfloat16 and checks every layer's line:
 * "name:type:dtype:layout <bottoms >tops". */
static void check_plan(const char *text, int device, const char *const *want, size_t nwant) {
  Caffe__NetParameter *n = net_from(text);
  ct_error err;
  assert_int_equal(ct_net_plan_dtypes(n, device, CT_BF16, true, true, &err), CT_OK);
  char(*got)[256] = calloc(n->n_layer + 1, sizeof *got);
  bool same = n->n_layer == nwant;
  for (size_t i = 0; i < n->n_layer; i++) {
    const Caffe__LayerParameter *l = n->layer[i];
    ct_dtype t;
    assert_int_equal(ct_dtype_from_proto(l->forward_type, "t", &t, &err), CT_OK);
    int k = snprintf(got[i], sizeof got[i], "%s:%s:%s:%s", l->name, l->type, ct_dtype_name(t),
                     l->cortado_layout == CAFFE__LAYOUT__NHWC ? "NHWC" : "NCHW");
    assert_true(l->has_cortado_layout);
    for (size_t j = 0; j < l->n_bottom; j++)
      k += snprintf(got[i] + k, sizeof got[i] - k, " <%s", l->bottom[j]);
    for (size_t j = 0; j < l->n_top; j++) k += snprintf(got[i] + k, sizeof got[i] - k, " >%s", l->top[j]);
    same = same && strcmp(got[i], want[i]) == 0;
  }
  if (!same) {
    for (size_t i = 0; i < n->n_layer; i++) print_message("  planned: %s\n", got[i]);
    fail_msg("the plan for %s differs from the one expected", device == CT_DEVICE_CPU ? "the host" : "a GPU");
  }
  free(got);
  protobuf_c_message_free_unpacked(&n->base, NULL);
}

static void test_layout_pass(void **state) {
  static const char *const want[] = {
      "data:Input:float32:NCHW >data >label",
      "data@bf16.nhwc:Cast:bfloat16:NHWC <data >data@bf16.nhwc",
      "conv1:Convolution:bfloat16:NHWC <data@bf16.nhwc >conv1",
      "bn1:BatchNorm:bfloat16:NHWC <conv1 >conv1@bn1",
      "sc1:Scale:bfloat16:NHWC <conv1@bn1 >conv1@bn1",
      "relu1:ReLU:bfloat16:NHWC <conv1@bn1 >conv1@bn1",
      "pool1:Pooling:bfloat16:NHWC <conv1@bn1 >pool1",
      "conv2:Convolution:bfloat16:NHWC <pool1 >conv2",
      "sum:Eltwise:bfloat16:NHWC <pool1 <conv2 >sum",
      "cat:Concat:bfloat16:NHWC <sum <conv2 >cat",
      "cat@f32:Cast:float32:NCHW <cat >cat@f32",
      "lrn:LRN:float32:NCHW <cat@f32 >lrn",
      "lrn@bf16:Cast:bfloat16:NCHW <lrn >lrn@bf16",
      "pool2:Pooling:bfloat16:NCHW <lrn@bf16 >pool2",
      "ip:InnerProduct:bfloat16:NCHW <pool2 >ip",
      "ip@f32:Cast:float32:NCHW <ip >ip@f32",
      "loss:SoftmaxWithLoss:float32:NCHW <ip@f32 <label >loss",
  };
  check_plan(k_block, 0, want, sizeof want / sizeof want[0]);
  /* on the host: Convolution, Pooling, Concat and the element-wise layers
   * run channels-last in bfloat16; BatchNorm and Scale have no bfloat16
   * path there (float32 NCHW), so the ReLU after them follows their order */
  static const char *const host[] = {
      "data:Input:float32:NCHW >data >label",
      "data@bf16.nhwc:Cast:bfloat16:NHWC <data >data@bf16.nhwc",
      "conv1:Convolution:bfloat16:NHWC <data@bf16.nhwc >conv1",
      "conv1@f32:Cast:float32:NCHW <conv1 >conv1@f32",
      "bn1:BatchNorm:float32:NCHW <conv1@f32 >conv1@f32",
      "sc1:Scale:float32:NCHW <conv1@f32 >conv1@f32",
      "conv1@f32@bf16:Cast:bfloat16:NCHW <conv1@f32 >conv1@f32@bf16",
      "relu1:ReLU:bfloat16:NCHW <conv1@f32@bf16 >conv1@f32@bf16",
      "conv1@f32@bf16@bf16.nhwc:Cast:bfloat16:NHWC <conv1@f32@bf16 >conv1@f32@bf16@bf16.nhwc",
      "pool1:Pooling:bfloat16:NHWC <conv1@f32@bf16@bf16.nhwc >pool1",
      "conv2:Convolution:bfloat16:NHWC <pool1 >conv2",
      "pool1@f32.nhwc:Cast:float32:NHWC <pool1 >pool1@f32.nhwc",
      "conv2@f32.nhwc:Cast:float32:NHWC <conv2 >conv2@f32.nhwc",
      "sum:Eltwise:float32:NHWC <pool1@f32.nhwc <conv2@f32.nhwc >sum",
      "sum@bf16.nhwc:Cast:bfloat16:NHWC <sum >sum@bf16.nhwc",
      "cat:Concat:bfloat16:NHWC <sum@bf16.nhwc <conv2 >cat",
      "cat@f32:Cast:float32:NCHW <cat >cat@f32",
      "lrn:LRN:float32:NCHW <cat@f32 >lrn",
      "lrn@bf16:Cast:bfloat16:NCHW <lrn >lrn@bf16",
      "pool2:Pooling:bfloat16:NCHW <lrn@bf16 >pool2",
      "ip:InnerProduct:bfloat16:NCHW <pool2 >ip",
      "ip@f32:Cast:float32:NCHW <ip >ip@f32",
      "loss:SoftmaxWithLoss:float32:NCHW <ip@f32 <label >loss",
  };
  check_plan(k_block, CT_DEVICE_CPU, host, sizeof host / sizeof host[0]);
}

/* Tensors keep the logical order on the host whatever their memory order:
 * an NHWC tensor's upload puts value (n, c, h, w) at ((n H + h) W + w) C + c
 * and its download reads it back. */
static void test_tensor_layout(void **state) {
  const int shape[4] = {2, 3, 2, 2};
  ct_tensor *t = ct_tensor_new(CT_DEVICE_CPU, "t");
  ct_tensor_set_layout(t, CT_NHWC);
  ct_tensor_reshape_or_die(t, 4, shape);
  float in[24], back[24];
  for (int i = 0; i < 24; i++) in[i] = (float)i;
  ct_tensor_upload(t, in);
  const float *mem = t->data;
  for (int n = 0; n < 2; n++)
    for (int c = 0; c < 3; c++)
      for (int s = 0; s < 4; s++) assert_true(mem[(n * 4 + s) * 3 + c] == in[(n * 3 + c) * 4 + s]);
  ct_tensor_download(t, back);
  assert_memory_equal(back, in, sizeof in);
  /* in bfloat16 too (the values are exact) */
  ct_tensor_set_dtype(t, CT_BF16);
  ct_tensor_reshape_or_die(t, 4, shape);
  ct_tensor_upload(t, in);
  assert_true(ct_bf16_to_f32(((const uint16_t *)t->data)[1]) == in[4]);
  ct_tensor_download(t, back);
  assert_memory_equal(back, in, sizeof in);
  ct_tensor_free(t);
}

/* float32 everywhere leaves the net exactly as written; so does a net that
 * asks for float16 on the CPU, which has no float16 layers. */
static void test_dtype_pass_identity(void **state) {
  Caffe__NetParameter *n = net_from(k_net);
  size_t len = protobuf_c_message_get_packed_size(&n->base);
  uint8_t *before = malloc(len), *after = malloc(len + 64);
  protobuf_c_message_pack(&n->base, before);
  ct_error err;
  assert_int_equal(ct_net_plan_dtypes(n, CT_DEVICE_CPU, CT_F32, true, true, &err), CT_OK);
  assert_int_equal(protobuf_c_message_get_packed_size(&n->base), len);
  protobuf_c_message_pack(&n->base, after);
  assert_memory_equal(before, after, len);
  protobuf_c_message_free_unpacked(&n->base, NULL);
  /* NVCaffe's default_forward_type: FLOAT16 on the host: every layer float32 */
  n = net_from("default_forward_type: FLOAT16 default_backward_type: FLOAT16");
  Caffe__NetParameter *m = net_from(k_net);
  n->n_layer = m->n_layer;
  n->layer = m->layer;
  m->n_layer = 0;
  m->layer = NULL;
  assert_int_equal(ct_net_plan_dtypes(n, CT_DEVICE_CPU, CT_F32, false, true, &err), CT_OK);
  assert_int_equal(n->n_layer, 7);
  for (size_t i = 0; i < n->n_layer; i++) assert_int_equal(n->layer[i]->forward_type, CAFFE__TYPE__FLOAT);
  protobuf_c_message_free_unpacked(&n->base, NULL);
  protobuf_c_message_free_unpacked(&m->base, NULL);
  free(before);
  free(after);
}

static void test_dtype_pass_errors(void **state) {
  Caffe__NetParameter *n = net_from(
      "layer { name: 'data' type: 'Input' top: 'data' input_param { shape { dim: 1 } } } "
      "layer { name: 'r' type: 'ReLU' bottom: 'data' top: 'r' forward_type: INT }");
  ct_error err;
  assert_int_equal(ct_net_plan_dtypes(n, CT_DEVICE_CPU, CT_F32, false, true, &err),
                   CT_ERR_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "layer 'r'"));
  assert_non_null(strstr(err.msg, "not in integers"));
  protobuf_c_message_free_unpacked(&n->base, NULL);
}

/* A bfloat16 net builds, runs forward and backward, and its blobs hold the
 * types the pass gave them. */
static void test_net_builds(void **state) {
  skip_without_bf16();
  ct_context ctx;
  ct_error err;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 7, &err), CT_OK);
  assert_int_equal(ct_context_set_precision(&ctx, CT_BF16, true, &err), CT_OK);
  Caffe__NetParameter *p = net_from(k_net);
  ct_net_opts o = {.phase = CT_PHASE_TRAIN, .quiet = true};
  ct_net *net;
  if (ct_net_init(&net, p, &o, &ctx, &err) != CT_OK) fail_msg("%s", err.msg);
  assert_int_equal(ct_net_blob(net, "conv")->dtype, CT_BF16);
  assert_int_equal(ct_net_blob(net, "conv@f32")->dtype, CT_F32);
  assert_int_equal(ct_net_blob(net, "ip")->dtype, CT_BF16);
  assert_int_equal(ct_net_blob(net, "loss")->dtype, CT_F32);
  float label[2] = {1, 2};
  ct_tensor_upload(ct_net_blob(net, "label"), label);
  tu_fill(ct_net_blob(net, "data"), -1, 1, 3);
  double loss = 0;
  assert_int_equal(ct_net_forward(net, &loss, &err), CT_OK);
  assert_true(loss > 0.5 && loss < 2.0);
  ct_net_backward(net);
  ct_net_free(net);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  ct_context_free(&ctx);
}

/* NVCaffe's fields that Cortado parses without acting on are named, one
 * warning each; those it honours are not. */
static void test_ignored_fields(void **state) {
  Caffe__NetParameter *n = net_from(
      "default_forward_type: FLOAT16 global_grad_scale: 8 reduce_buckets: 6 "
      "layer { name: 'a' type: 'ReLU' forward_type: FLOAT16 backward_type: FLOAT16 } "
      "layer { name: 'b' type: 'ReLU' forward_math: FLOAT }");
  assert_int_equal(ct_caffe_log_ignored_fields(&n->base), 3); /* global_grad_scale is honoured */
  protobuf_c_message_free_unpacked(&n->base, NULL);
  ProtobufCMessage *m = NULL;
  ct_error err;
  /* LARC and the momentum and weight-decay schedules are honoured; the
   * solver's data type is not */
  const char *sp = "base_lr: 0.1 min_lr: 0.001 larc: true larc_eta: 0.002 larc_policy: 'clip' "
                   "momentum_policy: 'poly' max_momentum: 0.95 momentum_power: 2 "
                   "weight_decay_policy: 'poly' weight_decay_power: 1 solver_data_type: FLOAT16";
  assert_int_equal(ct_text_parse(&caffe__solver_parameter__descriptor, sp, strlen(sp), NULL, &m, &err),
                   CT_OK);
  assert_int_equal(ct_caffe_log_ignored_fields(m), 1);
  protobuf_c_message_free_unpacked(m, NULL);
}

static void test_cpu_refusals(void **state) {
  ct_context ctx;
  ct_error err;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 7, &err), CT_OK);
  assert_int_equal(ct_context_set_precision(&ctx, CT_F16, true, &err), CT_ERR_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "--precision=bf16"));
  if (ct_cpu_has_bf16()) assert_int_equal(ct_context_set_precision(&ctx, CT_BF16, true, &err), CT_OK);
  else assert_int_equal(ct_context_set_precision(&ctx, CT_BF16, true, &err), CT_ERR_UNSUPPORTED);
  ct_context_free(&ctx);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bf16_rounding),     cmocka_unit_test(test_f16_rounding),
      cmocka_unit_test(test_tensor_storage),    cmocka_unit_test(test_twin_convolution),
      cmocka_unit_test(test_twin_inner_product), cmocka_unit_test(test_twin_relu_split),
      cmocka_unit_test(test_cast_layer),        cmocka_unit_test(test_dtype_pass),
      cmocka_unit_test(test_dtype_pass_identity), cmocka_unit_test(test_dtype_pass_errors),
      cmocka_unit_test(test_net_builds),        cmocka_unit_test(test_cpu_refusals),
      cmocka_unit_test(test_ignored_fields),    cmocka_unit_test(test_layout_pass),
      cmocka_unit_test(test_tensor_layout),     cmocka_unit_test(test_twin_pooling),
      cmocka_unit_test(test_typed_arrays),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
