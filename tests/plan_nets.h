/* Nets and the check shared by the blob memory tests (test_net_plan.c on
 * the CPU, test_gpu_net_plan.c on a GPU): the same net built twice, once
 * with its blob values in the lifetime-planned pool and the pool's memory
 * filled with NaN where each array ends (CORTADO_POOL_POISON), once with
 * every value kept (CORTADO_VALUE_PLANNING=0), must give the same losses
 * and bit-identical parameter gradients.  A layer that reads values after
 * the last step the plan gave them (a backward_reads that declares too
 * little, a reader the planner does not know) reads NaN or another blob's
 * values instead. */
#ifndef CT_TEST_PLAN_NETS_H
#define CT_TEST_PLAN_NETS_H

#include "runtime_nets.h"

#define PN_CONV(name, bottom, top, n, k, pad)                                              \
  "layer { name: '" name "' type: 'Convolution' bottom: '" bottom "' top: '" top "'\n"    \
  "  convolution_param { num_output: " #n " kernel_size: " #k " pad: " #pad                \
  " bias_term: false\n"                                                                     \
  "    weight_filler { type: 'msra' } } }\n"
#define PN_BN_SCALE(bn, scale, blob)                                                           \
  "layer { name: '" bn "' type: 'BatchNorm' bottom: '" blob "' top: '" blob "' }\n"             \
  "layer { name: '" scale "' type: 'Scale' bottom: '" blob "' top: '" blob "'\n"                \
  "  scale_param { bias_term: true } }\n"
#define PN_RELU(name, blob) "layer { name: '" name "' type: 'ReLU' bottom: '" blob "' top: '" blob "' }\n"

/* A residual unit of Caffe's ResNets (Convolution, BatchNorm + Scale +
 * ReLU in place, a projection shortcut, a SUM and its ReLU), a Concat of
 * the unit's input and output, a non-in-place Sigmoid and an AVE pooling,
 * Dropout in place, an InnerProduct, a loss and an accuracy.  8 input
 * channels (no direct-kernel timing on the host in 16 bits). */
static const char pn_residual_net[] =
    "name: 'residual'\n"
    "layer { name: 'data' type: 'Input' top: 'data' top: 'label'\n"
    "  input_param { shape { dim: 4 dim: 8 dim: 12 dim: 12 } shape { dim: 4 } } }\n"
    PN_CONV("conv0", "data", "c0", 16, 3, 1) PN_BN_SCALE("bn0", "sc0", "c0") PN_RELU("relu0", "c0")
    PN_CONV("conv1", "c0", "c1", 16, 3, 1) PN_BN_SCALE("bn1", "sc1", "c1") PN_RELU("relu1", "c1")
    PN_CONV("conv2", "c1", "c2", 16, 3, 1) PN_BN_SCALE("bn2", "sc2", "c2")
    PN_CONV("proj", "c0", "p", 16, 1, 0) PN_BN_SCALE("bnp", "scp", "p")
    "layer { name: 'sum' type: 'Eltwise' bottom: 'p' bottom: 'c2' top: 's' }\n"
    PN_RELU("relus", "s")
    "layer { name: 'cat' type: 'Concat' bottom: 's' bottom: 'c0' top: 'cat' }\n"
    "layer { name: 'sig' type: 'Sigmoid' bottom: 'cat' top: 'sg' }\n"
    "layer { name: 'pool' type: 'Pooling' bottom: 'sg' top: 'pool'\n"
    "  pooling_param { pool: AVE kernel_size: 2 stride: 2 } }\n"
    "layer { name: 'drop' type: 'Dropout' bottom: 'pool' top: 'pool'\n"
    "  dropout_param { dropout_ratio: 0.3 } }\n"
    "layer { name: 'ip' type: 'InnerProduct' bottom: 'pool' top: 'ip'\n"
    "  inner_product_param { num_output: 5 weight_filler { type: 'xavier' } } }\n"
    "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n"
    "layer { name: 'acc' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: 'acc' }\n";

/* An inception block (GoogLeNet's shape: 1x1, 1x1 + 3x3, MAX pooling +
 * 1x1 branches, biases and in-place ReLUs, a Concat), an LRN, a MAX pooling
 * and a TanH before the classifier. */
static const char pn_inception_net[] =
    "name: 'inception'\n"
    "layer { name: 'data' type: 'Input' top: 'data' top: 'label'\n"
    "  input_param { shape { dim: 4 dim: 8 dim: 10 dim: 10 } shape { dim: 4 } } }\n"
    "layer { name: 'stem' type: 'Convolution' bottom: 'data' top: 'stem'\n"
    "  convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' }\n"
    "    bias_filler { type: 'constant' value: 0.05 } } }\n"
    PN_RELU("stem_relu", "stem")
    "layer { name: 'b1' type: 'Convolution' bottom: 'stem' top: 'b1'\n"
    "  convolution_param { num_output: 8 kernel_size: 1 weight_filler { type: 'xavier' }\n"
    "    bias_filler { type: 'constant' value: 0.05 } } }\n"
    PN_RELU("b1_relu", "b1")
    "layer { name: 'b2r' type: 'Convolution' bottom: 'stem' top: 'b2r'\n"
    "  convolution_param { num_output: 8 kernel_size: 1 weight_filler { type: 'xavier' }\n"
    "    bias_filler { type: 'constant' value: 0.05 } } }\n"
    PN_RELU("b2r_relu", "b2r")
    "layer { name: 'b2' type: 'Convolution' bottom: 'b2r' top: 'b2'\n"
    "  convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: 'xavier' }\n"
    "    bias_filler { type: 'constant' value: 0.05 } } }\n"
    PN_RELU("b2_relu", "b2")
    "layer { name: 'b3p' type: 'Pooling' bottom: 'stem' top: 'b3p'\n"
    "  pooling_param { pool: MAX kernel_size: 3 stride: 1 pad: 1 } }\n"
    "layer { name: 'b3' type: 'Convolution' bottom: 'b3p' top: 'b3'\n"
    "  convolution_param { num_output: 8 kernel_size: 1 weight_filler { type: 'xavier' }\n"
    "    bias_filler { type: 'constant' value: 0.05 } } }\n"
    PN_RELU("b3_relu", "b3")
    "layer { name: 'cat' type: 'Concat' bottom: 'b1' bottom: 'b2' bottom: 'b3' top: 'cat' }\n"
    "layer { name: 'norm' type: 'LRN' bottom: 'cat' top: 'norm'\n"
    "  lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 } }\n"
    "layer { name: 'pool' type: 'Pooling' bottom: 'norm' top: 'pool'\n"
    "  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
    "layer { name: 'tanh' type: 'TanH' bottom: 'pool' top: 'pool' }\n"
    "layer { name: 'ip' type: 'InnerProduct' bottom: 'pool' top: 'ip'\n"
    "  inner_product_param { num_output: 6 weight_filler { type: 'xavier' } } }\n"
    "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n";

/* How a test makes the context of each net: a seed, and the precision. */
typedef void (*pn_context_fn)(ct_context *ctx, uint64_t seed, ct_dtype precision);

/* Builds text twice on fresh contexts (planned values with the pool
 * poisoned, and every value kept) and compares three iterations of
 * forward and backward: losses and parameter gradients (not all zero)
 * within tol relative (0: the same bits; a value read after its end is
 * NaN or another blob's).  Returns the planned net's pool size and the
 * words an array per blob would take, for the caller's checks. */
/* The two nets of text on ca and cb: values planned with the pool
 * poisoned, and every value kept. */
static inline void pn_pair(const char *text, ct_context *ca, ct_context *cb, ct_net **planned,
                           ct_net **kept) {
  setenv("CORTADO_POOL_POISON", "1", 1);
  *planned = rn_net(text, ca, false);
  unsetenv("CORTADO_POOL_POISON");
  setenv("CORTADO_VALUE_PLANNING", "0", 1);
  *kept = rn_net(text, cb, false);
  unsetenv("CORTADO_VALUE_PLANNING");
  assert_true((*planned)->plan_values);
  assert_false((*kept)->plan_values);
  assert_non_null((*planned)->blob_plan->dead_at);
}

static inline void pn_compare(const char *text, int nclass, pn_context_fn make_ctx, ct_dtype precision,
                              double tol, size_t *pool, size_t *unplanned) {
  ct_context ca, cb;
  make_ctx(&ca, 9, precision);
  make_ctx(&cb, 9, precision);
  ct_net *planned, *kept;
  pn_pair(text, &ca, &cb, &planned, &kept);
  for (int round = 0; round < 3; round++) {
    double la, lb;
    rn_pass_pair(planned, kept, nclass, 40 + (uint64_t)round, &la, &lb);
    if (!(fabs(la - lb) <= tol * fabs(lb)))
      fail_msg("%s, round %d: loss %.9g planned, %.9g kept", planned->name, round, la, lb);
    float *ga = rn_flat(planned, true), *gb = rn_flat(kept, true);
    bool nonzero = false;
    for (size_t i = 0; i < planned->flat_count; i++) {
      const double scale = fmax(1e-3, fmax(fabs(ga[i]), fabs(gb[i])));
      if (tol == 0 ? memcmp(&ga[i], &gb[i], sizeof(float)) != 0 : !(fabs(ga[i] - gb[i]) <= tol * scale))
        fail_msg("%s, round %d: gradient %zu is %.9g planned, %.9g kept", planned->name, round, i,
                 (double)ga[i], (double)gb[i]);
      nonzero |= ga[i] != 0.0f;
    }
    assert_true(nonzero);
    free(ga);
    free(gb);
  }
  if (pool) *pool = planned->blob_plan->pool_count;
  if (unplanned) *unplanned = planned->blob_plan->values_unplanned + planned->blob_plan->unplanned_count;
  ct_net_free(planned);
  ct_net_free(kept);
  ct_context_free(&ca);
  ct_context_free(&cb);
}

#endif
