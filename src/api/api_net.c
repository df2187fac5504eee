/* cortado.h: nets. */
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "layers/memory_data_layer.h"
#include "math/math.h"
#include "net/net_load.h"
#include "proto/textformat.h"
#include "proto/upgrade.h"

/* ------------------------------------------------------------------ wrapping */

/* Legacy `input` blobs, then the tops of Input layers (Caffe collects both
 * as the net's inputs). */
static void collect_inputs(cortado_net *n) {
  const ct_net *net = n->net;
  int total = net->ninputs;
  for (int i = 0; i < net->nlayers; i++)
    if (strcmp(net->layers[i]->ops->type, "Input") == 0) total += net->layers[i]->ntop;
  n->inputs = ct_xcalloc((size_t)total + 1, sizeof(int));
  for (int i = 0; i < net->ninputs; i++) n->inputs[n->ninputs++] = net->input_ids[i];
  for (int i = 0; i < net->nlayers; i++)
    if (strcmp(net->layers[i]->ops->type, "Input") == 0)
      for (int j = 0; j < net->layers[i]->ntop; j++) n->inputs[n->ninputs++] = net->top_ids[i][j];
}

cortado_net *api_net_wrap(ct_net *net, cortado_context *cctx, bool owned) {
  cortado_net *n = ct_xcalloc(1, sizeof *n);
  n->net = net;
  n->cctx = cctx;
  if (cctx) api_context_retain(cctx);
  n->owned = owned;
  n->blobs = ct_xcalloc((size_t)net->nblobs + 1, sizeof *n->blobs);
  for (int i = 0; i < net->nblobs; i++) api_blob_init(&n->blobs[i], net->blobs[i], n);
  n->params = ct_xcalloc((size_t)net->nlayers + 1, sizeof *n->params);
  n->custom = ct_xcalloc((size_t)net->nlayers + 1, sizeof(int));
  for (int l = 0; l < net->nlayers; l++) {
    const ct_layer *layer = net->layers[l];
    n->params[l] = ct_xcalloc((size_t)layer->nparams + 1, sizeof(cortado_blob));
    for (int j = 0; j < layer->nparams; j++) api_blob_init(&n->params[l][j], layer->params[j], n);
    bool reshaped;
    if (api_custom_layer(net, l, &reshaped)) n->custom[n->ncustom++] = l;
  }
  collect_inputs(n);
  return n;
}

void api_net_unwrap(cortado_net *n) {
  if (!n) return;
  for (int i = 0; i < n->net->nblobs; i++) api_blob_release(&n->blobs[i]);
  for (int l = 0; l < n->net->nlayers; l++) {
    for (int j = 0; j < n->net->layers[l]->nparams; j++) api_blob_release(&n->params[l][j]);
    free(n->params[l]);
  }
  free(n->params);
  free(n->blobs);
  free(n->inputs);
  free(n->custom);
  if (n->owned) ct_net_free(n->net);
  cortado_context_free(n->cctx);
  free(n);
}

/* On the CPU only 16-bit blobs have host copies to keep in step (float32
 * ones are their own storage): api_blob_flush and api_blob_touched skip
 * the others. */
void api_net_flush(cortado_net *n) {
  if (n->net->ctx->device == CT_DEVICE_CPU && !n->net->typed) return;
  for (int i = 0; i < n->net->nblobs; i++) api_blob_flush(&n->blobs[i]);
  for (int l = 0; l < n->net->nlayers; l++)
    for (int j = 0; j < n->net->layers[l]->nparams; j++) api_blob_flush(&n->params[l][j]);
}

void api_net_touched(cortado_net *n) {
  if (n->net->ctx->device == CT_DEVICE_CPU && !n->net->typed) return;
  for (int i = 0; i < n->net->nblobs; i++) api_blob_touched(&n->blobs[i]);
  for (int l = 0; l < n->net->nlayers; l++)
    for (int j = 0; j < n->net->layers[l]->nparams; j++) api_blob_touched(&n->params[l][j]);
}

/* ------------------------------------------------------------------ building */

static ct_status copy_weights(ct_net *net, const char *list, ct_error *err) {
  char *copy = ct_xstrdup(list), *save = NULL;
  ct_status st = CT_OK;
  for (char *f = strtok_r(copy, ",", &save); f && st == CT_OK; f = strtok_r(NULL, ",", &save))
    if (*f) st = ct_net_copy_trained_file(net, f, err);
  free(copy);
  return st;
}

static cortado_status build(cortado_context *ctx, Caffe__NetParameter *param, const char *source,
                            const cortado_net_options *opts, cortado_net **out) {
  static const cortado_net_options defaults = CORTADO_NET_OPTIONS_INIT;
  if (!opts) opts = &defaults;
  ct_net_opts o = {0};
  o.phase = (ct_phase)opts->phase;
  o.level = opts->level;
  o.stages = opts->stages;
  o.nstages = opts->nstages;
  o.source_name = source;
  o.keep_blob_diffs = true; /* Caffe's semantics: every blob's diff is its own */
  o.no_fusion = opts->no_fusion;
  ct_error err;
  ct_net *net = NULL;
  ct_status st = ct_net_init(&net, param, &o, &ctx->ctx, &err);
  protobuf_c_message_free_unpacked(&param->base, NULL);
  if (st == CT_OK && opts->weights && *opts->weights) st = copy_weights(net, opts->weights, &err);
  if (st != CT_OK) {
    ct_net_free(net);
    return api_fail(&err);
  }
  *out = api_net_wrap(net, ctx, true);
  return CORTADO_OK;
}

cortado_status cortado_net_create(cortado_context *ctx, const char *path, const cortado_net_options *opts,
                                  cortado_net **out) {
  *out = NULL;
  ct_error err;
  Caffe__NetParameter *param;
  if (ct_net_param_read(path, &param, &err) != CT_OK) return api_fail(&err);
  return build(ctx, param, path, opts, out);
}

cortado_status cortado_net_create_from_text(cortado_context *ctx, const char *text, size_t len,
                                            const char *source, const cortado_net_options *opts,
                                            cortado_net **out) {
  *out = NULL;
  ct_error err;
  ProtobufCMessage *m;
  if (!source) source = "<text>";
  if (ct_text_parse(&caffe__net_parameter__descriptor, text, len, source, &m, &err) != CT_OK)
    return api_fail(&err);
  Caffe__NetParameter *param = (Caffe__NetParameter *)m;
  if (ct_net_upgrade(param, NULL, source, &err) != CT_OK) {
    protobuf_c_message_free_unpacked(m, NULL);
    return api_fail(&err);
  }
  return build(ctx, param, source, opts, out);
}

void cortado_net_free(cortado_net *n) {
  if (!n) return;
  CT_ASSERTF(n->owned, "cortado_net_free: this net belongs to a solver");
  api_net_unwrap(n);
}

/* ------------------------------------------------------------------ looking */

#define CHECK_LAYER(n, l) CT_ASSERTF((l) >= 0 && (l) < (n)->net->nlayers, "layer index %d of %d", (l), (n)->net->nlayers)
#define CHECK_BLOB(n, b) CT_ASSERTF((b) >= 0 && (b) < (n)->net->nblobs, "blob index %d of %d", (b), (n)->net->nblobs)

const char *cortado_net_name(const cortado_net *n) { return n->net->name; }
cortado_phase cortado_net_phase(const cortado_net *n) { return (cortado_phase)n->net->phase; }
cortado_context *cortado_net_context(const cortado_net *n) { return n->cctx; }
int cortado_net_num_layers(const cortado_net *n) { return n->net->nlayers; }

const char *cortado_net_layer_name(const cortado_net *n, int l) {
  CHECK_LAYER(n, l);
  return n->net->layers[l]->name;
}

const char *cortado_net_layer_type(const cortado_net *n, int l) {
  CHECK_LAYER(n, l);
  return n->net->layers[l]->ops->type;
}

int cortado_net_layer_index(const cortado_net *n, const char *name) { return ct_net_layer_index(n->net, name); }

int cortado_net_layer_num_bottoms(const cortado_net *n, int l) {
  CHECK_LAYER(n, l);
  return n->net->layers[l]->nbottom;
}

int cortado_net_layer_bottom(const cortado_net *n, int l, int i) {
  CHECK_LAYER(n, l);
  CT_ASSERTF(i >= 0 && i < n->net->layers[l]->nbottom, "bottom %d of layer %d", i, l);
  return n->net->bottom_ids[l][i];
}

int cortado_net_layer_num_tops(const cortado_net *n, int l) {
  CHECK_LAYER(n, l);
  return n->net->layers[l]->ntop;
}

int cortado_net_layer_top(const cortado_net *n, int l, int i) {
  CHECK_LAYER(n, l);
  CT_ASSERTF(i >= 0 && i < n->net->layers[l]->ntop, "top %d of layer %d", i, l);
  return n->net->top_ids[l][i];
}

int cortado_net_layer_num_params(const cortado_net *n, int l) {
  CHECK_LAYER(n, l);
  return n->net->layers[l]->nparams;
}

cortado_blob *cortado_net_layer_param(cortado_net *n, int l, int i) {
  CHECK_LAYER(n, l);
  CT_ASSERTF(i >= 0 && i < n->net->layers[l]->nparams, "param %d of layer %d", i, l);
  return &n->params[l][i];
}

void *cortado_net_layer_state(const cortado_net *n, int l) {
  CHECK_LAYER(n, l);
  return api_custom_state(n->net, l);
}

int cortado_net_num_blobs(const cortado_net *n) { return n->net->nblobs; }

const char *cortado_net_blob_name(const cortado_net *n, int b) {
  CHECK_BLOB(n, b);
  return n->net->blobs[b]->name ? n->net->blobs[b]->name : "";
}

cortado_blob *cortado_net_blob(cortado_net *n, int b) {
  CHECK_BLOB(n, b);
  return &n->blobs[b];
}

int cortado_net_blob_index(const cortado_net *n, const char *name) {
  for (int i = 0; i < n->net->nblobs; i++)
    if (n->net->blobs[i]->name && strcmp(n->net->blobs[i]->name, name) == 0) return i;
  return -1;
}

cortado_blob *cortado_net_blob_by_name(cortado_net *n, const char *name) {
  int i = cortado_net_blob_index(n, name);
  return i < 0 ? NULL : &n->blobs[i];
}

float cortado_net_blob_loss_weight(const cortado_net *n, int b) {
  CHECK_BLOB(n, b);
  const ct_net *net = n->net;
  for (int l = 0; l < net->nlayers; l++)
    for (int j = 0; j < net->layers[l]->ntop; j++)
      if (net->top_ids[l][j] == b && net->layers[l]->loss_weight[j] != 0.0f)
        return net->layers[l]->loss_weight[j];
  return 0.0f;
}

int cortado_net_num_inputs(const cortado_net *n) { return n->ninputs; }

int cortado_net_input(const cortado_net *n, int i) {
  CT_ASSERTF(i >= 0 && i < n->ninputs, "input %d of %d", i, n->ninputs);
  return n->inputs[i];
}

int cortado_net_num_outputs(const cortado_net *n) { return n->net->noutputs; }

int cortado_net_output(const cortado_net *n, int i) {
  CT_ASSERTF(i >= 0 && i < n->net->noutputs, "output %d of %d", i, n->net->noutputs);
  return n->net->output_ids[i];
}

/* ------------------------------------------------------------------ computing */

/* Reshapes layers from..end after a custom layer changed its tops' shapes
 * in its forward (Caffe reshapes every layer in every forward); loss tops
 * get their loss weight back in their diffs. */
static ct_status reshape_from(ct_net *net, int from, ct_error *err) {
  net->layout_version++;
  for (int i = from; i < net->nlayers; i++) {
    ct_layer *l = net->layers[i];
    CT_TRY(ct_layer_reshape(l, net->bottoms[i], net->tops[i], err));
    for (int j = 0; j < l->ntop; j++)
      if (l->loss_weight[j] != 0.0f) {
        ct_tensor *t = net->tops[i][j];
        ct_tensor_need_diff(t);
        ct_dev_set(net->ctx, t->count, l->loss_weight[j], t->diff);
      }
  }
  return CT_OK;
}

static ct_status forward_segments(cortado_net *n, int start, int end, double *loss, ct_error *err) {
  ct_net *net = n->net;
  if (n->shapes_dirty) {
    CT_TRY(ct_net_reshape(net, err));
    n->shapes_dirty = false;
  }
  double total = 0;
  int c = 0;
  for (int i = start; i <= end;) {
    while (c < n->ncustom && n->custom[c] < i) c++;
    const int stop = c < n->ncustom && n->custom[c] <= end ? n->custom[c] : end;
    double part = 0;
    CT_TRY(ct_net_forward_range(net, i, stop + 1, &part, err));
    total += part;
    bool reshaped = false;
    if (c < n->ncustom && n->custom[c] == stop && api_custom_layer(net, stop, &reshaped) && reshaped)
      CT_TRY(reshape_from(net, stop + 1, err));
    i = stop + 1;
  }
  if (loss) *loss = total;
  return CT_OK;
}

cortado_status cortado_net_forward_range(cortado_net *n, int start, int end, double *loss) {
  ct_error err;
  if (loss) *loss = 0;
  if (start < 0 || end >= n->net->nlayers || start > end)
    return cortado_set_error(CORTADO_ERR_INVALID, "forward from layer %d to %d: the net has layers 0 to %d",
                             start, end, n->net->nlayers - 1);
  api_net_flush(n);
  sigset_t mask;
  const bool shielded = api_shield(&mask);
  ct_status st = forward_segments(n, start, end, loss, &err);
  api_unshield(shielded, &mask);
  api_net_touched(n);
  return api_result(st, &err);
}

cortado_status cortado_net_forward(cortado_net *n, double *loss) {
  if (n->net->nlayers == 0) {
    if (loss) *loss = 0;
    return CORTADO_OK;
  }
  return cortado_net_forward_range(n, 0, n->net->nlayers - 1, loss);
}

cortado_status cortado_net_backward_range(cortado_net *n, int start, int end) {
  ct_net *net = n->net;
  if (end < 0 || start >= net->nlayers || start < end)
    return cortado_set_error(CORTADO_ERR_INVALID,
                             "backward from layer %d down to %d: the net has layers 0 to %d", start,
                             end, net->nlayers - 1);
  api_net_flush(n);
  sigset_t mask;
  const bool shielded = api_shield(&mask);
  for (int i = start; i >= end; i--) ct_net_backward_layer(net, i);
  ct_context_grad_join(net->ctx);
  ct_context_sync(net->ctx);
  api_unshield(shielded, &mask);
  api_net_touched(n);
  ct_error err;
  return api_result(api_custom_take_failure(net, &err), &err);
}

cortado_status cortado_net_backward(cortado_net *n) {
  if (n->net->nlayers == 0) return CORTADO_OK;
  return cortado_net_backward_range(n, n->net->nlayers - 1, 0);
}

cortado_status cortado_net_reshape(cortado_net *n) {
  ct_error err;
  api_net_flush(n);
  ct_status st = ct_net_reshape(n->net, &err);
  if (st == CT_OK) n->shapes_dirty = false;
  api_net_touched(n);
  return api_result(st, &err);
}

void cortado_net_clear_param_diffs(cortado_net *n) {
  api_net_flush(n);
  ct_net_clear_param_diffs(n->net);
  ct_context_sync(n->net->ctx);
  api_net_touched(n);
}

cortado_status cortado_net_copy_from(cortado_net *n, const char *path) {
  ct_error err;
  api_net_flush(n);
  ct_status st = copy_weights(n->net, path, &err);
  api_net_touched(n);
  return api_result(st, &err);
}

cortado_status cortado_net_share_with(cortado_net *n, const cortado_net *other) {
  if (n->net->ctx->device != other->net->ctx->device)
    return cortado_set_error(CORTADO_ERR_INVALID,
                             "share_with: net '%s' is on device %d but net '%s' on device %d",
                             n->net->name, n->net->ctx->device, other->net->name, other->net->ctx->device);
  /* Every parameter of a layer of the same name must have the other's shape
   * (Caffe's check in ShareTrainedLayersWith). */
  for (int l = 0; l < n->net->nlayers; l++) {
    const ct_layer *a = n->net->layers[l];
    int o = ct_net_layer_index(other->net, a->name);
    if (o < 0) continue;
    const ct_layer *b = other->net->layers[o];
    if (a->nparams != b->nparams)
      return cortado_set_error(CORTADO_ERR_INVALID,
                               "share_with: layer '%s' has %d learnable blobs here and %d in the other net",
                               a->name, a->nparams, b->nparams);
    for (int j = 0; j < a->nparams; j++)
      if (!ct_tensor_same_shape(a->params[j], b->params[j])) {
        char sa[128], sb[128];
        return cortado_set_error(CORTADO_ERR_INVALID, "share_with: layer '%s' blob %d: shape %s here, %s there",
                                 a->name, j, ct_tensor_shape_string(a->params[j], sa, sizeof sa),
                                 ct_tensor_shape_string(b->params[j], sb, sizeof sb));
      }
  }
  api_net_flush(n);
  ct_net_share_trained(n->net, other->net);
  api_net_touched(n);
  return CORTADO_OK;
}

cortado_status cortado_net_save(cortado_net *n, const char *path, bool write_diff) {
  ct_error err;
  api_net_flush(n);
  return api_result(ct_net_save_caffemodel(n->net, path, write_diff, &err), &err);
}

cortado_status cortado_net_set_input_arrays(cortado_net *n, const float *data, const float *labels,
                                            int num) {
  ct_error err;
  if (n->net->nlayers == 0 || strcmp(n->net->layers[0]->ops->type, "MemoryData") != 0)
    return cortado_set_error(CORTADO_ERR_INVALID,
                             "set_input_arrays may only be called if the first layer is a MemoryData layer");
  if (num <= 0) return cortado_set_error(CORTADO_ERR_INVALID, "set_input_arrays: %d samples", num);
  return api_result(ct_memory_data_set(n->net->layers[0], data, labels, (size_t)num, &err), &err);
}
