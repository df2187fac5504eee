/* Depthwise convolutions on a GPU (layers/conv/conv_depthwise.h): the
 * layers that get the kernels, in strict FP32 against the CPU (forward,
 * bottom, weight and bias gradients; one and two bottoms; strides, pads,
 * dilation, rectangular and 5x5 windows, several filters per channel, and
 * shapes large enough for many slices of the filter gradient), the gradient
 * checker, bfloat16 and float16 in both memory orders against the float32
 * twin, the same bits on every run, and which layers do not get them
 * (engine: CUDNN, group below the channels).  Exits 77 (skipped) without
 * a GPU. */
#include <stdio.h>
#include <string.h>

#include "cudnntest.h"
#include "layers/conv/conv_common.h"
#include "mptest.h"
#include "proto/textformat.h"

#define TOL 1e-4

static const ct_dtype k_types[2] = {CT_BF16, CT_F16};
static const double k_product_bound[2] = {1.0 / 64, 1.0 / 512};

typedef struct dw_case {
  const char *param; /* convolution_param's fields */
  const char *shape; /* bottom */
} dw_case;

static const dw_case k_cases[] = {
    /* MobileNet's: 3x3, pad 1, stride 1 and 2, no bias */
    {"num_output: 8 group: 8 kernel_size: 3 pad: 1 bias_term: false", "2,8,9,7"},
    {"num_output: 8 group: 8 kernel_size: 3 pad: 1 stride: 2 bias_term: false", "2,8,10,9"},
    /* a bias, 2 filters per channel, dilation 2 */
    {"num_output: 12 group: 6 kernel_size: 3 pad: 2 dilation: 2", "3,6,8,8"},
    /* 5x5 (25 taps), stride 3, no pad */
    {"num_output: 4 group: 4 kernel_size: 5 stride: 3", "2,4,13,11"},
    /* rectangular window and strides */
    {"num_output: 5 group: 5 kernel_h: 3 kernel_w: 1 stride_h: 1 stride_w: 2 pad_h: 1", "2,5,6,9"},
};

static Caffe__LayerParameter *layer_of(const char *param, const char *extra) {
  char text[512];
  snprintf(text, sizeof text,
           "name: 'dw' type: 'Convolution' convolution_param { %s %s weight_filler { type: "
           "'gaussian' std: 0.3 } bias_filler { type: 'constant' value: 0.1 } }",
           param, extra ? extra : "");
  return tu_layer_from(text);
}

static bool runs_depthwise(const tu_layer_case *c) {
  return ((const ct_conv *)c->l->priv)->dw != NULL;
}

static void expect_depthwise(const Caffe__LayerParameter *p, const char *shape, bool want) {
  tu_layer_case c;
  tu_layer_case_init(&c, p, 0, CT_PHASE_TRAIN, shape, 1);
  if (runs_depthwise(&c) != want)
    fail_msg("%s: depthwise kernels %s, expected %s", shape, runs_depthwise(&c) ? "run" : "do not run",
             want ? "they run" : "they do not");
  tu_layer_case_free(&c);
}

/* Forward, bottom and parameter gradients against the CPU, and the
 * gradient checker. */
static void test_against_cpu(void **state) {
  for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
    Caffe__LayerParameter *p = layer_of(k_cases[i].param, NULL);
    expect_depthwise(p, k_cases[i].shape, true);
    cd_compare3(p, CT_PHASE_TRAIN, k_cases[i].shape, 1, CD_CAFFE, false, TOL, NULL);
    ct_gradcheck_opts o = ct_gradcheck_defaults();
    o.step = 1e-1f; /* linear in bottom and weights */
    cd_gradient(p, CT_PHASE_TRAIN, k_cases[i].shape, CD_CAFFE, &o, NULL);
    protobuf_c_message_free_unpacked(&p->base, NULL);
  }
}

/* Two bottoms share the weights (their gradients add up); and MobileNet's
 * first depthwise layer at batch 16, whose filter gradient runs in many
 * slices. */
static void test_two_bottoms_and_large(void **state) {
  Caffe__LayerParameter *p = layer_of(k_cases[2].param, NULL);
  cd_compare3(p, CT_PHASE_TRAIN, "3,6,8,8;3,6,8,8", 2, CD_CAFFE, false, TOL, NULL);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  p = layer_of("num_output: 32 group: 32 kernel_size: 3 pad: 1", NULL);
  cd_compare3(p, CT_PHASE_TRAIN, "16,32,56,56", 1, CD_CAFFE, false, 1e-3, NULL);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

/* bfloat16 and float16, channels-first and channels-last, against the
 * float32 twin with test_gpu_mixed_precision.c's bounds. */
static void test_16_bit(void **state) {
  for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
    Caffe__LayerParameter *p = layer_of(k_cases[i].param, NULL);
    for (int k = 0; k < 2; k++)
      for (int o = 0; o < 2; o++)
        tu_twin_check_layout(p, 0, k_types[k], o ? CT_NHWC : CT_NCHW, k_cases[i].shape, 1,
                             k_product_bound[k]);
    protobuf_c_message_free_unpacked(&p->base, NULL);
  }
  /* MobileNet's first depthwise layer channels-last: the 16-byte kernels,
   * the filter gradient in many slices */
  Caffe__LayerParameter *p = layer_of("num_output: 32 group: 32 kernel_size: 3 pad: 1", NULL);
  for (int k = 0; k < 2; k++)
    tu_twin_check_layout(p, 0, k_types[k], CT_NHWC, "8,32,28,28", 1, k_product_bound[k]);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

/* Two backward passes from the same values give the same bits. */
static void test_deterministic(void **state) {
  Caffe__LayerParameter *p = layer_of("num_output: 64 group: 64 kernel_size: 3 pad: 1", NULL);
  tu_layer_case c;
  tu_layer_case_init(&c, p, 0, CT_PHASE_TRAIN, "8,64,28,28", 1);
  assert_true(runs_depthwise(&c));
  tu_forward(&c);
  tu_fill(c.top[0], -1.0f, 1.0f, 7);
  const size_t n = c.top[0]->count;
  float *dy = tu_values(c.top[0]);
  ct_tensor_upload_diff(c.top[0], dy);
  float *first[3] = {NULL, NULL, NULL};
  for (int run = 0; run < 2; run++) {
    bool prop[1] = {true};
    for (int i = 0; i < c.l->nparams; i++) ct_tensor_zero_diff(c.l->params[i]);
    ct_layer_backward(c.l, c.top, prop, c.bottom);
    const ct_tensor *t[3] = {c.l->params[0], c.l->params[1], c.bottom[0]};
    for (int j = 0; j < 3; j++) {
      float *h = malloc(t[j]->count * sizeof(float));
      ct_tensor_download_diff(t[j], h);
      if (run == 0) {
        first[j] = h;
      } else {
        if (memcmp(first[j], h, t[j]->count * sizeof(float)) != 0)
          fail_msg("gradient %d differs between two runs", j);
        free(h);
        free(first[j]);
      }
    }
  }
  (void)n;
  free(dy);
  tu_layer_case_free(&c);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

/* engine: CUDNN keeps cuDNN; a group below the channel count is no
 * depthwise layer. */
static void test_not_depthwise(void **state) {
  Caffe__LayerParameter *p = layer_of(k_cases[0].param, "engine: CUDNN");
  expect_depthwise(p, k_cases[0].shape, false);
  cd_compare3(p, CT_PHASE_TRAIN, k_cases[0].shape, 1, CD_CUDNN, false, TOL, NULL);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  p = layer_of("num_output: 8 group: 4 kernel_size: 3 pad: 1", NULL);
  expect_depthwise(p, "2,8,9,7", false);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  /* engine: CAFFE, as MobileNet's files say: the depthwise kernels */
  p = layer_of(k_cases[0].param, "engine: CAFFE");
  expect_depthwise(p, k_cases[0].shape, true);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  setenv("CORTADO_OWN_CONV", "0", 1);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_against_cpu),
      cmocka_unit_test(test_two_bottoms_and_large),
      cmocka_unit_test(test_16_bit),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_not_depthwise),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
