#include "net/net_load.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "data/source_shape.h"
#include "proto/reflect.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"

ct_status ct_net_param_read(const char *path, Caffe__NetParameter **out, ct_error *err) {
  *out = NULL;
  ProtobufCMessage *m;
  CT_TRY(ct_text_parse_file(&caffe__net_parameter__descriptor, path, &m, err));
  Caffe__NetParameter *net = (Caffe__NetParameter *)m;
  bool changed = false;
  ct_status s = ct_net_upgrade(net, &changed, path, err);
  if (s != CT_OK) {
    protobuf_c_message_free_unpacked(m, NULL);
    return s;
  }
  if (changed) LOG_INFO("Upgraded %s from an old net format in memory", path);
  *out = net;
  return CT_OK;
}

ct_status ct_solver_param_read(const char *path, Caffe__SolverParameter **out, ct_error *err) {
  *out = NULL;
  ProtobufCMessage *m;
  CT_TRY(ct_text_parse_file(&caffe__solver_parameter__descriptor, path, &m, err));
  Caffe__SolverParameter *sp = (Caffe__SolverParameter *)m;
  bool changed = false;
  ct_status s = ct_solver_upgrade(sp, &changed, path, err);
  if (s != CT_OK) {
    protobuf_c_message_free_unpacked(m, NULL);
    return s;
  }
  if (changed) LOG_INFO("Upgraded %s from an old solver format in memory", path);
  *out = sp;
  return CT_OK;
}

static bool is_data_type(const char *t) {
  static const char *const k[] = {"Data", "ImageData", "HDF5Data", "MemoryData", "WindowData"};
  for (size_t i = 0; i < sizeof k / sizeof *k; i++)
    if (strcmp(t, k[i]) == 0) return true;
  return false;
}

/* The per-sample shape (C,H,W) a data layer produces, as far as its own
 * parameters tell; 0 where unknown.  *batch gets the batch size. */
static void declared_shape(const Caffe__LayerParameter *l, int *batch, int chw[3]) {
  chw[0] = chw[1] = chw[2] = 0;
  *batch = 0;
  unsigned crop = l->transform_param && l->transform_param->has_crop_size ? l->transform_param->crop_size : 0;
  if (strcmp(l->type, "Data") == 0 && l->data_param) {
    *batch = (int)l->data_param->batch_size;
  } else if (strcmp(l->type, "ImageData") == 0 && l->image_data_param) {
    const Caffe__ImageDataParameter *p = l->image_data_param;
    *batch = (int)p->batch_size;
    chw[0] = p->is_color ? 3 : 1;
    if (p->new_height && p->new_width) {
      chw[1] = (int)p->new_height;
      chw[2] = (int)p->new_width;
    }
  } else if (strcmp(l->type, "HDF5Data") == 0 && l->hdf5_data_param) {
    *batch = (int)l->hdf5_data_param->batch_size;
  } else if (strcmp(l->type, "MemoryData") == 0 && l->memory_data_param) {
    const Caffe__MemoryDataParameter *p = l->memory_data_param;
    *batch = (int)p->batch_size;
    chw[0] = (int)p->channels;
    chw[1] = (int)p->height;
    chw[2] = (int)p->width;
  } else if (strcmp(l->type, "WindowData") == 0 && l->window_data_param) {
    *batch = (int)l->window_data_param->batch_size;
    chw[0] = 3;
    if (!crop) crop = l->window_data_param->crop_size; /* its old place, which WindowData reads */
  }
  if (crop) chw[1] = chw[2] = (int)crop;
}

static Caffe__BlobShape *new_shape(int n, const int *dims) {
  Caffe__BlobShape *s = (Caffe__BlobShape *)ct_pb_new(&caffe__blob_shape__descriptor);
  s->dim = ct_xcalloc((size_t)n + 1, sizeof(int64_t));
  s->n_dim = (size_t)n;
  for (int i = 0; i < n; i++) s->dim[i] = dims[i];
  return s;
}

/* Turns layer l into DummyData with the given shapes (data, then label). */
static void make_dummy(Caffe__LayerParameter *l, int batch, const int chw[3]) {
  const ProtobufCMessageDescriptor *d = &caffe__layer_parameter__descriptor;
  static const char *const clear[] = {"data_param", "image_data_param", "hdf5_data_param",
                                      "memory_data_param", "window_data_param", "transform_param"};
  for (size_t i = 0; i < sizeof clear / sizeof *clear; i++) ct_pb_clear(&l->base, ct_pb_field(d, clear[i]));
  ct_pb_set_string(&l->base, ct_pb_field(d, "type"), "DummyData");
  Caffe__DummyDataParameter *dp =
      (Caffe__DummyDataParameter *)ct_pb_mutable_message(&l->base, ct_pb_field(d, "dummy_data_param"));
  dp->shape = ct_xcalloc(l->n_top + 1, sizeof(Caffe__BlobShape *));
  int data_dims[4] = {batch, chw[0], chw[1], chw[2]};
  for (size_t t = 0; t < l->n_top; t++) {
    int label_dims[1] = {batch};
    dp->shape[dp->n_shape++] = t == 0 ? new_shape(4, data_dims) : new_shape(1, label_dims);
  }
  /* random data in [0, 1) for the images, 0 for labels (valid for every loss) */
  dp->data_filler = ct_xcalloc(2, sizeof(Caffe__FillerParameter *));
  Caffe__FillerParameter *f = (Caffe__FillerParameter *)ct_pb_new(&caffe__filler_parameter__descriptor);
  ct_pb_set_string(&f->base, ct_pb_field(&caffe__filler_parameter__descriptor, "type"), "uniform");
  dp->data_filler[dp->n_data_filler++] = f;
  if (l->n_top > 1) {
    Caffe__FillerParameter *z = (Caffe__FillerParameter *)ct_pb_new(&caffe__filler_parameter__descriptor);
    dp->data_filler[dp->n_data_filler++] = z;
  }
}

ct_status ct_net_param_replace_data_layers(Caffe__NetParameter *net, const int *dummy_chw,
                                           ct_error *err) {
  for (size_t i = 0; i < net->n_layer; i++) {
    Caffe__LayerParameter *l = net->layer[i];
    if (!l->type || !is_data_type(l->type)) continue;
    int batch, chw[3];
    declared_shape(l, &batch, chw);
    int src[3] = {0, 0, 0};
    bool from_source = ct_data_source_sample_shape(l, src);
    for (int k = 0; k < 3; k++) {
      if (chw[k] == 0 && from_source) chw[k] = src[k];
      if (chw[k] == 0 && dummy_chw) chw[k] = dummy_chw[k];
    }
    if (batch <= 0)
      return ct_error_set(err, CT_ERR_INVALID, "--dummy_data: layer '%s' (%s) has no batch_size",
                          l->name ? l->name : "", l->type);
    if (chw[0] <= 0 || chw[1] <= 0 || chw[2] <= 0)
      return ct_error_set(err, CT_ERR_INVALID,
                          "--dummy_data: cannot tell the sample shape of layer '%s' (%s): its source "
                          "cannot be read and no --dummy_shape=C,H,W was given",
                          l->name ? l->name : "", l->type);
    LOG_INFO("--dummy_data: layer %s (%s) -> DummyData %d x %d x %d x %d", l->name ? l->name : "",
             l->type, batch, chw[0], chw[1], chw[2]);
    make_dummy(l, batch, chw);
  }
  return CT_OK;
}
