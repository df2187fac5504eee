#include "proto/io.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "proto/legacy_types.h"
#include "proto/srcpos.h"

/* ------------------------------------------------------------- binary I/O */

/* Serialized size of msg counting only the fields its type defines. */
static size_t known_fields_size(ProtobufCMessage *msg) {
  size_t n_unknown = msg->n_unknown_fields;
  msg->n_unknown_fields = 0;
  size_t size = protobuf_c_message_get_packed_size(msg);
  msg->n_unknown_fields = n_unknown;
  return size;
}

ct_status ct_proto_read_binary(const ProtobufCMessageDescriptor *desc, const char *path,
                               ProtobufCMessage **out, ct_error *err) {
  CT_ASSERT(desc && path && out);
  *out = NULL;
  char *data = NULL;
  size_t len = 0;
  CT_TRY(ct_file_read_all(path, &data, &len, CT_PROTO_MAX_BYTES, err));
  if (len == 0) {
    free(data);
    return ct_error_set(err, CT_ERR_PARSE, "%s: file is empty, expected a binary %s", path,
                        desc->name);
  }
  ProtobufCMessage *msg = protobuf_c_message_unpack(desc, NULL, len, (const uint8_t *)data);
  free(data);
  if (!msg)
    return ct_error_set(err, CT_ERR_PARSE, "%s: not a valid binary %s (truncated or corrupt, %zu bytes)",
                        path, desc->name, len);
  if (msg->n_unknown_fields > 0 && known_fields_size(msg) == 0) {
    protobuf_c_message_free_unpacked(msg, NULL);
    return ct_error_set(err, CT_ERR_PARSE,
                        "%s: no %s fields in %zu bytes (a text prototxt, or another kind of file?)",
                        path, desc->name, len);
  }
  *out = msg;
  return CT_OK;
}

ct_status ct_proto_write_binary(const ProtobufCMessage *msg, const char *path, ct_error *err) {
  CT_ASSERT(msg && path);
  uint8_t *buf;
  size_t len = ct_srcpos_pack_without(msg, &buf);
  if (!buf)
    return ct_error_set(err, CT_ERR_NOMEM, "%s: cannot allocate memory to serialize %s", path,
                        msg->descriptor->name);
  ct_status s = ct_file_write_atomic(path, buf, len, err);
  free(buf);
  return s;
}

/* ------------------------------------------------------------ blob shapes */

static bool has_legacy_dims(const Caffe__BlobProto *b) {
  return b->has_num || b->has_channels || b->has_height || b->has_width;
}

int ct_blob_proto_shape(const Caffe__BlobProto *b, int64_t *dims, int max_dims) {
  CT_ASSERT(b && (dims || max_dims == 0));
  if (has_legacy_dims(b)) {
    const int64_t legacy[4] = {b->num, b->channels, b->height, b->width};
    for (int i = 0; i < 4 && i < max_dims; i++) dims[i] = legacy[i];
    return 4;
  }
  int n = b->shape ? (int)b->shape->n_dim : 0;
  for (int i = 0; i < n && i < max_dims; i++) dims[i] = b->shape->dim[i];
  return n;
}

bool ct_blob_proto_shape_matches(const Caffe__BlobProto *b, const int64_t *dims, int n_dims) {
  CT_ASSERT(b && (dims || n_dims == 0));
  if (has_legacy_dims(b)) {
    if (n_dims > 4) return false;
    int64_t padded[4] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; i++) padded[4 - n_dims + i] = dims[i];
    return padded[0] == b->num && padded[1] == b->channels && padded[2] == b->height &&
           padded[3] == b->width;
  }
  int n = b->shape ? (int)b->shape->n_dim : 0;
  if (n != n_dims) return false;
  for (int i = 0; i < n; i++)
    if (b->shape->dim[i] != dims[i]) return false;
  return true;
}

/* ------------------------------------------------------------- model info */

static void print_blobs(FILE *out, Caffe__BlobProto *const *blobs, size_t n_blobs) {
  for (size_t i = 0; i < n_blobs; i++) {
    int64_t dims[32];
    int n = ct_blob_proto_shape(blobs[i], dims, 32);
    fputs(i == 0 ? "  " : " ", out);
    if (n == 0) fputs("scalar", out);
    for (int d = 0; d < n && d < 32; d++) fprintf(out, d ? "x%" PRId64 : "%" PRId64, dims[d]);
    if (n > 32) fputs("x...", out);
  }
}

static void print_layer(FILE *out, const char *name, const char *type,
                        Caffe__BlobProto *const *blobs, size_t n_blobs) {
  fprintf(out, "%s  %s", name && *name ? name : "(unnamed)", type && *type ? type : "(no type)");
  print_blobs(out, blobs, n_blobs);
  fputc('\n', out);
}

/* The V2 type string for a V1 layer (or for the V0 layer inside it). */
static const char *v1_layer_type(const Caffe__V1LayerParameter *l) {
  if (l->layer) {
    Caffe__V1LayerParameter__LayerType t;
    if (l->layer->type && ct_v0_layer_type_to_v1(l->layer->type, &t))
      return ct_v1_layer_type_name(t);
    return l->layer->type;
  }
  const char *name = l->has_type ? ct_v1_layer_type_name(l->type) : "";
  return name ? name : "(unknown V1 type)";
}

ct_status ct_model_info_print(const char *caffemodel_path, FILE *out, ct_error *err) {
  CT_ASSERT(caffemodel_path && out);
  ProtobufCMessage *msg = NULL;
  CT_TRY(ct_proto_read_binary(&caffe__net_parameter__descriptor, caffemodel_path, &msg, err));
  Caffe__NetParameter *net = (Caffe__NetParameter *)msg;
  for (size_t i = 0; i < net->n_layer; i++) {
    const Caffe__LayerParameter *l = net->layer[i];
    print_layer(out, l->name, l->type, l->blobs, l->n_blobs);
  }
  for (size_t i = 0; i < net->n_layers; i++) {
    const Caffe__V1LayerParameter *l = net->layers[i];
    if (l->layer)
      print_layer(out, l->layer->name, v1_layer_type(l), l->layer->blobs, l->layer->n_blobs);
    else
      print_layer(out, l->name, v1_layer_type(l), l->blobs, l->n_blobs);
  }
  protobuf_c_message_free_unpacked(msg, NULL);
  if (fflush(out) != 0 || ferror(out))
    return ct_error_set(err, CT_ERR_IO, "%s: writing the layer list failed", caffemodel_path);
  return CT_OK;
}
