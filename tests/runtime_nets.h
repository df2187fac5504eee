/* Nets and helpers shared by the runtime tests (test_net_runtime.c on the
 * CPU, test_gpu_runtime_*.c on a GPU): nets built from prototxt text, inputs
 * filled with fixed values, and lookups by name. */
#ifndef CT_TEST_RUNTIME_NETS_H
#define CT_TEST_RUNTIME_NETS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "net/net.h"
#include "proto/textformat.h"
#include "runtime/runtime.h"
#include "solvers/solver.h"
#include "testutil.h"

/* One iteration of a runtime without an update (forward and backward, as
 * the solver's program runs them): launched, finished, its loss. */
static inline ct_status rt_iteration(ct_runtime *rt, double *loss, ct_error *err) {
  unsigned seq;
  CT_TRY(ct_runtime_launch(rt, &seq, err));
  ct_rt_result res;
  CT_TRY(ct_runtime_finish(rt, seq, &res, err));
  *loss = res.loss;
  return CT_OK;
}

/* Exits 77 (ctest: skipped) when a layer type these tests need is missing. */
static inline void rn_require_layers(void) {
  const char *need[] = {"Input", "Convolution", "Pooling", "InnerProduct", "ReLU", "Flatten",
                        "SoftmaxWithLoss", "Accuracy", "Dropout"};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (!ct_layer_find(need[i])) {
      fprintf(stderr, "skipped: layer type %s is not in this build\n", need[i]);
      exit(77);
    }
}

/* cmocka group setup of the runtime tests: the layers they need, and only
 * warnings in the log. */
static inline int rn_setup(void **state) {
  (void)state;
  rn_require_layers();
  ct_log_set_level(CT_LOG_WARNING);
  return 0;
}

/* A context on GPU 0 with strict FP32 math (TF32 off), seeded. */
static inline void rn_gpu_context(ct_context *ctx, uint64_t seed) {
  ct_error err;
  if (ct_context_init(ctx, 0, seed, &err) != CT_OK) fail_msg("GPU context: %s", err.msg);
  ct_context_set_tf32(ctx, false);
}

/* A small net with an in-place ReLU, a Flatten view, two Split layers (the
 * label and ip1 both feed the loss and the accuracy) and an accuracy in
 * TRAIN, so that every kind of diff group occurs.  Batch 4 of 1x8x8. */
static const char rn_plan_net[] =
    "name: 'plan'\n"
    "layer { name: 'data' type: 'Input' top: 'data' top: 'label'\n"
    "  input_param { shape { dim: 4 dim: 1 dim: 8 dim: 8 } shape { dim: 4 } } }\n"
    "layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'\n"
    "  convolution_param { num_output: 3 kernel_size: 3 weight_filler { type: 'xavier' }\n"
    "    bias_filler { type: 'constant' value: 0.1 } } }\n"
    "layer { name: 'relu1' type: 'ReLU' bottom: 'conv1' top: 'conv1' }\n"
    "layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1'\n"
    "  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
    "layer { name: 'flat' type: 'Flatten' bottom: 'pool1' top: 'flat' }\n"
    "layer { name: 'ip1' type: 'InnerProduct' bottom: 'flat' top: 'ip1'\n"
    "  inner_product_param { num_output: 5 weight_filler { type: 'xavier' } } }\n"
    "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip1' bottom: 'label' top: 'loss' }\n"
    "layer { name: 'acc' type: 'Accuracy' bottom: 'ip1' bottom: 'label' top: 'acc' }\n";

/* conv1's top feeds a Flatten and an InnerProduct through a Split; the
 * Flatten's and the InnerProduct's results meet again in an Eltwise. */
static const char rn_split_net[] =
    "name: 'split' force_backward: true\n"
    "layer { name: 'data' type: 'Input' top: 'data' top: 'label'\n"
    "  input_param { shape { dim: 2 dim: 2 dim: 3 dim: 3 } shape { dim: 2 } } }\n"
    "layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'c'\n"
    "  convolution_param { num_output: 3 kernel_size: 1 weight_filler { type: 'gaussian' std: 0.5 }\n"
    "    bias_filler { type: 'constant' value: 0.1 } } }\n"
    "layer { name: 'flat' type: 'Flatten' bottom: 'c' top: 'f' }\n"
    "layer { name: 'ipa' type: 'InnerProduct' bottom: 'f' top: 'a'\n"
    "  inner_product_param { num_output: 4 weight_filler { type: 'gaussian' std: 0.5 } } }\n"
    "layer { name: 'ipb' type: 'InnerProduct' bottom: 'c' top: 'b'\n"
    "  inner_product_param { num_output: 4 weight_filler { type: 'gaussian' std: 0.5 } } }\n"
    "layer { name: 'sum' type: 'Eltwise' bottom: 'a' bottom: 'b' top: 's' }\n"
    "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 's' bottom: 'label' top: 'loss' }\n";

/* LeNet (BVLC's lenet_train_test layers) on an Input of batch x 1x28x28,
 * with an optional Dropout after ip1's ReLU. */
static inline char *rn_lenet_text(int batch, bool dropout) {
  char *t = malloc(4096);
  snprintf(t, 4096,
           "name: 'LeNet'\n"
           "layer { name: 'data' type: 'Input' top: 'data' top: 'label'\n"
           "  input_param { shape { dim: %d dim: 1 dim: 28 dim: 28 } shape { dim: %d } } }\n"
           "layer { name: 'conv1' type: 'Convolution' bottom: 'data' top: 'conv1'\n"
           "  param { lr_mult: 1 } param { lr_mult: 2 }\n"
           "  convolution_param { num_output: 20 kernel_size: 5 stride: 1\n"
           "    weight_filler { type: 'xavier' } bias_filler { type: 'constant' } } }\n"
           "layer { name: 'pool1' type: 'Pooling' bottom: 'conv1' top: 'pool1'\n"
           "  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
           "layer { name: 'conv2' type: 'Convolution' bottom: 'pool1' top: 'conv2'\n"
           "  param { lr_mult: 1 } param { lr_mult: 2 }\n"
           "  convolution_param { num_output: 50 kernel_size: 5 stride: 1\n"
           "    weight_filler { type: 'xavier' } bias_filler { type: 'constant' } } }\n"
           "layer { name: 'pool2' type: 'Pooling' bottom: 'conv2' top: 'pool2'\n"
           "  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
           "layer { name: 'ip1' type: 'InnerProduct' bottom: 'pool2' top: 'ip1'\n"
           "  param { lr_mult: 1 } param { lr_mult: 2 }\n"
           "  inner_product_param { num_output: 500\n"
           "    weight_filler { type: 'xavier' } bias_filler { type: 'constant' } } }\n"
           "layer { name: 'relu1' type: 'ReLU' bottom: 'ip1' top: 'ip1' }\n"
           "%s"
           "layer { name: 'ip2' type: 'InnerProduct' bottom: 'ip1' top: 'ip2'\n"
           "  param { lr_mult: 1 } param { lr_mult: 2 }\n"
           "  inner_product_param { num_output: 10\n"
           "    weight_filler { type: 'xavier' } bias_filler { type: 'constant' } } }\n"
           "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip2' bottom: 'label' top: "
           "'loss' }\n",
           batch, batch,
           dropout ? "layer { name: 'drop1' type: 'Dropout' bottom: 'ip1' top: 'ip1'\n"
                     "  dropout_param { dropout_ratio: 0.5 } }\n"
                   : "");
  return t;
}

static inline Caffe__NetParameter *rn_parse_net(const char *text) {
  ProtobufCMessage *m = NULL;
  ct_error err;
  if (ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), "net", &m, &err) != CT_OK)
    fail_msg("net text: %s", err.msg);
  return (Caffe__NetParameter *)m;
}

/* A TRAIN net from text on ctx; keep_blob_diffs as asked. */
static inline ct_net *rn_net(const char *text, ct_context *ctx, bool keep_blob_diffs) {
  Caffe__NetParameter *p = rn_parse_net(text);
  ct_net_opts o = {.phase = CT_PHASE_TRAIN, .quiet = true, .keep_blob_diffs = keep_blob_diffs};
  ct_net *net = NULL;
  ct_error err;
  if (ct_net_init(&net, p, &o, ctx, &err) != CT_OK) fail_msg("net init: %s", err.msg);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  return net;
}

static inline int rn_blob_index(const ct_net *net, const char *name) {
  for (int b = 0; b < net->nblobs; b++)
    if (net->blobs[b]->name && strcmp(net->blobs[b]->name, name) == 0) return b;
  fail_msg("no blob '%s'", name);
  return -1;
}

/* Fills the Input tops 'data' (uniform in [0, 1)) and 'label' (classes in
 * [0, nclass)) with values from seed, on any device. */
static inline void rn_fill_inputs(ct_net *net, int nclass, uint64_t seed) {
  ct_tensor *x = ct_net_blob(net, "data"), *y = ct_net_blob(net, "label");
  assert_non_null(x);
  assert_non_null(y);
  float *hx = malloc(x->count * sizeof(float)), *hy = malloc(y->count * sizeof(float));
  tu_fill_uniform(hx, x->count, 0.0f, 1.0f, seed);
  tu_fill_uniform(hy, y->count, 0.0f, (float)nclass, seed + 1);
  for (size_t i = 0; i < y->count; i++) hy[i] = floorf(hy[i]);
  ct_tensor_upload(x, hx);
  ct_tensor_upload(y, hy);
  free(hx);
  free(hy);
}

/* The flat parameter values (or gradients) of net on the host (caller frees). */
static inline float *rn_flat(const ct_net *net, bool diff) {
  float *h = malloc((net->flat_count + 1) * sizeof(float));
  ct_mem_copy(CT_DEVICE_CPU, h, net->ctx->device, diff ? net->flat_diff : net->flat_data,
              net->flat_count * sizeof(float));
  return h;
}

/* One forward and backward of nets a and b on the same inputs (seed),
 * their parameter gradients cleared first; the losses into la and lb. */
static inline void rn_pass_pair(ct_net *a, ct_net *b, int nclass, uint64_t seed, double *la,
                                double *lb) {
  ct_error err;
  ct_net *nets[2] = {a, b};
  double *loss[2] = {la, lb};
  for (int k = 0; k < 2; k++) {
    rn_fill_inputs(nets[k], nclass, seed);
    ct_net_clear_param_diffs(nets[k]);
    assert_int_equal(ct_net_forward(nets[k], loss[k], &err), CT_OK);
    ct_net_backward(nets[k]);
  }
}

/* A solver over net_text on ctx from the rest of the solver text. */
static inline ct_solver *rn_solver(const char *net_text, const char *rest, ct_context *ctx,
                                   const ct_solver_opts *opts) {
  size_t n = strlen(net_text) + strlen(rest) + 64;
  char *text = malloc(n);
  snprintf(text, n, "net_param { %s }\n%s", net_text, rest);
  ProtobufCMessage *m = NULL;
  ct_error err;
  if (ct_text_parse(&caffe__solver_parameter__descriptor, text, strlen(text), "solver", &m, &err) !=
      CT_OK)
    fail_msg("solver text: %s", err.msg);
  free(text);
  ct_solver *s = NULL;
  ct_solver_opts o = {.quiet_nets = true};
  if (opts) o = *opts;
  if (ct_solver_init(&s, (Caffe__SolverParameter *)m, &o, ctx, &err) != CT_OK)
    fail_msg("solver init: %s", err.msg);
  protobuf_c_message_free_unpacked(m, NULL);
  return s;
}

#endif
