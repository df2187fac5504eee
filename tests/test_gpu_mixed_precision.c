/* Mixed precision on a GPU: Convolution (cuDNN), InnerProduct (cuBLAS
 * GemmEx), ReLU, Split, BatchNorm (cuDNN), Scale, Pooling, Eltwise and
 * Concat in bfloat16 and float16, channels-first (NCHW) and channels-last
 * (NHWC) where the type has that path, against their float32 twins on the
 * same GPU (mptest.h), with the bounds of
 * test_mixed_precision.c: 2^-6 of the largest value for products in
 * bfloat16 (8 significant bits), 2^-9 in float16 (11 bits); one rounding
 * for layers that only pass values on.  The float32 twin runs in strict
 * FP32 (no TF32), so that only the 16-bit arithmetic differs. */
#include <string.h>

#include "layertest.h"
#include "mptest.h"
#include "proto/textformat.h"
#include "testutil.h"

static const ct_dtype k_types[2] = {CT_BF16, CT_F16};
static const double k_product_bound[2] = {1.0 / 64, 1.0 / 512};
static const double k_rounding[2] = {1.0 / 256, 1.0 / 2048};

static void twin_all(const char *text, const char *shapes, int ntop, bool product) {
  Caffe__LayerParameter *p = tu_layer_from(text);
  for (int k = 0; k < 2; k++)
    tu_twin_check(p, 0, k_types[k], shapes, ntop, product ? k_product_bound[k] : k_rounding[k]);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

/* Both types, both memory orders. */
static void twin_orders(const char *text, const char *shapes, int ntop, bool product) {
  Caffe__LayerParameter *p = tu_layer_from(text);
  for (int k = 0; k < 2; k++)
    for (int o = 0; o < 2; o++)
      tu_twin_check_layout(p, 0, k_types[k], o ? CT_NHWC : CT_NCHW, shapes, ntop,
                           product ? k_product_bound[k] : k_rounding[k]);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

/* Channels-last convolutions: the filter moved to (K, kh, kw, C / group)
 * and its gradient back, the bias over rows of channels. */
static void test_convolution_nhwc(void **state) {
  static const char *const convs[] = {
      "name: 'conv' type: 'Convolution' convolution_param { num_output: 16 kernel_size: 3 "
      "pad: 1 weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'constant' "
      "value: 0.2 } }",
      "name: 'conv' type: 'Convolution' convolution_param { num_output: 6 kernel_size: 5 "
      "stride: 2 group: 3 bias_term: false weight_filler { type: 'xavier' } }",
      "name: 'conv' type: 'Convolution' convolution_param { num_output: 64 kernel_size: 1 "
      "weight_filler { type: 'msra' } bias_filler { type: 'constant' value: 0.1 } }",
  };
  static const char *const shapes[] = {"4,8,10,10", "2,3,13,11", "8,32,7,7"};
  for (int i = 0; i < 3; i++) {
    Caffe__LayerParameter *p = tu_layer_from(convs[i]);
    for (int k = 0; k < 2; k++)
      tu_twin_check_layout(p, 0, k_types[k], CT_NHWC, shapes[i], 1, k_product_bound[k]);
    protobuf_c_message_free_unpacked(&p->base, NULL);
  }
}

static void test_batch_norm_scale(void **state) {
  /* training statistics (cuDNN's persistent kernels channels-last), and
   * global ones (the affine kernel) */
  twin_orders("name: 'bn' type: 'BatchNorm' batch_norm_param { use_global_stats: false }",
              "8,16,7,7", 1, true);
  twin_orders("name: 'bn' type: 'BatchNorm' batch_norm_param { use_global_stats: true }",
              "4,16,5,5", 1, true);
  twin_orders("name: 'sc' type: 'Scale' scale_param { bias_term: true filler { type: 'uniform' "
              "min: 0.5 max: 1.5 } bias_filler { type: 'constant' value: 0.3 } }",
              "4,24,5,6", 1, true);
}

static void test_pooling(void **state) {
  /* Caffe's rounded-up windows (which cuDNN cannot give), padding, global */
  twin_orders("name: 'p' type: 'Pooling' pooling_param { pool: MAX kernel_size: 3 stride: 2 }",
              "2,16,9,9", 1, false);
  twin_orders("name: 'p' type: 'Pooling' pooling_param { pool: AVE kernel_size: 3 stride: 1 "
              "pad: 1 }",
              "2,8,6,7", 1, true);
  twin_orders("name: 'p' type: 'Pooling' pooling_param { pool: AVE global_pooling: true }",
              "4,32,7,7", 1, true);
}

static void test_eltwise_concat(void **state) {
  twin_orders("name: 'e' type: 'Eltwise' eltwise_param { operation: SUM coeff: 1 coeff: -0.5 }",
              "2,6,5,5;2,6,5,5", 1, true);
  twin_orders("name: 'e' type: 'Eltwise' eltwise_param { operation: SUM }",
              "2,6,5,5;2,6,5,5;2,6,5,5", 1, true);
  /* sizes of whole 16-byte vectors: the vector kernels */
  twin_orders("name: 'e' type: 'Eltwise' eltwise_param { operation: SUM coeff: 1 coeff: -0.5 }",
              "2,8,4,4;2,8,4,4", 1, true);
  twin_orders("name: 'e' type: 'Eltwise' eltwise_param { operation: PROD }", "2,6,5,5;2,6,5,5",
              1, true);
  twin_orders("name: 'e' type: 'Eltwise' eltwise_param { operation: MAX }",
              "2,6,5,5;2,6,5,5;2,6,5,5", 1, false);
  twin_orders("name: 'c' type: 'Concat'", "2,3,4,5;2,5,4,5;2,1,4,5", 1, false);
  twin_orders("name: 'c' type: 'Concat' concat_param { axis: 0 }", "2,3,4,5;1,3,4,5", 1, false);
}

static void test_relu_split_nhwc(void **state) {
  Caffe__LayerParameter *r = tu_layer_from("name: 'relu' type: 'ReLU'");
  Caffe__LayerParameter *sp = tu_layer_from("name: 'split' type: 'Split'");
  for (int k = 0; k < 2; k++) {
    tu_twin_check_layout(r, 0, k_types[k], CT_NHWC, "2,3,4,5", 1, k_rounding[k]);
    tu_twin_check_layout(sp, 0, k_types[k], CT_NHWC, "3,7,2,2", 2, k_rounding[k]);
    tu_twin_check_layout(sp, 0, k_types[k], CT_NHWC, "2,8,3,3", 3, k_rounding[k]);
  }
  protobuf_c_message_free_unpacked(&r->base, NULL);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
}

/* Cast between orders and types: NCHW float32 -> NHWC bfloat16 and back
 * gives the values rounded once; its backward reorders the gradient. */
static void test_cast_orders(void **state) {
  Caffe__LayerParameter *p = tu_layer_from("name: 'c' type: 'Cast' forward_type: BFLOAT16");
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, p, 0, CT_PHASE_TRAIN, "3,5,4,6", 1, &err), CT_OK);
  ct_tensor_set_dtype(c.top[0], CT_BF16);
  ct_tensor_set_layout(c.top[0], CT_NHWC);
  c.l->dtype = CT_BF16;
  c.l->layout = CT_NHWC;
  assert_int_equal(ct_layer_reshape(c.l, c.bottom, c.top, &err), CT_OK);
  ct_tensor_need_diff(c.top[0]);
  tu_forward(&c);
  const size_t n = c.bottom[0]->count;
  float *x = tu_values(c.bottom[0]), *y = tu_values(c.top[0]);
  for (size_t i = 0; i < n; i++) assert_true(y[i] == ct_bf16_to_f32(ct_f32_to_bf16(x[i])));
  ct_tensor_upload_diff(c.top[0], y);
  const bool down[1] = {true};
  ct_layer_backward(c.l, c.top, down, c.bottom);
  ct_context_sync(&c.ctx);
  float *dx = malloc(n * sizeof(float));
  ct_tensor_download_diff(c.bottom[0], dx);
  for (size_t i = 0; i < n; i++) assert_true(dx[i] == y[i]);
  free(x);
  free(y);
  free(dx);
  tu_layer_case_free(&c);
  protobuf_c_message_free_unpacked(&p->base, NULL);
}

static void test_convolution(void **state) {
  twin_all("name: 'conv' type: 'Convolution' convolution_param { num_output: 16 kernel_size: 3 "
           "pad: 1 weight_filler { type: 'gaussian' std: 0.1 } bias_filler { type: 'constant' "
           "value: 0.2 } }",
           "4,8,10,10", 1, true);
  twin_all("name: 'conv' type: 'Convolution' convolution_param { num_output: 6 kernel_size: 5 "
           "stride: 2 group: 3 bias_term: false weight_filler { type: 'xavier' } }",
           "2,3,13,11", 1, true);
  twin_all("name: 'conv' type: 'Convolution' convolution_param { num_output: 64 kernel_size: 1 "
           "weight_filler { type: 'msra' } bias_filler { type: 'constant' value: 0.1 } }",
           "8,32,7,7", 1, true);
}

static void test_inner_product(void **state) {
  twin_all("name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 10 "
           "weight_filler { type: 'xavier' } bias_filler { type: 'constant' value: -0.1 } }",
           "7,4,5,6", 1, true);
  twin_all("name: 'ip' type: 'InnerProduct' inner_product_param { num_output: 33 transpose: true "
           "weight_filler { type: 'gaussian' std: 0.3 } bias_term: false }",
           "5,64", 1, true);
}

static void test_relu_split(void **state) {
  twin_all("name: 'relu' type: 'ReLU'", "2,3,4,5", 1, false);
  twin_all("name: 'relu' type: 'ReLU' relu_param { negative_slope: 0.1 }", "2,3,4,5", 1, false);
  twin_all("name: 'split' type: 'Split'", "3,7,2", 3, false);
}

int main(int argc, char **argv) {
  tu_require_gpu();
  tu_filter_tests(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_convolution),
      cmocka_unit_test(test_inner_product),
      cmocka_unit_test(test_relu_split),
      cmocka_unit_test(test_convolution_nhwc),
      cmocka_unit_test(test_batch_norm_scale),
      cmocka_unit_test(test_pooling),
      cmocka_unit_test(test_eltwise_concat),
      cmocka_unit_test(test_relu_split_nhwc),
      cmocka_unit_test(test_cast_orders),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
