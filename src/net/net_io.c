/* A net's parameters in and out: Caffe's CopyTrainedLayersFrom, ToProto and
 * ShareTrainedLayersWith. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/log.h"
#include "net/net.h"
#include "proto/io.h"

static ct_status copy_blob(ct_net *net, ct_layer *l, int j, const Caffe__BlobProto *bp, ct_error *err) {
  ct_tensor *t = l->params[j];
  int64_t dims[CT_MAX_AXES];
  for (int a = 0; a < t->ndim; a++) dims[a] = t->shape[a];
  if (!ct_blob_proto_shape_matches(bp, dims, t->ndim)) {
    int64_t sd[CT_MAX_AXES];
    int sn = ct_blob_proto_shape(bp, sd, CT_MAX_AXES);
    char src[256] = "", dst[256];
    size_t o = 0;
    /* the count as Caffe prints it, but never wrapped: a negative or huge
     * dimension in the file is shown as what it is */
    uint64_t cnt = 1;
    bool valid = sn <= CT_MAX_AXES;
    for (int a = 0; a < sn && a < CT_MAX_AXES && o < sizeof src; a++) {
      o += (size_t)snprintf(src + o, sizeof src - o, "%lld ", (long long)sd[a]);
      if (sd[a] < 0 || (sd[a] > 0 && cnt > UINT64_MAX / (uint64_t)sd[a])) valid = false;
      else cnt *= (uint64_t)sd[a];
    }
    if (o < sizeof src)
      snprintf(src + o, sizeof src - o, valid ? "(%llu)" : "(not a valid shape)", (unsigned long long)cnt);
    return ct_error_set(err, CT_ERR_INVALID,
                        "cannot copy param %d weights from layer '%s'; shape mismatch. Source param "
                        "shape is %s; target param shape is %s. To learn this layer's parameters from "
                        "scratch rather than copying from a saved net, rename the layer.",
                        j, l->name, src, ct_tensor_shape_string(t, dst, sizeof dst));
  }
  if (bp->n_data == t->count) {
    ct_tensor_upload(t, bp->data);
  } else if (bp->n_double_data == t->count) {
    float *h = ct_xcalloc(t->count, sizeof(float));
    for (size_t i = 0; i < t->count; i++) h[i] = (float)bp->double_data[i];
    ct_tensor_upload(t, h);
    free(h);
  } else {
    return ct_error_set(err, CT_ERR_INVALID,
                        "layer '%s' param %d: the stored blob has %zu values for a shape of %zu",
                        l->name, j, bp->n_data ? bp->n_data : bp->n_double_data, t->count);
  }
  (void)net;
  return CT_OK;
}

static ct_status copy_layer(ct_net *net, const char *name, Caffe__BlobProto **blobs, size_t nblobs,
                            ct_error *err) {
  int li = ct_net_layer_index(net, name);
  if (li < 0) {
    if (!net->quiet_build) LOG_INFO("Ignoring source layer %s", name);
    return CT_OK;
  }
  ct_layer *l = net->layers[li];
  if (l->released) return CT_OK; /* another process's (net.h: a part) */
  if ((int)nblobs != l->nparams)
    return ct_error_set(err, CT_ERR_INVALID,
                        "incompatible number of blobs for layer '%s': the source has %zu, the net %d",
                        name, nblobs, l->nparams);
  if (!net->quiet_build) LOG_INFO("Copying source layer %s (%s, %zu blobs)", name, l->ops->type, nblobs);
  for (size_t j = 0; j < nblobs; j++) CT_TRY(copy_blob(net, l, (int)j, blobs[j], err));
  if (!net->weights_copied) net->weights_copied = ct_xcalloc((size_t)net->nlayers + 1, sizeof(bool));
  net->weights_copied[li] = true;
  return CT_OK;
}

ct_status ct_net_copy_trained(ct_net *net, const Caffe__NetParameter *trained, ct_error *err) {
  for (size_t i = 0; i < trained->n_layer; i++) {
    const Caffe__LayerParameter *src = trained->layer[i];
    CT_TRY(copy_layer(net, src->name ? src->name : "", src->blobs, src->n_blobs, err));
  }
  /* V1 `layers` carry names and blobs the same way; no upgrade needed to copy. */
  for (size_t i = 0; i < trained->n_layers; i++) {
    const Caffe__V1LayerParameter *src = trained->layers[i];
    CT_TRY(copy_layer(net, src->name ? src->name : "", src->blobs, src->n_blobs, err));
  }
  return CT_OK;
}

/* Remembers the source layers with blobs that this net has none of (for
 * the hint of ct_net_weights_check). */
static void note_unmatched(ct_net *net, const Caffe__NetParameter *trained) {
  for (size_t i = 0; i < trained->n_layer + trained->n_layers; i++) {
    const bool v2 = i < trained->n_layer;
    const char *name = v2 ? trained->layer[i]->name : trained->layers[i - trained->n_layer]->name;
    size_t nblobs = v2 ? trained->layer[i]->n_blobs : trained->layers[i - trained->n_layer]->n_blobs;
    if (nblobs == 0 || !name || ct_net_layer_index(net, name) >= 0) continue;
    if (net->nweights_unmatched < 3)
      snprintf(net->weights_unmatched[net->nweights_unmatched], sizeof net->weights_unmatched[0], "%s",
               name);
    net->nweights_unmatched++;
  }
}

ct_status ct_net_copy_trained_file(ct_net *net, const char *path, ct_error *err) {
  ProtobufCMessage *m;
  CT_TRY(ct_proto_read_binary(&caffe__net_parameter__descriptor, path, &m, err));
  ct_status s = ct_net_copy_trained(net, (Caffe__NetParameter *)m, err);
  note_unmatched(net, (const Caffe__NetParameter *)m);
  protobuf_c_message_free_unpacked(m, NULL);
  if (s != CT_OK) return ct_error_prefix(err, "%s", path);
  return CT_OK;
}

void ct_net_weights_begin(ct_net *net) {
  if (net->weights_copied) memset(net->weights_copied, 0, (size_t)net->nlayers * sizeof(bool));
  net->nweights_unmatched = 0;
}

ct_status ct_net_weights_check(const ct_net *net, const char *what, bool strict, const char *hint,
                               ct_error *err) {
  char msg[CT_ERROR_MSG_MAX] = "";
  size_t o = 0;
  int missing = 0;
  for (int i = 0; i < net->nlayers; i++) {
    const ct_layer *l = net->layers[i];
    if (l->nparams == 0 || l->released || (net->weights_copied && net->weights_copied[i])) continue;
    if (missing < 3 && o < sizeof msg)
      o += (size_t)snprintf(msg + o, sizeof msg - o, "%s'%s' (%s, %d blob%s)", missing ? ", " : "",
                            l->name, l->ops->type, l->nparams, l->nparams == 1 ? "" : "s");
    missing++;
  }
  if (!missing) return CT_OK;
  if (missing > 3 && o < sizeof msg) o += (size_t)snprintf(msg + o, sizeof msg - o, " and %d more", missing - 3);
  char others[512] = "";
  size_t k = 0;
  const int shown = net->nweights_unmatched < 3 ? net->nweights_unmatched : 3;
  for (int i = 0; i < shown && k < sizeof others; i++)
    k += (size_t)snprintf(others + k, sizeof others - k, "%s'%s'", i ? ", " : "", net->weights_unmatched[i]);
  if (net->nweights_unmatched > 3 && k < sizeof others)
    snprintf(others + k, sizeof others - k, " and %d more", net->nweights_unmatched - 3);
  char full[CT_ERROR_MSG_MAX];
  snprintf(full, sizeof full,
           "%s: layer%s %s got no weights; %s parameters stay as the fillers made them (%s%s%s)",
           what, missing == 1 ? "" : "s", msg, missing == 1 ? "its" : "their",
           net->nweights_unmatched ? "renamed? the file has " : "the file has no layer of that name: cut short?",
           others, net->nweights_unmatched ? " that this net has not" : "");
  if (strict) return ct_error_set(err, CT_ERR_INVALID, "%s%s%s", full, hint ? "; " : "", hint ? hint : "");
  LOG_WARNING("%s%s%s", full, hint ? "; " : "", hint ? hint : "");
  return CT_OK;
}

/* True when no parameter tensor of net views its own flat buffers. */
static bool flat_unused(const ct_net *net) {
  const float *lo = net->flat_data, *hi = net->flat_data + net->flat_count;
  for (int i = 0; i < net->nlayers; i++) {
    const ct_layer *l = net->layers[i];
    for (int j = 0; j < l->nparams; j++)
      if ((const float *)l->params[j]->data >= lo && (const float *)l->params[j]->data < hi) return false;
  }
  return true;
}

void ct_net_share_trained(ct_net *net, const ct_net *other) {
  for (int i = 0; i < other->nlayers; i++) {
    const ct_layer *src = other->layers[i];
    int li = ct_net_layer_index(net, src->name);
    if (li < 0) continue;
    ct_layer *dst = net->layers[li];
    CT_ASSERT(dst->nparams == src->nparams);
    for (int j = 0; j < src->nparams; j++) {
      CT_ASSERT(dst->params[j]->count == src->params[j]->count);
      ct_tensor_share_data(dst->params[j], src->params[j]);
      ct_tensor_share_diff(dst->params[j], src->params[j]);
    }
  }
  /* When every parameter now lives in other's buffers (a test net sharing
   * the train net's weights), this net's own copies are dead weight. */
  if (net->flat_data && flat_unused(net)) {
    ct_mem_free(net->ctx->device, net->flat_data);
    ct_mem_free(net->ctx->device, net->flat_diff);
    net->flat_data = net->flat_diff = NULL;
    net->flat_count = 0;
    net->layout_version++;
  }
}

/* ---------------------------------------------------------------- out */

static Caffe__BlobProto *blob_to_proto(const ct_tensor *t, bool write_diff) {
  Caffe__BlobProto *b = ct_xcalloc(1, sizeof *b);
  caffe__blob_proto__init(b);
  Caffe__BlobShape *s = ct_xcalloc(1, sizeof *s);
  caffe__blob_shape__init(s);
  s->n_dim = (size_t)t->ndim;
  s->dim = ct_xcalloc((size_t)t->ndim + 1, sizeof(int64_t));
  for (int a = 0; a < t->ndim; a++) s->dim[a] = t->shape[a];
  b->shape = s;
  b->n_data = t->count;
  b->data = ct_xcalloc(t->count + 1, sizeof(float));
  ct_tensor_download(t, b->data);
  if (write_diff && t->diff) {
    b->n_diff = t->count;
    b->diff = ct_xcalloc(t->count + 1, sizeof(float));
    ct_tensor_download_diff(t, b->diff);
  }
  return b;
}

/* The returned message borrows every field of the net's layer parameters
 * except `blobs`, which it owns (see ct_net_proto_free).  A released layer
 * (another process's, net.h) has no blobs in it. */
Caffe__NetParameter *ct_net_to_proto(const ct_net *net, bool write_diff) {
  Caffe__NetParameter *p = ct_xcalloc(1, sizeof *p);
  caffe__net_parameter__init(p);
  p->name = net->param->name;
  p->n_layer = (size_t)net->nlayers;
  p->layer = ct_xcalloc((size_t)net->nlayers + 1, sizeof(Caffe__LayerParameter *));
  for (int i = 0; i < net->nlayers; i++) {
    const ct_layer *l = net->layers[i];
    Caffe__LayerParameter *lp = ct_xcalloc(1, sizeof *lp);
    *lp = *l->param; /* shallow */
    lp->n_blobs = l->released ? 0 : (size_t)l->nparams;
    lp->blobs = ct_xcalloc((size_t)l->nparams + 1, sizeof(Caffe__BlobProto *));
    for (size_t j = 0; j < lp->n_blobs; j++) lp->blobs[j] = blob_to_proto(l->params[j], write_diff);
    p->layer[i] = lp;
  }
  return p;
}

void ct_net_proto_free(Caffe__NetParameter *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n_layer; i++) {
    Caffe__LayerParameter *lp = p->layer[i];
    for (size_t j = 0; j < lp->n_blobs; j++) protobuf_c_message_free_unpacked(&lp->blobs[j]->base, NULL);
    free(lp->blobs);
    free(lp);
  }
  free(p->layer);
  free(p);
}

ct_status ct_net_save_caffemodel(const ct_net *net, const char *path, bool write_diff, ct_error *err) {
  Caffe__NetParameter *p = ct_net_to_proto(net, write_diff);
  ct_status s = ct_proto_write_binary(&p->base, path, err);
  ct_net_proto_free(p);
  return s;
}
