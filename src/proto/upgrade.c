#include "proto/upgrade.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "proto/legacy_types.h"
#include "proto/reflect.h"
#include "proto/srcpos.h"

typedef Caffe__NetParameter Net;
typedef Caffe__LayerParameter Layer;
typedef Caffe__V1LayerParameter V1;
typedef Caffe__V0LayerParameter V0;

#define V1_DESC (&caffe__v1_layer_parameter__descriptor)
#define V0_DESC (&caffe__v0_layer_parameter__descriptor)
#define LAYER_DESC (&caffe__layer_parameter__descriptor)

static const char *source_or_default(const char *source) { return source ? source : "net"; }

static const char *v1_entry_name(const V1 *l) {
  const char *name = l->layer ? l->layer->name : l->name;
  return name ? name : "";
}

static bool is_padding(const V1 *l) {
  return l->layer && l->layer->type && strcmp(l->layer->type, "padding") == 0;
}

/* Index of the last entry before `i` with `blob` among its tops; -1 when the
 * blob is a net input; -2 when nothing provides it. */
static long last_producer(const Net *net, size_t i, const char *blob) {
  for (size_t k = i; k-- > 0;) {
    const V1 *l = net->layers[k];
    for (size_t t = 0; t < l->n_top; t++)
      if (strcmp(l->top[t], blob) == 0) return (long)k;
  }
  for (size_t t = 0; t < net->n_input; t++)
    if (strcmp(net->input[t], blob) == 0) return -1;
  return -2;
}

/* ================================================================ checks */

static ct_status check_v0_net(const Net *net, const char *src, ct_error *err) {
  for (size_t i = 0; i < net->n_layers; i++) {
    const V1 *l = net->layers[i];
    const char *type = l->layer->type;
    Caffe__V1LayerParameter__LayerType v1_type;
    if (type && !is_padding(l) && !ct_v0_layer_type_to_v1(type, &v1_type))
      return ct_error_set(err, CT_ERR_INVALID, "%s: layers[%zu] ('%s'): unknown V0 layer type \"%s\"",
                          src, i, v1_entry_name(l), type);
    for (size_t j = 0; j < l->n_bottom; j++) {
      long k = last_producer(net, i, l->bottom[j]);
      if (k == -2)
        return ct_error_set(err, CT_ERR_INVALID,
                            "%s: layers[%zu] ('%s'): bottom '%s' is neither a net input nor the "
                            "top of an earlier layer",
                            src, i, v1_entry_name(l), l->bottom[j]);
      if (k < 0 || !is_padding(net->layers[k])) continue;
      const V1 *pad = net->layers[k];
      if (!type || (strcmp(type, "conv") != 0 && strcmp(type, "pool") != 0))
        return ct_error_set(err, CT_ERR_INVALID,
                            "%s: layers[%zu] ('%s'): padding layer '%s' feeds a layer of type \"%s\"; "
                            "only conv and pool layers can absorb padding",
                            src, i, v1_entry_name(l), v1_entry_name(pad), type ? type : "");
      if (l->n_bottom != 1)
        return ct_error_set(err, CT_ERR_INVALID,
                            "%s: layers[%zu] ('%s'): a layer fed by padding layer '%s' must have "
                            "exactly one bottom, not %zu",
                            src, i, v1_entry_name(l), v1_entry_name(pad), l->n_bottom);
      if (pad->n_bottom != 1 || pad->n_top != 1)
        return ct_error_set(err, CT_ERR_INVALID,
                            "%s: layers[%ld] ('%s'): a padding layer must have exactly one bottom "
                            "and one top, not %zu and %zu",
                            src, k, v1_entry_name(pad), pad->n_bottom, pad->n_top);
    }
  }
  return CT_OK;
}

static ct_status check_v1_types(const Net *net, const char *src, ct_error *err) {
  for (size_t i = 0; i < net->n_layers; i++) {
    const V1 *l = net->layers[i];
    if (l->has_type && !ct_v1_layer_type_name(l->type))
      return ct_error_set(err, CT_ERR_INVALID, "%s: layers[%zu] ('%s'): unknown V1 layer type %d",
                          src, i, v1_entry_name(l), (int)l->type);
  }
  return CT_OK;
}

static ct_status check_inputs(const Net *net, const char *src, ct_error *err) {
  if (net->n_input == 0) return CT_OK;
  if (net->n_input_shape > 0 && net->n_input_shape != net->n_input)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: %zu 'input' entries but %zu 'input_shape' entries; give one shape "
                        "per input",
                        src, net->n_input, net->n_input_shape);
  if (net->n_input_shape == 0 && net->n_input_dim > 0 && net->n_input_dim != 4 * net->n_input)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: %zu 'input' entries need %zu 'input_dim' values (4 each), not %zu",
                        src, net->n_input, 4 * net->n_input, net->n_input_dim);
  return CT_OK;
}

/* ============================================================ V0 -> V1 */

/* Where a V0 setting goes: when the V0 type is `v0_type` (NULL: any type),
 * field `v0_field` moves to field `target` of the V1 layer's `v1_param`
 * message (NULL: of the V1 layer itself). */
typedef struct v0_rule {
  const char *v0_field, *v0_type, *v1_param, *target;
} v0_rule;

static const v0_rule k_v0_rules[] = {
    {"num_output", "conv", "convolution_param", "num_output"},
    {"num_output", "innerproduct", "inner_product_param", "num_output"},
    {"biasterm", "conv", "convolution_param", "bias_term"},
    {"biasterm", "innerproduct", "inner_product_param", "bias_term"},
    {"weight_filler", "conv", "convolution_param", "weight_filler"},
    {"weight_filler", "innerproduct", "inner_product_param", "weight_filler"},
    {"bias_filler", "conv", "convolution_param", "bias_filler"},
    {"bias_filler", "innerproduct", "inner_product_param", "bias_filler"},
    {"pad", "conv", "convolution_param", "pad"},
    {"pad", "pool", "pooling_param", "pad"},
    {"kernelsize", "conv", "convolution_param", "kernel_size"},
    {"kernelsize", "pool", "pooling_param", "kernel_size"},
    {"group", "conv", "convolution_param", "group"},
    {"stride", "conv", "convolution_param", "stride"},
    {"stride", "pool", "pooling_param", "stride"},
    {"pool", "pool", "pooling_param", "pool"},
    {"dropout_ratio", "dropout", "dropout_param", "dropout_ratio"},
    {"local_size", "lrn", "lrn_param", "local_size"},
    {"alpha", "lrn", "lrn_param", "alpha"},
    {"beta", "lrn", "lrn_param", "beta"},
    {"k", "lrn", "lrn_param", "k"},
    {"source", "data", "data_param", "source"},
    {"source", "hdf5_data", "hdf5_data_param", "source"},
    {"source", "images", "image_data_param", "source"},
    {"source", "window_data", "window_data_param", "source"},
    {"source", "infogain_loss", "infogain_loss_param", "source"},
    {"scale", NULL, "transform_param", "scale"},
    {"meanfile", NULL, "transform_param", "mean_file"},
    {"batchsize", "data", "data_param", "batch_size"},
    {"batchsize", "hdf5_data", "hdf5_data_param", "batch_size"},
    {"batchsize", "images", "image_data_param", "batch_size"},
    {"batchsize", "window_data", "window_data_param", "batch_size"},
    {"cropsize", NULL, "transform_param", "crop_size"},
    {"mirror", NULL, "transform_param", "mirror"},
    {"rand_skip", "data", "data_param", "rand_skip"},
    {"rand_skip", "images", "image_data_param", "rand_skip"},
    {"shuffle_images", "images", "image_data_param", "shuffle"},
    {"new_height", "images", "image_data_param", "new_height"},
    {"new_width", "images", "image_data_param", "new_width"},
    {"concat_dim", "concat", "concat_param", "concat_dim"},
    {"det_fg_threshold", "window_data", "window_data_param", "fg_threshold"},
    {"det_bg_threshold", "window_data", "window_data_param", "bg_threshold"},
    {"det_fg_fraction", "window_data", "window_data_param", "fg_fraction"},
    {"det_context_pad", "window_data", "window_data_param", "context_pad"},
    {"det_crop_mode", "window_data", "window_data_param", "crop_mode"},
    {"hdf5_output_param", "hdf5_output", NULL, "hdf5_output_param"},
};

/* Moves field `name` of src into the same-named field of dst. */
static void move_same_name(ProtobufCMessage *dst, ProtobufCMessage *src, const char *name) {
  ct_pb_move(dst, ct_pb_field(dst->descriptor, name), src, ct_pb_field(src->descriptor, name));
}

static void move_v0_setting(V1 *out, V0 *v0, const ProtobufCFieldDescriptor *f, const char *src) {
  const char *type = v0->type ? v0->type : "";
  for (size_t r = 0; r < sizeof k_v0_rules / sizeof k_v0_rules[0]; r++) {
    const v0_rule *rule = &k_v0_rules[r];
    if (strcmp(rule->v0_field, f->name) != 0) continue;
    if (rule->v0_type && strcmp(rule->v0_type, type) != 0) continue;
    ProtobufCMessage *dst = &out->base;
    if (rule->v1_param) dst = ct_pb_mutable_message(dst, ct_pb_field(V1_DESC, rule->v1_param));
    ct_pb_move(dst, ct_pb_field(dst->descriptor, rule->target), &v0->base, f);
    return;
  }
  LOG_WARNING("%s: layer '%s': V0 setting '%s' does not apply to type \"%s\"; dropped", src,
              out->name ? out->name : "", f->name, type);
}

/* Builds the V1 layer for V0 entry `conn` (which it frees). */
static V1 *v0_to_v1(V1 *conn, const char *src) {
  V1 *out = (V1 *)ct_pb_new(V1_DESC);
  V0 *v0 = conn->layer;
  move_same_name(&out->base, &conn->base, "bottom");
  move_same_name(&out->base, &conn->base, "top");
  move_same_name(&out->base, &v0->base, "name");
  if (v0->type) {
    Caffe__V1LayerParameter__LayerType t;
    bool known = ct_v0_layer_type_to_v1(v0->type, &t);
    CT_ASSERT(known); /* checked before any change */
    out->has_type = 1;
    out->type = t;
  }
  ct_pb_move(&out->base, ct_pb_field(V1_DESC, "blobs"), &v0->base, ct_pb_field(V0_DESC, "blobs"));
  move_same_name(&out->base, &v0->base, "blobs_lr");
  move_same_name(&out->base, &v0->base, "weight_decay");
  for (unsigned i = 0; i < V0_DESC->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &V0_DESC->fields[i];
    if (strcmp(f->name, "type") == 0 || !ct_pb_present(&v0->base, f)) continue;
    move_v0_setting(out, v0, f, src);
  }
  protobuf_c_message_free_unpacked(&conn->base, NULL);
  return out;
}

/* Folds each V0 "padding" layer into the conv/pool layer it feeds (its pad
 * value moves there, and that layer reads the padding layer's input), then
 * removes the padding layers. */
static void fold_padding_layers(Net *net) {
  for (size_t i = 0; i < net->n_layers; i++) {
    V1 *l = net->layers[i];
    if (is_padding(l)) continue;
    for (size_t j = 0; j < l->n_bottom; j++) {
      long k = last_producer(net, i, l->bottom[j]);
      if (k < 0 || !is_padding(net->layers[k])) continue;
      const V1 *pad = net->layers[k];
      l->layer->has_pad = 1;
      l->layer->pad = pad->layer->pad;
      free(l->bottom[j]);
      l->bottom[j] = ct_xstrdup(pad->bottom[0]);
    }
  }
  size_t kept = 0;
  for (size_t i = 0; i < net->n_layers; i++) {
    if (is_padding(net->layers[i]))
      protobuf_c_message_free_unpacked(&net->layers[i]->base, NULL);
    else
      net->layers[kept++] = net->layers[i];
  }
  net->n_layers = kept;
}

/* =============================================== V1 data transformation */

/* Moves the legacy transformation settings of a V1 data layer into its
 * transform_param; true when something moved. */
static bool move_data_transform(V1 *l) {
  const char *param = NULL;
  if (!l->has_type) return false;
  switch (l->type) {
    case CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__DATA: param = "data_param"; break;
    case CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__IMAGE_DATA: param = "image_data_param"; break;
    case CAFFE__V1_LAYER_PARAMETER__LAYER_TYPE__WINDOW_DATA: param = "window_data_param"; break;
    default: return false;
  }
  const ProtobufCFieldDescriptor *pf = ct_pb_field(V1_DESC, param);
  if (!ct_pb_present(&l->base, pf)) return false;
  ProtobufCMessage *p = ct_pb_mutable_message(&l->base, pf);
  static const char *const k_moved[] = {"scale", "mean_file", "crop_size", "mirror"};
  bool moved = false;
  for (size_t i = 0; i < 4; i++) {
    const ProtobufCFieldDescriptor *f = ct_pb_field(p->descriptor, k_moved[i]);
    if (!ct_pb_present(p, f)) continue;
    ProtobufCMessage *tp = ct_pb_mutable_message(&l->base, ct_pb_field(V1_DESC, "transform_param"));
    ct_pb_move(tp, ct_pb_field(tp->descriptor, k_moved[i]), p, f);
    moved = true;
  }
  return moved;
}

/* ============================================================ V1 -> V2 */

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Builds the LayerParameter for V1 layer `v1` (which it frees). */
static Layer *v1_to_v2(V1 *v1) {
  Layer *l = (Layer *)ct_pb_new(LAYER_DESC);
  ct_srcpos_copy_by_name(&l->base, &v1->base); /* name, type, bottom, top, ... keep their lines */
  static const char *const k_same[] = {"name",    "bottom", "top",        "include",
                                       "exclude", "blobs",  "loss_weight"};
  for (size_t i = 0; i < sizeof k_same / sizeof k_same[0]; i++)
    move_same_name(&l->base, &v1->base, k_same[i]);
  if (v1->has_type) {
    const char *name = ct_v1_layer_type_name(v1->type);
    CT_ASSERT(name); /* checked before any change */
    ct_pb_set_string(&l->base, ct_pb_field(LAYER_DESC, "type"), name);
  }

  size_t n_spec = v1->n_param;
  if (v1->n_blob_share_mode > n_spec) n_spec = v1->n_blob_share_mode;
  if (v1->n_blobs_lr > n_spec) n_spec = v1->n_blobs_lr;
  if (v1->n_weight_decay > n_spec) n_spec = v1->n_weight_decay;
  if (n_spec > 0) {
    l->param = ct_xcalloc(n_spec, sizeof *l->param);
    l->n_param = n_spec;
    for (size_t i = 0; i < n_spec; i++) {
      Caffe__ParamSpec *spec = (Caffe__ParamSpec *)ct_pb_new(&caffe__param_spec__descriptor);
      if (i < v1->n_param) {
        spec->name = v1->param[i]; /* the string moves */
        v1->param[i] = NULL;
      }
      if (i < v1->n_blob_share_mode) {
        spec->has_share_mode = 1;
        spec->share_mode = (Caffe__ParamSpec__DimCheckMode)v1->blob_share_mode[i];
      }
      if (i < v1->n_blobs_lr) {
        spec->has_lr_mult = 1;
        spec->lr_mult = v1->blobs_lr[i];
      }
      if (i < v1->n_weight_decay) {
        spec->has_decay_mult = 1;
        spec->decay_mult = v1->weight_decay[i];
      }
      l->param[i] = spec;
    }
  }

  /* Every typed setting message (accuracy_param ... transform_param,
   * loss_param) has the same name and type in both layer messages. */
  for (unsigned i = 0; i < V1_DESC->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &V1_DESC->fields[i];
    if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->label == PROTOBUF_C_LABEL_REPEATED ||
        !ends_with(f->name, "_param"))
      continue;
    ct_pb_move(&l->base, ct_pb_field(LAYER_DESC, f->name), &v1->base, f);
  }
  protobuf_c_message_free_unpacked(&v1->base, NULL);
  return l;
}

static void upgrade_v1_layers(Net *net) {
  net->layer = ct_xcalloc(net->n_layers, sizeof *net->layer);
  for (size_t i = 0; i < net->n_layers; i++) net->layer[i] = v1_to_v2(net->layers[i]);
  net->n_layer = net->n_layers;
  free(net->layers);
  net->layers = NULL;
  net->n_layers = 0;
}

/* ==================================================== inputs, BatchNorm */

/* Turns net-level inputs into a leading Input layer; true when the net had
 * inputs. */
static bool upgrade_inputs(Net *net) {
  if (net->n_input == 0) return false;
  if (net->n_input_shape > 0 || net->n_input_dim > 0) {
    Layer *in = (Layer *)ct_pb_new(LAYER_DESC);
    in->name = ct_xstrdup("input");
    in->type = ct_xstrdup("Input");
    Caffe__InputParameter *ip = (Caffe__InputParameter *)ct_pb_mutable_message(
        &in->base, ct_pb_field(LAYER_DESC, "input_param"));
    in->n_top = net->n_input;
    in->top = ct_xcalloc(net->n_input, sizeof *in->top);
    ip->n_shape = net->n_input;
    ip->shape = ct_xcalloc(net->n_input, sizeof *ip->shape);
    for (size_t i = 0; i < net->n_input; i++) {
      in->top[i] = ct_xstrdup(net->input[i]);
      if (net->n_input_shape > 0) {
        ip->shape[i] = net->input_shape[i]; /* moves */
        net->input_shape[i] = NULL;
      } else {
        Caffe__BlobShape *s = (Caffe__BlobShape *)ct_pb_new(&caffe__blob_shape__descriptor);
        s->n_dim = 4;
        s->dim = ct_xcalloc(4, sizeof *s->dim);
        for (size_t d = 0; d < 4; d++) s->dim[d] = net->input_dim[4 * i + d];
        ip->shape[i] = s;
      }
    }
    net->layer = ct_xrealloc(net->layer, (net->n_layer + 1) * sizeof *net->layer);
    memmove(net->layer + 1, net->layer, net->n_layer * sizeof *net->layer);
    net->layer[0] = in;
    net->n_layer++;
  }
  static const char *const k_cleared[] = {"input", "input_shape", "input_dim"};
  for (size_t i = 0; i < 3; i++)
    ct_pb_clear(&net->base, ct_pb_field(&caffe__net_parameter__descriptor, k_cleared[i]));
  return true;
}

/* BatchNorm layers with three ParamSpecs: the statistics are not learned, so
 * lr_mult and decay_mult become 0.  True when a value changed. */
static bool upgrade_batch_norm(Net *net) {
  bool changed = false;
  for (size_t i = 0; i < net->n_layer; i++) {
    Layer *l = net->layer[i];
    if (!l->type || strcmp(l->type, "BatchNorm") != 0 || l->n_param != 3) continue;
    for (size_t p = 0; p < 3; p++) {
      Caffe__ParamSpec *s = l->param[p];
      if (!s->has_lr_mult || s->lr_mult != 0.0f) {
        s->has_lr_mult = 1;
        s->lr_mult = 0.0f;
        changed = true;
      }
      if (!s->has_decay_mult || s->decay_mult != 0.0f) {
        s->has_decay_mult = 1;
        s->decay_mult = 0.0f;
        changed = true;
      }
    }
  }
  return changed;
}

/* ================================================================= net */

ct_status ct_net_upgrade(Net *net, bool *changed, const char *source_name, ct_error *err) {
  CT_ASSERT(net);
  const char *src = source_or_default(source_name);
  if (changed) *changed = false;

  if (net->n_layer > 0 && net->n_layers > 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: the net has both 'layer' and 'layers' entries (%zu and %zu); "
                        "'layers' is the old V1 format and cannot be mixed with 'layer'",
                        src, net->n_layer, net->n_layers);
  size_t n_v0 = 0;
  for (size_t i = 0; i < net->n_layers; i++) n_v0 += net->layers[i]->layer != NULL;
  if (n_v0 > 0 && n_v0 < net->n_layers)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: %zu of the %zu 'layers' entries are V0 (with a nested 'layer') "
                        "and the others V1; a net must use one format",
                        src, n_v0, net->n_layers);
  CT_TRY(n_v0 > 0 ? check_v0_net(net, src, err) : check_v1_types(net, src, err));
  CT_TRY(check_inputs(net, src, err));

  bool any = false;
  if (n_v0 > 0) {
    LOG_INFO("%s: upgrading V0 layers (layers { layer { ... } }) to V1", src);
    fold_padding_layers(net);
    for (size_t i = 0; i < net->n_layers; i++) net->layers[i] = v0_to_v1(net->layers[i], src);
    any = true;
  }
  bool moved = false;
  for (size_t i = 0; i < net->n_layers; i++) moved |= move_data_transform(net->layers[i]);
  if (moved) LOG_INFO("%s: moved data layer transformation settings into transform_param", src);
  any |= moved;
  if (net->n_layers > 0) {
    LOG_INFO("%s: upgrading %zu V1 layers (layers { type: ... }) to layer { type: \"...\" }", src,
             net->n_layers);
    upgrade_v1_layers(net);
    any = true;
  }
  if (upgrade_inputs(net)) {
    LOG_INFO("%s: net-level inputs became an Input layer", src);
    any = true;
  }
  if (upgrade_batch_norm(net)) {
    LOG_INFO("%s: BatchNorm statistics set to lr_mult 0, decay_mult 0", src);
    any = true;
  }
  if (changed) *changed = any;
  return CT_OK;
}

/* ============================================================== solver */

/* The deprecated solver_type enum becomes the `type` string. */
static ct_status upgrade_solver_type(Caffe__SolverParameter *solver, bool *changed, const char *src,
                                     ct_error *err) {
  if (!solver->has_solver_type) return CT_OK;
  static const char *const k_names[] = {"SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"};
  const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(
      &caffe__solver_parameter__solver_type__descriptor, (int)solver->solver_type);
  if (!ev || solver->solver_type < 0 || (size_t)solver->solver_type >= 6)
    return ct_error_set(err, CT_ERR_INVALID, "%s: unknown solver_type %d", src,
                        (int)solver->solver_type);
  const char *name = k_names[solver->solver_type];
  const ProtobufCFieldDescriptor *tf = ct_pb_field(&caffe__solver_parameter__descriptor, "type");
  if (ct_pb_present(&solver->base, tf) && strcmp(solver->type, name) != 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: solver_type: %s disagrees with type: \"%s\"; remove solver_type", src,
                        ev->name, solver->type);
  ct_pb_set_string(&solver->base, tf, name);
  ct_pb_clear(&solver->base, ct_pb_field(&caffe__solver_parameter__descriptor, "solver_type"));
  LOG_INFO("%s: solver_type: %s upgraded to type: \"%s\"", src, ev->name, name);
  *changed = true;
  return CT_OK;
}

/* One inline net of the solver, upgraded as a net file is; its messages
 * name it as "SOURCE: FIELD" ("lenet_consolidated_solver.prototxt:
 * test_net_param[1]"). */
static ct_status upgrade_inline_net(Net *net, const char *src, const char *field, long index, bool *changed,
                                    ct_error *err) {
  if (!net) return CT_OK;
  char name[1024];
  if (index >= 0) snprintf(name, sizeof name, "%s: %s[%ld]", src, field, index);
  else snprintf(name, sizeof name, "%s: %s", src, field);
  bool net_changed = false;
  CT_TRY(ct_net_upgrade(net, &net_changed, name, err));
  *changed |= net_changed;
  return CT_OK;
}

ct_status ct_solver_upgrade(Caffe__SolverParameter *solver, bool *changed, const char *source_name,
                            ct_error *err) {
  CT_ASSERT(solver);
  const char *src = source_name ? source_name : "solver";
  bool any = false;
  if (changed) *changed = false;
  CT_TRY(upgrade_solver_type(solver, &any, src, err));
  CT_TRY(upgrade_inline_net(solver->net_param, src, "net_param", -1, &any, err));
  CT_TRY(upgrade_inline_net(solver->train_net_param, src, "train_net_param", -1, &any, err));
  for (size_t i = 0; i < solver->n_test_net_param; i++)
    CT_TRY(upgrade_inline_net(solver->test_net_param[i], src, "test_net_param", (long)i, &any, err));
  if (changed) *changed = any;
  return CT_OK;
}
