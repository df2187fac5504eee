/* Convolution + ReLU, Pooling + ReLU (both sides) and BatchNorm + Scale
 * fusion (net_fuse.c) and shared
 * Split tops on GPU 0: Convolution + ReLU fused against unfused on the GPU
 * and the CPU;
 * fused against unfused on cuDNN's batch normalisation and on the plain
 * kernels (cuDNN off), fused on the GPU against unfused on the CPU, a frozen
 * trunk (gamma and beta gradients only), and a small ResNet trained fused
 * and unfused through the solver (CUDA graphs).  FP32 math (TF32 off).
 * Skipped (77) without a GPU. */
#include "fuse_nets.h"
#include "gpu/cudnn_util.h"
#include "layers/conv/conv_common.h"

static const double k_tol = 1e-4;

/* The four shapes of the pair (BatchNorm in place or not, ReLU or not) and
 * the frozen trunk, fused against unfused on the device of ctx_a / ctx_b. */
static void compare_all(int device_b) {
  for (int k = 0; k < 5; k++) {
    bool in_place = k & 1, relu = k & 2, frozen = k == 4;
    ct_context ca, cb;
    rn_gpu_context(&ca, 11);
    if (device_b == CT_DEVICE_CPU) assert_int_equal(ct_context_init(&cb, CT_DEVICE_CPU, 11, NULL), CT_OK);
    else rn_gpu_context(&cb, 11);
    char *text = frozen ? fz_bn_net_frozen(6) : fz_bn_net(6, in_place, relu);
    ct_net *a = fz_net(text, &ca, true), *b = fz_net(text, &cb, false);
    assert_int_equal(fz_absorbed_count(a), 1);
    assert_int_equal(fz_absorbed_count(b), 0);
    fz_compare_passes(a, b, frozen || in_place ? "c1" : "b1", 2, !frozen, k_tol);
    free(text);
    ct_net_free(a);
    ct_net_free(b);
    ct_context_free(&ca);
    ct_context_free(&cb);
  }
}

static void test_gpu_fuse_cudnn(void **state) { compare_all(0); }

static void test_gpu_fuse_vs_cpu(void **state) { compare_all(CT_DEVICE_CPU); }

static void test_gpu_fuse_plain_kernels(void **state) {
  ct_cudnn_set_enabled(false);
  compare_all(0);
  ct_cudnn_set_enabled(true);
}

/* Two cuDNN convolutions with biases, each followed by a ReLU in place,
 * then an InnerProduct: fused against unfused on the GPU and on the CPU
 * (float32: the ReLUs' forwards absorbed), and on the GPU in bfloat16 with
 * 5 and 4 channels and with 16 and 8 (the ReLUs absorbed both ways): the
 * top, the input gradient and every parameter gradient over two
 * accumulated passes. */
static void test_gpu_fuse_conv_relu(void **state) {
  static const char fmt[] =
      "name: 'cr' force_backward: true\n"
      "layer { name: 'data' type: 'Input' top: 'data' top: 'label'\n"
      "  input_param { shape { dim: 6 dim: 3 dim: 7 dim: 6 } shape { dim: 6 } } }\n"
      "layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'c1'\n"
      "  convolution_param { num_output: %d kernel_size: 3 pad: 1\n"
      "    weight_filler { type: 'gaussian' std: 0.3 }\n"
      "    bias_filler { type: 'uniform' min: -0.5 max: 0.5 } } }\n"
      "layer { name: 'relu1' type: 'ReLU' bottom: 'c1' top: 'c1' }\n"
      "layer { name: 'conv2' type: 'Convolution' bottom: 'c1' top: 'c2'\n"
      "  convolution_param { num_output: %d kernel_size: 3 stride: 2\n"
      "    weight_filler { type: 'gaussian' std: 0.3 }\n"
      "    bias_filler { type: 'uniform' min: -0.5 max: 0.5 } } }\n"
      "layer { name: 'relu2' type: 'ReLU' bottom: 'c2' top: 'c2' }\n"
      "layer { name: 'ip' type: 'InnerProduct' bottom: 'c2' top: 'ip'\n"
      "  inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.3 } } }\n"
      "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n";
  /* 5 and 4 channels, and 16 and 8: 16-byte vectors in the passes */
  char text[sizeof fmt + 8], wide[sizeof fmt + 8];
  snprintf(text, sizeof text, fmt, 5, 4);
  snprintf(wide, sizeof wide, fmt, 16, 8);
  for (int k = 0; k < 4; k++) {
    ct_context ca, cb;
    rn_gpu_context(&ca, 13);
    if (k == 1) assert_int_equal(ct_context_init(&cb, CT_DEVICE_CPU, 13, NULL), CT_OK);
    else rn_gpu_context(&cb, 13);
    const bool half = k >= 2;
    if (half) { /* bfloat16 channels-last: the ReLU's forward in the bias pass (the same
                   roundings), its backward in the bias gradient's pass */
      ca.precision = cb.precision = CT_BF16;
      ca.precision_given = cb.precision_given = true;
    }
    const char *net = k == 3 ? wide : text;
    ct_net *a = fz_net(net, &ca, true), *b = fz_net(net, &cb, false);
    int fused = 0, both = 0, unfused = 0;
    for (int i = 0; i < a->nlayers; i++) {
      fused += a->layers[i]->forward_absorbed;
      both += a->layers[i]->absorbed;
    }
    for (int i = 0; i < b->nlayers; i++) unfused += b->layers[i]->forward_absorbed + b->layers[i]->absorbed;
    assert_int_equal(fused, half ? 0 : 2);
    assert_int_equal(both, half ? 2 : 0);
    assert_int_equal(unfused, 0);
    if (half) assert_int_equal(ct_net_blob(a, "c2")->layout, CT_NHWC);
    fz_compare_passes(a, b, "c2", 2, true, k == 1 ? 1e-3 : half ? 1e-2 : k_tol);
    ct_net_free(a);
    ct_net_free(b);
    ct_context_free(&ca);
    ct_context_free(&cb);
  }
}

/* cifar10_quick's pattern: conv1 -> MAX pool1 (3x3/2, ceil; it adds
 * conv1's bias) -> ReLU in place on its top (absorbed by the pooling), conv2 -> ReLU in place
 * (forward absorbed by conv2, backward by the pooling after it) -> pool2
 * (AVE, then MAX) -> a ReLU in place on pool2's top -> InnerProduct:
 * fused against unfused on the GPU and on the CPU, top, input gradient and
 * parameter gradients over two accumulated passes. */
static void test_gpu_fuse_pool_relu(void **state) {
  static const char fmt[] =
      "name: 'pr' force_backward: true\n"
      "layer { name: 'data' type: 'Input' top: 'data' top: 'label'\n"
      "  input_param { shape { dim: 6 dim: 3 dim: 9 dim: 8 } shape { dim: 6 } } }\n"
      "layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'c1'\n"
      "  convolution_param { num_output: 5 kernel_size: 3 pad: 1\n"
      "    weight_filler { type: 'gaussian' std: 0.3 }\n"
      "    bias_filler { type: 'uniform' min: -0.5 max: 0.5 } } }\n"
      "layer { name: 'pool1' type: 'Pooling' bottom: 'c1' top: 'p1'\n"
      "  pooling_param { pool: MAX kernel_size: 3 stride: 2 } }\n"
      "layer { name: 'relu1' type: 'ReLU' bottom: 'p1' top: 'p1' }\n"
      "layer { name: 'conv2' type: 'Convolution' bottom: 'p1' top: 'c2'\n"
      "  convolution_param { num_output: 4 kernel_size: 3 pad: 1\n"
      "    weight_filler { type: 'gaussian' std: 0.3 }\n"
      "    bias_filler { type: 'uniform' min: -0.5 max: 0.5 } } }\n"
      "layer { name: 'relu2' type: 'ReLU' bottom: 'c2' top: 'c2' }\n"
      "layer { name: 'pool2' type: 'Pooling' bottom: 'c2' top: 'p2'\n"
      "  pooling_param { pool: %s kernel_size: 3 stride: 2 pad: 1 } }\n"
      "layer { name: 'relu3' type: 'ReLU' bottom: 'p2' top: 'p2' }\n"
      "layer { name: 'ip' type: 'InnerProduct' bottom: 'p2' top: 'ip'\n"
      "  inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.3 } } }\n"
      "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n";
  for (int k = 0; k < 4; k++) {
    char text[sizeof fmt + 8];
    snprintf(text, sizeof text, fmt, k & 1 ? "MAX" : "AVE");
    ct_context ca, cb;
    rn_gpu_context(&ca, 17);
    if (k & 2) assert_int_equal(ct_context_init(&cb, CT_DEVICE_CPU, 17, NULL), CT_OK);
    else rn_gpu_context(&cb, 17);
    ct_net *a = fz_net(text, &ca, true), *b = fz_net(text, &cb, false);
    int fwd = 0, bwd = 0;
    for (int i = 0; i < a->nlayers; i++) {
      fwd += a->layers[i]->forward_absorbed;
      bwd += a->layers[i]->backward_absorbed;
    }
    assert_int_equal(fz_absorbed_count(a), 2); /* relu1, relu3 */
    assert_int_equal(fwd, 1);                  /* relu2, by conv2 */
    assert_int_equal(bwd, 1);                  /* relu2, by pool2 */
    assert_int_equal(fz_absorbed_count(b), 0);
    assert_string_equal(a->layers[1]->name, "conv1");
    assert_true(((const ct_conv *)a->layers[1]->priv)->bias_deferred);
    assert_false(((const ct_conv *)a->layers[4]->priv)->bias_deferred);
    fz_compare_passes(a, b, "p2", 2, true, k & 2 ? 1e-3 : k_tol);
    ct_net_free(a);
    ct_net_free(b);
    ct_context_free(&ca);
    ct_context_free(&cb);
  }
}

/* Split tops view their bottom's data on the device too. */
static void expect_split_views(const ct_net *net) {
  int splits = 0;
  for (int i = 0; i < net->nlayers; i++) {
    if (strcmp(net->layers[i]->ops->type, "Split") != 0) continue;
    splits++;
    for (int j = 0; j < net->layers[i]->ntop; j++) {
      assert_ptr_equal(net->tops[i][j]->data, net->bottoms[i][0]->data);
      assert_true(net->tops[i][j]->diff != net->bottoms[i][0]->diff);
    }
  }
  assert_true(splits >= 1);
}

/* The small ResNet trained 5 steps with momentum through the solver: fused
 * and unfused on the GPU agree, and with the unfused CPU. */
static void test_gpu_fuse_trains_same(void **state) {
  static const char rest[] =
      "type: 'SGD' base_lr: 0.1 momentum: 0.9 weight_decay: 0.0005 lr_policy: 'fixed' "
      "random_seed: 7 display: 0 average_loss: 1";
  char *text = fz_res_net(8);
  ct_context ca, cb, cc;
  rn_gpu_context(&ca, 7);
  rn_gpu_context(&cb, 7);
  assert_int_equal(ct_context_init(&cc, CT_DEVICE_CPU, 7, NULL), CT_OK);
  ct_solver *a = rn_solver(text, rest, &ca, NULL);
  setenv("CORTADO_FUSE", "0", 1);
  ct_solver *b = rn_solver(text, rest, &cb, NULL);
  ct_solver *c = rn_solver(text, rest, &cc, NULL);
  unsetenv("CORTADO_FUSE");
  /* three Scales, and the ReLU after the sum (Eltwise + ReLU) */
  assert_int_equal(fz_absorbed_count(a->net), 4);
  assert_int_equal(fz_absorbed_count(b->net), 0);
  expect_split_views(a->net);
  ct_solver *all[3] = {a, b, c};
  for (int k = 0; k < 3; k++) rn_fill_inputs(all[k]->net, 5, 99);
  ct_error err;
  for (int it = 0; it < 5; it++) {
    for (int k = 0; k < 3; k++)
      if (ct_solver_step(all[k], 1, &err) != CT_OK) fail_msg("step: %s", err.msg);
    float *pa = rn_flat(a->net, false), *pb = rn_flat(b->net, false), *pc = rn_flat(c->net, false);
    fz_expect_close("GPU parameters after a step", pa, pb, a->net->flat_count, k_tol);
    fz_expect_close("GPU fused vs CPU parameters", pa, pc, a->net->flat_count, 1e-3);
    free(pa), free(pb), free(pc);
  }
  free(text);
  for (int k = 0; k < 3; k++) ct_solver_free(all[k]);
  ct_context_free(&ca);
  ct_context_free(&cb);
  ct_context_free(&cc);
}

/* The small ResNet in bfloat16 channels-last, 8 channels: fused, each
 * BatchNorm computes its Scale and the ReLU after it on cuDNN's persistent
 * kernels, and the sum its ReLU; against the unfused net in bfloat16 over
 * two accumulated passes (bfloat16's 8 bits: a looser bound). */
static void test_gpu_fuse_bf16(void **state) {
  char *text = fz_res_net(8);
  for (char *p = strstr(text, "num_output: 4"); p; p = strstr(p, "num_output: 4")) memcpy(p, "num_output: 8", 13);
  ct_context ca, cb;
  rn_gpu_context(&ca, 5);
  rn_gpu_context(&cb, 5);
  ca.precision = cb.precision = CT_BF16;
  ca.precision_given = cb.precision_given = true;
  ct_net *a = fz_net(text, &ca, true), *b = fz_net(text, &cb, false);
  assert_int_equal(fz_absorbed_count(a), 6);
  assert_int_equal(fz_absorbed_count(b), 0);
  assert_int_equal(ct_net_blob(a, "c1")->layout, CT_NHWC);
  /* the sum is written over the last BatchNorm's own top, which nothing
   * reads afterwards (net_fuse.c); unfused, it has a top of its own */
  assert_ptr_equal(ct_net_blob(a, "s")->data, ct_net_blob(a, "c2b@bn2b")->data);
  assert_ptr_not_equal(ct_net_blob(b, "s")->data, ct_net_blob(b, "c2b@bn2b")->data);
  fz_compare_passes(a, b, "s", 2, false, 2e-2);
  free(text);
  ct_net_free(a);
  ct_net_free(b);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

/* Frozen statistics (use_global_stats, as Caffe's ResNets are fine-tuned):
 * BatchNorm + Scale + ReLU as one affine pass per channel, fused against
 * unfused, in float32 (in place and not), and in bfloat16 channels-last
 * without the ReLU (the fused pair rounds once where the unfused rounds
 * twice: near 0 a ReLU would then pass different values), normwise (the
 * InnerProduct's outputs near 0 differ by more than their own size). */
static void test_gpu_fuse_frozen(void **state) {
  for (int k = 0; k < 3; k++) {
    const bool in_place = k != 1, bf16 = k == 2;
    char *text = fz_bn_net(6, in_place, !bf16);
    char *p = strstr(text, "moving_average_fraction: 0.9");
    assert_non_null(p);
    memcpy(p, "use_global_stats: true      ", 28);
    ct_context ca, cb;
    rn_gpu_context(&ca, 13);
    rn_gpu_context(&cb, 13);
    if (bf16) {
      ca.precision = cb.precision = CT_BF16;
      ca.precision_given = cb.precision_given = true;
    }
    ct_net *a = fz_net(text, &ca, true), *b = fz_net(text, &cb, false);
    /* statistics of a trained net (a factor of 0 would give 1/std = 1/sqrt(eps)) */
    ct_net *both[2] = {a, b};
    for (int q = 0; q < 2; q++)
      for (int i = 0; i < both[q]->nlayers; i++) {
        ct_layer *l = both[q]->layers[i];
        if (strcmp(l->ops->type, "BatchNorm") != 0) continue;
        float *v = malloc(l->params[0]->count * sizeof(float));
        for (size_t j = 0; j < l->params[0]->count; j++) v[j] = 0.1f * (float)j - 0.1f;
        ct_tensor_upload(l->params[0], v);
        for (size_t j = 0; j < l->params[1]->count; j++) v[j] = 0.5f + 0.25f * (float)j;
        ct_tensor_upload(l->params[1], v);
        v[0] = 1.0f;
        ct_tensor_upload(l->params[2], v);
        free(v);
      }
    assert_int_equal(fz_absorbed_count(a), bf16 ? 1 : 2); /* the Scale (and the ReLU) */
    assert_int_equal(fz_absorbed_count(b), 0);
    if (bf16) fz_compare_passes_norm(a, b, "ip", 2, true, 2e-2);
    else fz_compare_passes(a, b, "ip", 2, true, k_tol);
    free(text);
    ct_net_free(a);
    ct_net_free(b);
    ct_context_free(&ca);
    ct_context_free(&cb);
  }
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
  tu_require_gpu();
  ct_log_set_level(CT_LOG_WARNING);
  rn_require_layers();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_fuse_cudnn),
      cmocka_unit_test(test_gpu_fuse_vs_cpu),
      cmocka_unit_test(test_gpu_fuse_plain_kernels),
      cmocka_unit_test(test_gpu_fuse_trains_same),
      cmocka_unit_test(test_gpu_fuse_conv_relu),
      cmocka_unit_test(test_gpu_fuse_pool_relu),
      cmocka_unit_test(test_gpu_fuse_bf16),
      cmocka_unit_test(test_gpu_fuse_frozen),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
