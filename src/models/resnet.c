#include "models/resnet.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/textformat.h"

/* A growing text buffer. */
typedef struct {
  char *s;
  size_t len, cap;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    b->cap = b->cap * 2 + (size_t)n + 256;
    b->s = ct_xrealloc(b->s, b->cap);
  }
}

static void conv(buf *b, const char *name, const char *bottom, int out, int k, int stride, int pad) {
  put(b,
      "layer {\n  name: \"%s\"\n  type: \"Convolution\"\n  bottom: \"%s\"\n  top: \"%s\"\n"
      "  param { lr_mult: 1 decay_mult: 1 }\n"
      "  convolution_param {\n    num_output: %d\n    bias_term: false\n    pad: %d\n"
      "    kernel_size: %d\n    stride: %d\n    weight_filler { type: \"msra\" }\n  }\n}\n",
      name, bottom, name, out, pad, k, stride);
}

/* BatchNorm and Scale in place on blob `top`, named bn<suffix>/scale<suffix>. */
static void bn_scale(buf *b, const char *suffix, const char *top) {
  put(b,
      "layer {\n  name: \"bn%s\"\n  type: \"BatchNorm\"\n  bottom: \"%s\"\n  top: \"%s\"\n}\n"
      "layer {\n  name: \"scale%s\"\n  type: \"Scale\"\n  bottom: \"%s\"\n  top: \"%s\"\n"
      "  scale_param {\n    bias_term: true\n  }\n}\n",
      suffix, top, top, suffix, top, top);
}

static void relu(buf *b, const char *name, const char *top) {
  put(b, "layer {\n  name: \"%s\"\n  type: \"ReLU\"\n  bottom: \"%s\"\n  top: \"%s\"\n}\n", name, top, top);
}

/* One bottleneck block: res<id> from `bottom`. */
static void bottleneck(buf *b, const char *id, const char *bottom, int width, int stride, bool project) {
  char n[96], s[96], shortcut[96], a[64], bb[64], c[64];
  snprintf(shortcut, sizeof shortcut, "%s", bottom);
  if (project) {
    snprintf(n, sizeof n, "res%s_branch1", id);
    conv(b, n, bottom, 4 * width, 1, stride, 0);
    snprintf(s, sizeof s, "%s_branch1", id);
    bn_scale(b, s, n);
    snprintf(shortcut, sizeof shortcut, "%s", n);
  }
  snprintf(a, sizeof a, "res%s_branch2a", id);
  conv(b, a, bottom, width, 1, stride, 0);
  snprintf(s, sizeof s, "%s_branch2a", id);
  bn_scale(b, s, a);
  snprintf(n, sizeof n, "%s_relu", a);
  relu(b, n, a);
  snprintf(bb, sizeof bb, "res%s_branch2b", id);
  conv(b, bb, a, width, 3, 1, 1);
  snprintf(s, sizeof s, "%s_branch2b", id);
  bn_scale(b, s, bb);
  snprintf(n, sizeof n, "%s_relu", bb);
  relu(b, n, bb);
  snprintf(c, sizeof c, "res%s_branch2c", id);
  conv(b, c, bb, 4 * width, 1, 1, 0);
  snprintf(s, sizeof s, "%s_branch2c", id);
  bn_scale(b, s, c);
  put(b,
      "layer {\n  name: \"res%s\"\n  type: \"Eltwise\"\n  bottom: \"%s\"\n  bottom: \"%s\"\n"
      "  top: \"res%s\"\n  eltwise_param {\n    operation: SUM\n  }\n}\n",
      id, shortcut, c, id);
  snprintf(n, sizeof n, "res%s_relu", id);
  snprintf(s, sizeof s, "res%s", id);
  relu(b, n, s);
}

static void data_layer(buf *b, const ct_resnet_opts *o, bool train) {
  const char *src = train ? o->train_source : o->test_source;
  put(b,
      "layer {\n  name: \"data\"\n  type: \"Data\"\n  top: \"data\"\n  top: \"label\"\n"
      "  include {\n    phase: %s\n  }\n  transform_param {\n    mirror: %s\n    crop_size: %d\n",
      train ? "TRAIN" : "TEST", train ? "true" : "false", o->image_size);
  if (o->caffe2_input) {
    put(b, "    scale: 0.0078125\n");
    for (int c = 0; c < o->num_channels; c++) put(b, "    mean_value: 128\n");
  } else if (o->num_channels == 3) {
    put(b, "    mean_value: 104\n    mean_value: 117\n    mean_value: 123\n");
  }
  put(b, "  }\n  data_param {\n    source: \"%s\"\n    batch_size: %d\n    backend: %s\n  }\n}\n", src,
      train ? o->batch_size : o->test_batch_size, o->backend ? o->backend : "LMDB");
}

ct_status ct_resnet_prototxt(const ct_resnet_opts *o, char **text, ct_error *err) {
  *text = NULL;
  static const int k_blocks50[4] = {3, 4, 6, 3}, k_blocks101[4] = {3, 4, 23, 3},
                   k_blocks152[4] = {3, 8, 36, 3};
  const int *blocks = o->depth == 50 ? k_blocks50 : o->depth == 101 ? k_blocks101
                                                  : o->depth == 152 ? k_blocks152 : NULL;
  if (!blocks)
    return ct_error_set(err, CT_ERR_INVALID, "ResNet depth %d is not one of 50, 101, 152", o->depth);
  if (o->num_labels <= 0 || o->num_channels <= 0 || o->image_size < 32 || o->batch_size <= 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "ResNet needs num_labels, num_channels and batch_size > 0 and image_size >= 32 "
                        "(got %d, %d, %d, %d)", o->num_labels, o->num_channels, o->batch_size, o->image_size);
  buf b = {ct_xcalloc(1, 4096), 0, 4096};
  put(&b, "name: \"ResNet-%d\"\n", o->depth);
  if (o->train_source) {
    data_layer(&b, o, true);
    if (o->test_source && o->test_batch_size > 0) data_layer(&b, o, false);
  } else {
    put(&b,
        "layer {\n  name: \"data\"\n  type: \"Input\"\n  top: \"data\"\n  top: \"label\"\n"
        "  input_param {\n    shape { dim: %d dim: %d dim: %d dim: %d }\n    shape { dim: %d }\n  }\n}\n",
        o->batch_size, o->num_channels, o->image_size, o->image_size, o->batch_size);
  }
  conv(&b, "conv1", "data", 64, 7, 2, 3);
  bn_scale(&b, "_conv1", "conv1");
  relu(&b, "conv1_relu", "conv1");
  put(&b,
      "layer {\n  name: \"pool1\"\n  type: \"Pooling\"\n  bottom: \"conv1\"\n  top: \"pool1\"\n"
      "  pooling_param {\n    pool: MAX\n    kernel_size: 3\n    stride: 2\n  }\n}\n");
  char prev[64] = "pool1";
  for (int stage = 0; stage < 4; stage++) {
    int width = 64 << stage;
    for (int i = 0; i < blocks[stage]; i++) {
      char id[32];
      /* blocks a, b, c, ... as in the original; deep stages use a, b1, b2, ... */
      if (blocks[stage] > 6 && i > 0) snprintf(id, sizeof id, "%db%d", stage + 2, i);
      else snprintf(id, sizeof id, "%d%c", stage + 2, 'a' + i);
      int stride = (i == 0 && stage > 0) ? 2 : 1;
      bottleneck(&b, id, prev, width, stride, i == 0);
      snprintf(prev, sizeof prev, "res%s", id);
    }
  }
  put(&b,
      "layer {\n  name: \"pool5\"\n  type: \"Pooling\"\n  bottom: \"%s\"\n  top: \"pool5\"\n"
      "  pooling_param {\n    pool: AVE\n    global_pooling: true\n  }\n}\n"
      "layer {\n  name: \"fc%d\"\n  type: \"InnerProduct\"\n  bottom: \"pool5\"\n  top: \"fc%d\"\n"
      "  param { lr_mult: 1 decay_mult: 1 }\n  param { lr_mult: 2 decay_mult: 0 }\n"
      "  inner_product_param {\n    num_output: %d\n    weight_filler { type: \"msra\" }\n"
      "    bias_filler { type: \"constant\" value: 0 }\n  }\n}\n"
      "layer {\n  name: \"loss\"\n  type: \"SoftmaxWithLoss\"\n  bottom: \"fc%d\"\n  bottom: \"label\"\n"
      "  top: \"loss\"\n}\n",
      prev, o->num_labels, o->num_labels, o->num_labels, o->num_labels);
  if (o->train_accuracy)
    put(&b,
        "layer {\n  name: \"accuracy\"\n  type: \"Accuracy\"\n  bottom: \"fc%d\"\n  bottom: \"label\"\n"
        "  top: \"accuracy\"\n}\n",
        o->num_labels);
  if (o->test_source && o->test_batch_size > 0 && !o->train_accuracy)
    put(&b,
        "layer {\n  name: \"accuracy\"\n  type: \"Accuracy\"\n  bottom: \"fc%d\"\n  bottom: \"label\"\n"
        "  top: \"accuracy\"\n  include {\n    phase: TEST\n  }\n}\n",
        o->num_labels);
  if (o->test_source && o->test_batch_size > 0 && o->num_labels > 5)
    put(&b,
        "layer {\n  name: \"accuracy_top5\"\n  type: \"Accuracy\"\n  bottom: \"fc%d\"\n  bottom: \"label\"\n"
        "  top: \"accuracy_top5\"\n  include {\n    phase: TEST\n  }\n  accuracy_param {\n    top_k: 5\n  }\n}\n",
        o->num_labels);
  *text = b.s;
  return CT_OK;
}

ct_status ct_resnet_net(const ct_resnet_opts *o, Caffe__NetParameter **out, ct_error *err) {
  *out = NULL;
  char *text;
  CT_TRY(ct_resnet_prototxt(o, &text, err));
  ProtobufCMessage *m;
  ct_status s = ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), "resnet", &m, err);
  free(text);
  if (s == CT_OK) *out = (Caffe__NetParameter *)m;
  return s;
}
