/* `--dummy_data`: the data layers of a NetParameter become DummyData layers
 * that produce what they would: the same batch and sample shape, and labels
 * spread over the classes of the loss that reads them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "data/source_shape.h"
#include "net/net_load.h"
#include "proto/io.h"
#include "proto/reflect.h"

static bool is_type(const Caffe__LayerParameter *l, const char *const *types, size_t n) {
  for (size_t i = 0; l->type && i < n; i++)
    if (strcmp(l->type, types[i]) == 0) return true;
  return false;
}

static bool is_data_layer(const Caffe__LayerParameter *l) {
  static const char *const k[] = {"Data", "ImageData", "HDF5Data", "MemoryData", "WindowData"};
  return is_type(l, k, sizeof k / sizeof *k);
}

/* ---------------------------------------------------------------- shapes */

/* What a layer's own parameters and files tell of one sample; 0 where they
 * do not.  `why` says why the source gave nothing (for messages). */
typedef struct sample_shape {
  int batch;
  int c, h, w;
  bool c_assumed;       /* 3 channels taken for want of any other */
  bool from_source;     /* src holds the source's sample shape */
  int src[3];
  char why[CT_ERROR_MSG_MAX];
} sample_shape;

/* The channels a layer's parameters imply: MemoryData's channels,
 * ImageData's is_color, force_color / force_gray, one or three mean_values. */
static int declared_channels(const Caffe__LayerParameter *l) {
  const Caffe__TransformationParameter *t = l->transform_param;
  if (l->memory_data_param && strcmp(l->type, "MemoryData") == 0) return (int)l->memory_data_param->channels;
  if (t && t->has_force_color && t->force_color) return 3;
  if (t && t->has_force_gray && t->force_gray) return 1;
  if (l->image_data_param && strcmp(l->type, "ImageData") == 0) return l->image_data_param->is_color ? 3 : 1;
  if (l->window_data_param && strcmp(l->type, "WindowData") == 0) return 3;
  if (t && (t->n_mean_value == 1 || t->n_mean_value == 3)) return (int)t->n_mean_value;
  return 0;
}

static int batch_of(const Caffe__LayerParameter *l) {
  if (strcmp(l->type, "Data") == 0 && l->data_param) return (int)l->data_param->batch_size;
  if (strcmp(l->type, "ImageData") == 0 && l->image_data_param) return (int)l->image_data_param->batch_size;
  if (strcmp(l->type, "HDF5Data") == 0 && l->hdf5_data_param) return (int)l->hdf5_data_param->batch_size;
  if (strcmp(l->type, "MemoryData") == 0 && l->memory_data_param) return (int)l->memory_data_param->batch_size;
  if (strcmp(l->type, "WindowData") == 0 && l->window_data_param) return (int)l->window_data_param->batch_size;
  return 0;
}

/* The C,H,W of transform_param.mean_file when it can be read. */
static bool mean_file_shape(const Caffe__LayerParameter *l, int chw[3]) {
  const Caffe__TransformationParameter *t = l->transform_param;
  if (!t || !t->mean_file) return false;
  ProtobufCMessage *m;
  if (ct_proto_read_binary(&caffe__blob_proto__descriptor, t->mean_file, &m, NULL) != CT_OK) return false;
  int64_t dims[8];
  int n = ct_blob_proto_shape((const Caffe__BlobProto *)m, dims, 8);
  protobuf_c_message_free_unpacked(m, NULL);
  if (n < 3 || n > 8) return false;
  for (int k = 0; k < 3; k++) chw[k] = (int)dims[n - 3 + k];
  return chw[0] > 0 && chw[1] > 0 && chw[2] > 0;
}

/* Fills s from the layer's parameters, its source and its mean file. */
static void find_shape(const Caffe__LayerParameter *l, sample_shape *s) {
  memset(s, 0, sizeof *s);
  s->batch = batch_of(l);
  ct_error err;
  s->from_source = ct_data_source_sample_shape(l, s->src, &err) == CT_OK;
  if (!s->from_source) snprintf(s->why, sizeof s->why, "%s", err.msg);
  int mean[3] = {0, 0, 0};
  bool have_mean = mean_file_shape(l, mean);
  const Caffe__TransformationParameter *t = l->transform_param;
  const Caffe__ImageDataParameter *ip = strcmp(l->type, "ImageData") == 0 ? l->image_data_param : NULL;
  const Caffe__MemoryDataParameter *mp = strcmp(l->type, "MemoryData") == 0 ? l->memory_data_param : NULL;
  const Caffe__WindowDataParameter *wp = strcmp(l->type, "WindowData") == 0 ? l->window_data_param : NULL;
  if (t && t->has_crop_size && t->crop_size > 0) {
    s->h = s->w = (int)t->crop_size;
  } else if (wp && wp->crop_size > 0) { /* its old place, which WindowData reads */
    s->h = s->w = (int)wp->crop_size;
  } else if (ip && ip->new_height > 0 && ip->new_width > 0) {
    s->h = (int)ip->new_height;
    s->w = (int)ip->new_width;
  } else if (mp) {
    s->h = (int)mp->height;
    s->w = (int)mp->width;
  } else if (s->from_source) {
    s->h = s->src[1];
    s->w = s->src[2];
  } else if (have_mean) {
    s->h = mean[1];
    s->w = mean[2];
  }
  s->c = declared_channels(l);
  if (s->c == 0 && s->from_source) s->c = s->src[0];
  if (s->c == 0 && have_mean) s->c = mean[0];
  if (s->c == 0 && s->h > 0 && s->w > 0) {
    s->c = 3;
    s->c_assumed = true;
  }
}

/* The sample shape of layer l into chw: dummy_chw when given (said in the
 * log when the layer's own shape differs), else find_shape's. */
static ct_status pick_shape(const Caffe__LayerParameter *l, const int *dummy_chw, int *batch, int chw[3],
                            ct_error *err) {
  sample_shape s;
  find_shape(l, &s);
  const char *name = l->name ? l->name : "";
  *batch = s.batch;
  if (s.batch <= 0)
    return ct_error_set(err, CT_ERR_INVALID, "--dummy_data: layer '%s' (%s) has no batch_size", name, l->type);
  if (dummy_chw) {
    memcpy(chw, dummy_chw, 3 * sizeof *chw);
    if (s.c > 0 && s.h > 0 && s.w > 0 && !s.c_assumed && (s.c != chw[0] || s.h != chw[1] || s.w != chw[2]))
      LOG_INFO("--dummy_data: layer %s (%s): --dummy_shape=%d,%d,%d replaces the shape %d,%d,%d of its %s",
               name, l->type, chw[0], chw[1], chw[2], s.c, s.h, s.w,
               s.from_source ? "source and parameters" : "parameters");
    return CT_OK;
  }
  if (s.c <= 0 || s.h <= 0 || s.w <= 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--dummy_data: cannot tell the sample shape of layer '%s' (%s): %s, and the layer "
                        "gives no crop_size; give --dummy_shape=C,H,W",
                        name, l->type, s.why);
  chw[0] = s.c;
  chw[1] = s.h;
  chw[2] = s.w;
  if (s.c_assumed)
    LOG_INFO("--dummy_data: layer %s (%s): 3 channels assumed (its source cannot be read: %s); give "
             "--dummy_shape=C,H,W for others",
             name, l->type, s.why);
  return CT_OK;
}

/* ---------------------------------------------------------------- labels */

/* Loss and score layers whose bottom 1 holds class indices for bottom 0's
 * class axis (1: a prediction's channels). */
static bool reads_class_labels(const Caffe__LayerParameter *l) {
  static const char *const k[] = {"SoftmaxWithLoss", "Accuracy", "MultinomialLogisticLoss", "InfogainLoss",
                                  "HingeLoss"};
  return is_type(l, k, sizeof k / sizeof *k);
}

/* Layers whose top has the shape of their bottom: a prediction's classes
 * are those of the layer below them. */
static bool keeps_shape(const Caffe__LayerParameter *l) {
  static const char *const k[] = {"Softmax", "ReLU", "Dropout", "Sigmoid", "TanH", "BatchNorm", "Scale",
                                  "Bias", "Power", "ELU", "PReLU", "AbsVal", "Exp", "Log", "BNLL",
                                  "Swish", "Clip", "Split"};
  return is_type(l, k, sizeof k / sizeof *k);
}

static bool has_top(const Caffe__LayerParameter *l, const char *blob) {
  for (size_t t = 0; t < l->n_top; t++)
    if (strcmp(l->top[t], blob) == 0) return true;
  return false;
}

/* The classes of blob `blob` as read by layer `at`: the num_output of the
 * InnerProduct or (De)Convolution below it, through shape-keeping layers;
 * 0 when unknown.  *producer gets that layer's name. */
static int classes_of(const Caffe__NetParameter *net, size_t at, const char *blob, const char **producer) {
  for (size_t i = at; i-- > 0;) {
    const Caffe__LayerParameter *l = net->layer[i];
    if (!has_top(l, blob) || !l->type) continue;
    if (l->n_bottom == 1 && strcmp(l->bottom[0], blob) == 0) continue; /* in place: look further down */
    *producer = l->name ? l->name : "";
    if (strcmp(l->type, "InnerProduct") == 0 && l->inner_product_param)
      return (int)l->inner_product_param->num_output;
    if ((strcmp(l->type, "Convolution") == 0 || strcmp(l->type, "Deconvolution") == 0) && l->convolution_param)
      return (int)l->convolution_param->num_output;
    if (keeps_shape(l) && l->n_bottom >= 1) return classes_of(net, i, l->bottom[0], producer);
    return 0;
  }
  return 0;
}

/* The classes of the first class-reading layer that takes `label` as its
 * bottom 1; 0 when none does or the count is unknown.  *reader and
 * *producer name the layers, for the log. */
static int label_classes(const Caffe__NetParameter *net, const char *label, const char **reader,
                         const char **producer) {
  for (size_t i = 0; i < net->n_layer; i++) {
    const Caffe__LayerParameter *l = net->layer[i];
    if (!reads_class_labels(l) || l->n_bottom < 2 || strcmp(l->bottom[1], label) != 0) continue;
    int k = classes_of(net, i, l->bottom[0], producer);
    if (k > 0) {
      *reader = l->name ? l->name : "";
      return k;
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- the swap */

static Caffe__BlobShape *new_shape(int n, const int *dims) {
  Caffe__BlobShape *s = (Caffe__BlobShape *)ct_pb_new(&caffe__blob_shape__descriptor);
  s->dim = ct_xcalloc((size_t)n + 1, sizeof(int64_t));
  s->n_dim = (size_t)n;
  for (int i = 0; i < n; i++) s->dim[i] = dims[i];
  return s;
}

static Caffe__FillerParameter *uniform_filler(float min, float max) {
  const ProtobufCMessageDescriptor *d = &caffe__filler_parameter__descriptor;
  Caffe__FillerParameter *f = (Caffe__FillerParameter *)ct_pb_new(d);
  ct_pb_set_string(&f->base, ct_pb_field(d, "type"), "uniform");
  f->has_min = f->has_max = 1;
  f->min = min;
  f->max = max;
  return f;
}

/* Turns layer l into DummyData with the given shapes (data, then label):
 * images uniform in [0, 1), labels uniform in [0, classes) so that each
 * truncates to a class (the losses read int(label)), or in [0, 1) when the
 * class count is not known. */
static void make_dummy(Caffe__LayerParameter *l, int batch, const int chw[3], int classes) {
  const ProtobufCMessageDescriptor *d = &caffe__layer_parameter__descriptor;
  static const char *const clear[] = {"data_param", "image_data_param", "hdf5_data_param",
                                      "memory_data_param", "window_data_param", "transform_param"};
  for (size_t i = 0; i < sizeof clear / sizeof *clear; i++) ct_pb_clear(&l->base, ct_pb_field(d, clear[i]));
  ct_pb_set_string(&l->base, ct_pb_field(d, "type"), "DummyData");
  Caffe__DummyDataParameter *dp =
      (Caffe__DummyDataParameter *)ct_pb_mutable_message(&l->base, ct_pb_field(d, "dummy_data_param"));
  dp->shape = ct_xcalloc(l->n_top + 1, sizeof(Caffe__BlobShape *));
  dp->data_filler = ct_xcalloc(l->n_top + 1, sizeof(Caffe__FillerParameter *));
  int data_dims[4] = {batch, chw[0], chw[1], chw[2]};
  for (size_t t = 0; t < l->n_top; t++) {
    int label_dims[1] = {batch};
    dp->shape[dp->n_shape++] = t == 0 ? new_shape(4, data_dims) : new_shape(1, label_dims);
    /* the largest float below `classes`: int() of any draw is a class */
    float top = t == 0 || classes <= 0 ? 1.0f : nextafterf((float)classes, 0.0f);
    dp->data_filler[dp->n_data_filler++] = uniform_filler(0.0f, top);
  }
}

ct_status ct_net_param_replace_data_layers(Caffe__NetParameter *net, const int *dummy_chw,
                                           ct_error *err) {
  for (size_t i = 0; i < net->n_layer; i++) {
    Caffe__LayerParameter *l = net->layer[i];
    if (!is_data_layer(l)) continue;
    int batch, chw[3];
    CT_TRY(pick_shape(l, dummy_chw, &batch, chw, err));
    const char *reader = NULL, *producer = NULL;
    int classes = l->n_top > 1 ? label_classes(net, l->top[1], &reader, &producer) : 0;
    const char *name = l->name ? l->name : "";
    if (classes > 0)
      LOG_INFO("--dummy_data: layer %s (%s) -> DummyData %d x %d x %d x %d, labels spread over the %d "
               "classes of %s (read by %s)",
               name, l->type, batch, chw[0], chw[1], chw[2], classes, producer, reader);
    else
      LOG_INFO("--dummy_data: layer %s (%s) -> DummyData %d x %d x %d x %d", name, l->type, batch, chw[0],
               chw[1], chw[2]);
    make_dummy(l, batch, chw, classes);
  }
  return CT_OK;
}
