/* Nets and comparisons shared by the BatchNorm + Scale fusion tests
 * (test_net_fuse.c on the CPU, test_gpu_net_fuse.c on a GPU): the same net
 * built fused and unfused (ct_net_opts.no_fusion) must give the same
 * outputs, input gradients, parameter gradients and running statistics. */
#ifndef CT_TEST_FUSE_NETS_H
#define CT_TEST_FUSE_NETS_H

#include "runtime_nets.h"

/* conv1 (no bias) -> BatchNorm -> Scale (bias, random gamma and beta) [->
 * ReLU] -> InnerProduct -> SoftmaxWithLoss, force_backward, batch N of
 * 3x5x4.  The BatchNorm is in place on conv1's top or writes 'b1'; the Scale
 * and the ReLU are in place on the BatchNorm's top. */
static inline char *fz_bn_net(int n, bool bn_in_place, bool relu) {
  const char *t = bn_in_place ? "c1" : "b1";
  char relu_layer[128] = "";
  if (relu)
    snprintf(relu_layer, sizeof relu_layer,
             "layer { name: 'relu1' type: 'ReLU' bottom: '%s' top: '%s' }\n", t, t);
  char *s = malloc(4096);
  snprintf(s, 4096,
           "name: 'bn' force_backward: true\n"
           "layer { name: 'data' type: 'Input' top: 'data' top: 'label'\n"
           "  input_param { shape { dim: %d dim: 3 dim: 5 dim: 4 } shape { dim: %d } } }\n"
           "layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'c1'\n"
           "  convolution_param { num_output: 4 kernel_size: 3 pad: 1 bias_term: false\n"
           "    weight_filler { type: 'gaussian' std: 0.3 } } }\n"
           "layer { name: 'bn1' type: 'BatchNorm' bottom: 'c1' top: '%s'\n"
           "  batch_norm_param { moving_average_fraction: 0.9 } }\n"
           "layer { name: 'sc1' type: 'Scale' bottom: '%s' top: '%s'\n"
           "  scale_param { bias_term: true filler { type: 'uniform' min: 0.5 max: 1.5 }\n"
           "    bias_filler { type: 'uniform' min: -0.5 max: 0.5 } } }\n"
           "%s"
           "layer { name: 'ip' type: 'InnerProduct' bottom: '%s' top: 'ip'\n"
           "  inner_product_param { num_output: 5 weight_filler { type: 'gaussian' std: 0.3 } } }\n"
           "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n",
           n, n, t, t, t, relu_layer, t);
  return s;
}

/* fz_bn_net in place without ReLU, with conv1 frozen (lr_mult 0) and no
 * force_backward: nothing below the BatchNorm needs a gradient, so the
 * fused pair computes only dgamma and dbeta. */
static inline char *fz_bn_net_frozen(int n) {
  char *s = fz_bn_net(n, true, false);
  char *p = strstr(s, " force_backward: true");
  memmove(p, p + 21, strlen(p + 21) + 1);
  p = strstr(s, "top: 'c1'\n") + 10;
  const char *frozen = "  param { lr_mult: 0 }\n";
  memmove(p + strlen(frozen), p, strlen(p) + 1);
  memcpy(p, frozen, strlen(frozen));
  return s;
}

/* A small residual net in Caffe's ResNet form: conv/BN/Scale/ReLU blocks
 * in place, a two-convolution branch summed with its input, global average
 * pooling, an InnerProduct and SoftmaxWithLoss; batch N of 3x6x6. */
static inline char *fz_res_net(int n) {
  static const char block[] =
      "layer { name: 'conv%1$s' type: 'Convolution' bottom: '%2$s' top: 'c%1$s'\n"
      "  param { lr_mult: 1 decay_mult: 1 }\n"
      "  convolution_param { num_output: 4 kernel_size: 3 pad: 1 bias_term: false\n"
      "    weight_filler { type: 'msra' } } }\n"
      "layer { name: 'bn%1$s' type: 'BatchNorm' bottom: 'c%1$s' top: 'c%1$s' }\n"
      "layer { name: 'sc%1$s' type: 'Scale' bottom: 'c%1$s' top: 'c%1$s'\n"
      "  scale_param { bias_term: true } }\n";
  char *s = malloc(8192), b1[1024], b2a[1024], b2b[1024];
  snprintf(b1, sizeof b1, block, "1", "data");
  snprintf(b2a, sizeof b2a, block, "2a", "c1");
  snprintf(b2b, sizeof b2b, block, "2b", "c2a");
  snprintf(s, 8192,
           "name: 'res'\n"
           "layer { name: 'data' type: 'Input' top: 'data' top: 'label'\n"
           "  input_param { shape { dim: %d dim: 3 dim: 6 dim: 6 } shape { dim: %d } } }\n"
           "%s"
           "layer { name: 'relu1' type: 'ReLU' bottom: 'c1' top: 'c1' }\n"
           "%s"
           "layer { name: 'relu2a' type: 'ReLU' bottom: 'c2a' top: 'c2a' }\n"
           "%s"
           "layer { name: 'sum' type: 'Eltwise' bottom: 'c1' bottom: 'c2b' top: 's' }\n"
           "layer { name: 'relu_s' type: 'ReLU' bottom: 's' top: 's' }\n"
           "layer { name: 'pool' type: 'Pooling' bottom: 's' top: 'p'\n"
           "  pooling_param { pool: AVE global_pooling: true } }\n"
           "layer { name: 'ip' type: 'InnerProduct' bottom: 'p' top: 'ip'\n"
           "  inner_product_param { num_output: 5 weight_filler { type: 'xavier' } } }\n"
           "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n",
           n, n, b1, b2a, b2b);
  return s;
}

/* A TRAIN net from text on ctx, fused or not. */
static inline ct_net *fz_net(const char *text, ct_context *ctx, bool fused) {
  Caffe__NetParameter *p = rn_parse_net(text);
  ct_net_opts o = {.phase = CT_PHASE_TRAIN, .quiet = true, .no_fusion = !fused};
  ct_net *net = NULL;
  ct_error err;
  if (ct_net_init(&net, p, &o, ctx, &err) != CT_OK) fail_msg("net init: %s", err.msg);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  return net;
}

static inline int fz_absorbed_count(const ct_net *net) {
  int n = 0;
  for (int i = 0; i < net->nlayers; i++) n += net->layers[i]->absorbed;
  return n;
}

/* count values of a device array on the host (caller frees). */
static inline float *fz_host(const ct_net *net, const float *dev, size_t count) {
  float *h = malloc((count + 1) * sizeof(float));
  ct_mem_copy(CT_DEVICE_CPU, h, net->ctx->device, dev, count * sizeof(float));
  return h;
}

/* Normwise instead of elementwise (fz_compare_passes_norm): errors over the
 * largest value of b. */
static bool fz_normwise;

static inline void fz_expect_close(const char *what, const float *a, const float *b, size_t n,
                                   double tol) {
  double floor = 1e-2;
  for (size_t i = 0; fz_normwise && i < n; i++) floor = fmax(floor, fabs((double)b[i]));
  double e = tu_max_rel_err(a, b, n, floor);
  if (!(e <= tol)) fail_msg("%s: fused and unfused differ, max relative error %g > %g", what, e, tol);
}

/* A blob's values or gradients as float32 in the logical order (of any
 * type and memory order; caller frees). */
static inline float *fz_values(const ct_tensor *t, bool diff) {
  float *h = malloc((t->count + 1) * sizeof(float));
  if (diff) ct_tensor_download_diff(t, h);
  else ct_tensor_download(t, h);
  return h;
}

/* rounds forward + backward passes of a (fused) and b (unfused) on the same
 * inputs, with the parameter gradients accumulated over the rounds (as
 * iter_size does): the loss, the top of the BatchNorm + Scale pair
 * (blob `out`), the input gradient (when check_input), every parameter
 * gradient and the running statistics (the flat data) agree within tol. */
static inline void fz_compare_passes(ct_net *a, ct_net *b, const char *out, int rounds,
                                     bool check_input, double tol) {
  ct_net_clear_param_diffs(a);
  ct_net_clear_param_diffs(b);
  for (int r = 0; r < rounds; r++) {
    rn_fill_inputs(a, 5, 30 + (uint64_t)r);
    rn_fill_inputs(b, 5, 30 + (uint64_t)r);
    ct_error err;
    double la, lb;
    assert_int_equal(ct_net_forward(a, &la, &err), CT_OK);
    assert_int_equal(ct_net_forward(b, &lb, &err), CT_OK);
    if (!(fabs(la - lb) <= tol * fmax(1.0, fabs(lb)))) fail_msg("loss %g vs %g", la, lb);
    const ct_tensor *ya = ct_net_blob(a, out), *yb = ct_net_blob(b, out);
    float *ha = fz_values(ya, false), *hb = fz_values(yb, false);
    fz_expect_close("output", ha, hb, ya->count, tol);
    free(ha), free(hb);
    ct_net_backward(a);
    ct_net_backward(b);
    if (!check_input) continue;
    const ct_tensor *xa = ct_net_blob(a, "data"), *xb = ct_net_blob(b, "data");
    ha = fz_values(xa, true), hb = fz_values(xb, true);
    fz_expect_close("input gradient", ha, hb, xa->count, tol);
    free(ha), free(hb);
  }
  assert_int_equal(a->flat_count, b->flat_count);
  float *ga = rn_flat(a, true), *gb = rn_flat(b, true);
  fz_expect_close("parameter gradients", ga, gb, a->flat_count, tol);
  bool nonzero = false;
  for (size_t i = 0; i < a->flat_count; i++) nonzero |= ga[i] != 0.0f;
  assert_true(nonzero);
  free(ga), free(gb);
  float *da = rn_flat(a, false), *db = rn_flat(b, false);
  fz_expect_close("parameters and running statistics", da, db, a->flat_count, tol);
  free(da), free(db);
}

/* fz_compare_passes with every error taken normwise (over the largest
 * value): for 16-bit nets, whose roundings make values near 0 differ by
 * much more than their own size. */
static inline void fz_compare_passes_norm(ct_net *a, ct_net *b, const char *out, int rounds,
                                          bool check_input, double tol) {
  fz_normwise = true;
  fz_compare_passes(a, b, out, rounds, check_input, tol);
  fz_normwise = false;
}

#endif
