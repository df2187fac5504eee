/* Mixed precision on a GPU: Convolution (cuDNN), InnerProduct (cuBLAS
 * GemmEx), ReLU and Split in bfloat16 and float16 against their float32
 * twins on the same GPU (mptest.h), with the bounds of
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
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
