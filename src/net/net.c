/* Building and running nets (Caffe's Net::Init, Forward, Backward). */
#include "net/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/settings.h"
#include "gpu/gpu.h"
#include "math/math.h"
#include "net/net_feed.h"
#include "net/net_internal.h"
#include "proto/catalog.h"
#include "proto/srcpos.h"

#define NET_LOG(net, ...) \
  do {                    \
    if (!(net)->quiet) LOG_INFO(__VA_ARGS__); \
  } while (0)

/* Build-time bookkeeping that does not outlive ct_net_init.  Every name
 * lookup goes through a hash map, so that building is linear in the net's
 * size (a 200,000-layer net looks up every bottom and top). */
typedef struct {
  ct_net *net;
  bool quiet;
  bool plan;      /* diffs are planned after the build */
  ct_value_release *release; /* values are too: their storage released as the build goes */
  const char *source;
  ct_strmap avail; /* names of blobs available as bottoms (-> 1) */
  int blob_cap;    /* capacity of net->blobs and net->blob_need_backward */
  ct_dtype layer_type; /* the element type of the layer being connected */
  ct_layout layer_layout; /* and its memory order */
  ct_strmap kept;  /* a part (net.h): names of the blobs its layers read or write (-> 1) */
} builder;

/* Whether blob `name` gets storage (a name of NULL: an automatic top of
 * layer `layer`). */
static bool blob_kept(const builder *b, const char *name, int layer) {
  if (!name) return ct_net_in_part(b->net, layer);
  return ct_strmap_get(&b->kept, name) >= 0;
}

/* Bytes the allocator holds on ctx's device now. */
static size_t held_bytes(const ct_context *ctx) {
  size_t cur = 0;
  if (ctx->device == CT_DEVICE_CPU)
    ct_mem_host_stats(&cur, NULL);
  else
    ct_gpu_memory_stats(ctx->device, &cur, NULL);
  return cur;
}

/* Storage of layer i's tops that are not also its bottoms (new blobs). */
static size_t new_top_bytes(const ct_net *net, int i) {
  size_t n = 0;
  const ct_layer *l = net->layers[i];
  for (int j = 0; j < l->ntop; j++) {
    const ct_tensor *t = net->tops[i][j];
    bool in_place = false;
    for (int k = 0; k < l->nbottom; k++) in_place = in_place || net->bottoms[i][k] == t;
    if (in_place) continue;
    if (t->owns_data) n += ct_tensor_bytes(t, t->capacity);
    if (t->owns_diff) n += ct_tensor_bytes(t, t->diff_capacity);
  }
  return n;
}

static int find_blob(const ct_net *net, const char *name) {
  return ct_strmap_get(&net->blob_index, name);
}

ct_tensor *ct_net_blob(const ct_net *net, const char *name) {
  int i = find_blob(net, name);
  return i < 0 ? NULL : net->blobs[i];
}

int ct_net_layer_index(const ct_net *net, const char *name) {
  return ct_strmap_get(&net->layer_index, name);
}

/* With diff planning, blobs get no diff while the net is built: the plan
 * gives them one afterwards, so the build never holds every diff at once. */
static int add_blob(builder *b, const char *name, bool kept) {
  ct_net *net = b->net;
  if (net->nblobs == b->blob_cap) {
    b->blob_cap = b->blob_cap ? 2 * b->blob_cap : 64;
    net->blobs = ct_xrealloc(net->blobs, (size_t)b->blob_cap * sizeof *net->blobs);
    net->blob_need_backward = ct_xrealloc(net->blob_need_backward, (size_t)b->blob_cap * sizeof(bool));
    net->value_owner = ct_xrealloc(net->value_owner, (size_t)b->blob_cap * sizeof(int));
    net->value_offset = ct_xrealloc(net->value_offset, (size_t)b->blob_cap * sizeof(size_t));
  }
  net->value_owner[net->nblobs] = -1;
  net->value_offset[net->nblobs] = 0;
  ct_tensor *t = ct_tensor_new(net->ctx->device, name);
  t->has_diff = !b->plan;
  t->no_storage = !kept;
  net->blobs[net->nblobs] = t;
  net->blob_need_backward[net->nblobs] = false;
  if (t->name) ct_strmap_put(&net->blob_index, t->name, net->nblobs);
  return net->nblobs++;
}

static void avail_add(builder *b, const char *name) { ct_strmap_put(&b->avail, name, 1); }

static bool avail_take(builder *b, const char *name) { return ct_strmap_remove(&b->avail, name); }

static char *shape_str(const ct_tensor *t, char *buf, size_t n) { return ct_tensor_shape_string(t, buf, n); }

/* Net-level inputs (the legacy `input` fields). */
static ct_status add_inputs_unlocated(builder *b, ct_error *err);

/* Net-level inputs; errors point at the `input` lines. */
static ct_status add_inputs(builder *b, ct_error *err) {
  ct_status st = add_inputs_unlocated(b, err);
  if (st != CT_OK) ct_srcpos_prefix(err, &b->net->param->base, "input", 0);
  return st;
}

static ct_status add_inputs_unlocated(builder *b, ct_error *err) {
  ct_net *net = b->net;
  const Caffe__NetParameter *p = net->param;
  if (p->n_input == 0) return CT_OK;
  if (p->n_input_shape > 0 && p->n_input_dim > 0)
    return ct_error_set(err, CT_ERR_INVALID, "%s: give input_shape or input_dim, not both", b->source);
  if (p->n_input_shape > 0 && p->n_input_shape != p->n_input && p->n_input_shape != 1)
    return ct_error_set(err, CT_ERR_INVALID, "%s: %zu inputs but %zu input_shape entries", b->source,
                        p->n_input, p->n_input_shape);
  if (p->n_input_dim > 0 && p->n_input_dim != 4 * p->n_input)
    return ct_error_set(err, CT_ERR_INVALID, "%s: input_dim needs 4 values per input (%zu inputs, %zu values)",
                        b->source, p->n_input, p->n_input_dim);
  if (p->n_input_shape == 0 && p->n_input_dim == 0)
    return ct_error_set(err, CT_ERR_INVALID, "%s: input '%s' has no input_shape or input_dim", b->source,
                        p->input[0]);
  net->input_ids = ct_xcalloc(p->n_input, sizeof(int));
  for (size_t i = 0; i < p->n_input; i++) {
    if (find_blob(net, p->input[i]) >= 0)
      return ct_error_set(err, CT_ERR_INVALID, "%s: duplicate input blob '%s'", b->source, p->input[i]);
    int id = add_blob(b, p->input[i], blob_kept(b, p->input[i], -1));
    int shape[CT_MAX_AXES], nd = 0;
    if (p->n_input_shape > 0) {
      const Caffe__BlobShape *s = p->input_shape[p->n_input_shape == 1 ? 0 : i];
      if (s->n_dim > CT_MAX_AXES)
        return ct_error_set(err, CT_ERR_INVALID, "%s: input '%s' has too many axes", b->source, p->input[i]);
      for (size_t k = 0; k < s->n_dim; k++) {
        /* as written: 2^32 must not become 0 */
        if (s->dim[k] < 0 || s->dim[k] > INT32_MAX)
          return ct_error_set(err, CT_ERR_INVALID, "%s: input '%s' dim %zu is %lld (must be in [0, %d])",
                              b->source, p->input[i], k, (long long)s->dim[k], INT32_MAX);
        shape[nd++] = (int)s->dim[k];
      }
    } else {
      for (int k = 0; k < 4; k++) shape[nd++] = p->input_dim[4 * i + (size_t)k];
    }
    CT_TRY(ct_tensor_reshape(net->blobs[id], nd, shape, err));
    net->input_ids[net->ninputs++] = id;
    avail_add(b, net->blobs[id]->name);
    char sb[256];
    if (!b->quiet) LOG_INFO("Input %zu -> %s, shape %s", i, p->input[i], shape_str(net->blobs[id], sb, sizeof sb));
  }
  return CT_OK;
}

/* Wires bottoms and tops of layer li (Caffe's AppendBottom / AppendTop). */
static ct_status connect_layer(builder *b, int li, const Caffe__LayerParameter *lp, ct_error *err) {
  ct_net *net = b->net;
  int nb = (int)lp->n_bottom, nt = (int)lp->n_top;
  if (lp->n_propagate_down > 0 && (int)lp->n_propagate_down != nb) {
    ct_error_set(err, CT_ERR_INVALID, "layer '%s': propagate_down has %zu values but the layer has %d bottoms",
                 lp->name ? lp->name : "", lp->n_propagate_down, nb);
    return ct_srcpos_prefix(err, &lp->base, "propagate_down", 0);
  }
  net->bottom_ids[li] = ct_xcalloc((size_t)nb + 1, sizeof(int));
  net->bottom_need_backward[li] = ct_xcalloc((size_t)nb + 1, sizeof(bool));
  for (int j = 0; j < nb; j++) {
    const char *name = lp->bottom[j];
    int id = find_blob(net, name);
    if (id < 0 || !avail_take(b, name)) {
      ct_error_set(err, CT_ERR_NOTFOUND, "layer '%s': unknown bottom blob '%s' (bottom index %d)",
                   lp->name ? lp->name : "", name, j);
      return ct_srcpos_prefix(err, &lp->base, "bottom", (size_t)j);
    }
    net->bottom_ids[li][j] = id;
    bool need = net->blob_need_backward[id];
    if (lp->n_propagate_down > 0) need = lp->propagate_down[j];
    net->bottom_need_backward[li][j] = need;
    NET_LOG(b, "%s <- %s", lp->name ? lp->name : "", name);
  }
  const ct_layer_ops *ops = ct_layer_find(lp->type ? lp->type : "");
  /* the layer's element type: as the dtype pass set it; a layer of any
   * type (Split) takes its bottom's */
  ct_dtype type = CT_F32;
  if (lp->has_forward_type) CT_ASSERT(ct_dtype_from_proto(lp->forward_type, "forward_type", &type, err) == CT_OK);
  else if (ops && ((ops->dtypes_cpu | ops->dtypes_gpu) & CT_DTYPES_ANY) && nb > 0)
    type = net->blobs[net->bottom_ids[li][0]]->dtype;
  b->layer_type = type;
  /* its memory order likewise (NCHW unless the pass set another) */
  ct_layout layout = CT_NCHW;
  if (lp->has_cortado_layout) layout = lp->cortado_layout == CAFFE__LAYOUT__NHWC ? CT_NHWC : CT_NCHW;
  else if (ops && (ops->layouts_gpu & CT_LAYOUTS_ANY) && nb > 0)
    layout = net->blobs[net->bottom_ids[li][0]]->layout;
  b->layer_layout = layout;
  const bool cast = ops && ops == ct_layer_find("Cast");
  for (int j = 0; j < nb; j++) {
    const ct_tensor *bt = net->blobs[net->bottom_ids[li][j]];
    CT_ASSERTF(bt->dtype == type || cast, "layer '%s' (%s) runs in %s but its bottom '%s' holds %s",
               lp->name ? lp->name : "", lp->type, ct_dtype_name(type), lp->bottom[j],
               ct_dtype_name(bt->dtype));
    CT_ASSERTF(bt->layout == layout || cast, "layer '%s' (%s) runs %s but its bottom '%s' is %s",
               lp->name ? lp->name : "", lp->type, ct_layout_name(layout), lp->bottom[j],
               ct_layout_name(bt->layout));
  }
  int want = nt;
  if (ops && (ops->flags & CT_LAYER_AUTO_TOPS) && nt < ops->min_tops) want = ops->min_tops;
  net->top_ids[li] = ct_xcalloc((size_t)want + 1, sizeof(int));
  for (int j = 0; j < want; j++) {
    int id;
    if (j < nt) {
      const char *name = lp->top[j];
      if (j < nb && strcmp(lp->bottom[j], name) == 0) {
        id = net->bottom_ids[li][j]; /* in place */
      } else {
        if (find_blob(net, name) >= 0) {
          ct_error_set(err, CT_ERR_INVALID, "layer '%s': top blob '%s' produced by multiple sources",
                       lp->name ? lp->name : "", name);
          return ct_srcpos_prefix(err, &lp->base, "top", (size_t)j);
        }
        id = add_blob(b, name, blob_kept(b, name, li));
        ct_tensor_set_dtype(net->blobs[id], type);
        ct_tensor_set_layout(net->blobs[id], layout);
      }
      avail_add(b, net->blobs[id]->name);
    } else {
      id = add_blob(b, NULL, blob_kept(b, NULL, li)); /* automatic top, not available as a bottom */
      ct_tensor_set_dtype(net->blobs[id], type);
      ct_tensor_set_layout(net->blobs[id], layout);
    }
    net->top_ids[li][j] = id;
    NET_LOG(b, "%s -> %s", lp->name ? lp->name : "", j < nt ? lp->top[j] : "(automatic)");
  }
  return CT_OK;
}

static void make_vecs(ct_net *net, int li) {
  ct_layer *l = net->layers[li];
  net->bottoms[li] = ct_xcalloc((size_t)l->nbottom + 1, sizeof(ct_tensor *));
  net->tops[li] = ct_xcalloc((size_t)l->ntop + 1, sizeof(ct_tensor *));
  for (int j = 0; j < l->nbottom; j++) net->bottoms[li][j] = net->blobs[net->bottom_ids[li][j]];
  for (int j = 0; j < l->ntop; j++) net->tops[li][j] = net->blobs[net->top_ids[li][j]];
}

/* A top of a layer outside the net's part that has storage (a layer of
 * the part reads it) but no data yet: a view of a blob without storage
 * (a Split's or Flatten's top) gets storage of its own. */
static ct_status keep_top(ct_tensor *t, ct_error *err) {
  if (t->no_storage || t->data) return CT_OK;
  t->capacity = 0;
  return ct_tensor_reshape(t, t->ndim, t->shape, err);
}

/* Loss tops carry their loss weight in diff (Caffe's SetLossWeights). */
static void set_loss_diffs(ct_net *net, int li) {
  ct_layer *l = net->layers[li];
  for (int j = 0; j < l->ntop; j++)
    if (l->loss_weight[j] != 0.0f && net->tops[li][j]->data) {
      ct_tensor *t = net->tops[li][j];
      ct_tensor_need_diff(t);
      ct_dev_set(net->ctx, t->count, l->loss_weight[j], t->diff);
    }
}

void ct_net_state_make(const Caffe__NetParameter *p, const ct_net_opts *o, Caffe__NetState *state) {
  caffe__net_state__init(state);
  state->has_phase = 1;
  state->phase = (Caffe__Phase)o->phase;
  state->has_level = 1;
  state->level = (p->state && p->state->has_level ? p->state->level : 0) + o->level;
  size_t n = (p->state ? p->state->n_stage : 0) + (size_t)o->nstages;
  state->stage = ct_xcalloc(n + 1, sizeof(char *));
  if (p->state)
    for (size_t i = 0; i < p->state->n_stage; i++) state->stage[state->n_stage++] = p->state->stage[i];
  for (int i = 0; i < o->nstages; i++) state->stage[state->n_stage++] = (char *)o->stages[i];
}

void ct_net_state_clear(Caffe__NetState *state) {
  free(state->stage);
  state->stage = NULL;
  state->n_stage = 0;
}

ct_status ct_net_params_build(ct_net *net, bool quiet, ct_error *err); /* net_params.c */
void ct_net_analyze_backward(ct_net *net, bool quiet);                  /* net_params.c */

/* net_fuse.c: after layer si is set up, lets the layer before it absorb
 * it; after the backward analysis, moves the absorbed layers' backward to
 * their absorbers. */
ct_status ct_net_fuse_layer(ct_net *net, int si, bool quiet, ct_error *err);
ct_status ct_net_fuse_finish(ct_net *net, ct_error *err);
/* net_fuse.c: after Eltwise ei is set up (and the layers before it are
 * fused), lets a SUM write over a bottom that nothing reads afterwards. */
ct_status ct_net_fuse_sum(ct_net *net, int ei, bool quiet, ct_error *err);
void ct_net_mark_grad_side(ct_net *net);                                   /* net_params.c */

static bool fusion_wanted(const ct_net_opts *o) {
  if (o->no_fusion) return false;
  return ct_setting_bool("CORTADO_FUSE");
}

static bool planning_wanted(const ct_net_opts *o) {
  if (o->keep_blob_diffs) return false;
  return ct_setting_bool("CORTADO_DIFF_PLANNING");
}

/* Values too (not in a pipeline stage's part, whose edges the runtime
 * moves between processes outside the layers' steps). */
static bool value_planning_wanted(const ct_net_opts *o) {
  return planning_wanted(o) && ct_setting_bool("CORTADO_VALUE_PLANNING");
}

/* GPU: the device loss sum and its pinned copy. */
static void alloc_loss(ct_net *net) {
  if (net->ctx->device == CT_DEVICE_CPU) return;
  net->loss_dev = ct_mem_alloc(net->ctx->device, sizeof(double));
}

/* An error about "layer 'NAME'" that has no position yet gets that layer's
 * (a layer's setup, fusion or parameter sharing). */
static void locate_layer_error(const Caffe__NetParameter *p, ct_error *err) {
  if (ct_srcpos_starts_with(err->msg)) return;
  const char *q = strstr(err->msg, "layer '");
  if (!q) return;
  q += strlen("layer '");
  size_t n = strcspn(q, "'");
  for (size_t i = 0; i < p->n_layer; i++) {
    const char *name = p->layer[i]->name ? p->layer[i]->name : "";
    if (strlen(name) == n && strncmp(name, q, n) == 0) {
      ct_srcpos_prefix(err, &p->layer[i]->base, NULL, 0);
      return;
    }
  }
}

ct_status ct_net_init(ct_net **out, const Caffe__NetParameter *param, const ct_net_opts *opts,
                      ct_context *ctx, ct_error *err) {
  *out = NULL;
  ct_net_opts defaults = {0};
  if (!opts) opts = &defaults;
  const char *source = opts->source_name ? opts->source_name : (param->name ? param->name : "net");
  if (param->n_layers > 0 && param->n_layer == 0)
    return ct_error_set(err, CT_ERR_INVALID, "%s: V1 'layers' must be upgraded before building the net",
                        source);
  Caffe__NetState state;
  ct_net_state_make(param, opts, &state);
  Caffe__NetParameter *filtered;
  ct_status st = ct_net_filter(param, &state, &filtered, err);
  ct_net_state_clear(&state);
  if (st != CT_OK) return ct_srcpos_starts_with(err->msg) ? st : ct_error_prefix(err, "%s", source);
  if (!opts->quiet) ct_caffe_log_ignored_fields(&filtered->base);
  st = ct_net_plan_dtypes(filtered, ctx->device, ctx->precision, ctx->precision_given, opts->quiet,
                          err);
  if (st == CT_OK) st = ct_net_insert_splits(filtered, err);
  if (st != CT_OK) {
    protobuf_c_message_free_unpacked(&filtered->base, NULL);
    return ct_srcpos_starts_with(err->msg) ? st : ct_error_prefix(err, "%s", source);
  }
  int part_first = 0, part_end = (int)filtered->n_layer;
  if (opts->part.fn) {
    st = opts->part.fn(opts->part.user, filtered, &part_first, &part_end, err);
    if (st != CT_OK) {
      protobuf_c_message_free_unpacked(&filtered->base, NULL);
      return st;
    }
    CT_ASSERT(part_first >= 0 && part_first <= part_end && part_end <= (int)filtered->n_layer);
  }
  ct_net *net = ct_xcalloc(1, sizeof *net);
  net->param = filtered;
  net->name = filtered->name ? filtered->name : "";
  net->phase = opts->phase;
  net->exact_blobs = opts->keep_blob_diffs;
  net->ctx = ctx;
  net->prep_first = net->prep_launch = net->prep_at = -1;
  net->part_first = part_first;
  net->part_end = part_end;
  int nl = (int)filtered->n_layer;
  net->layers = ct_xcalloc((size_t)nl + 1, sizeof(ct_layer *));
  net->bottom_ids = ct_xcalloc((size_t)nl + 1, sizeof(int *));
  net->top_ids = ct_xcalloc((size_t)nl + 1, sizeof(int *));
  net->bottoms = ct_xcalloc((size_t)nl + 1, sizeof(ct_tensor **));
  net->tops = ct_xcalloc((size_t)nl + 1, sizeof(ct_tensor **));
  net->bottom_need_backward = ct_xcalloc((size_t)nl + 1, sizeof(bool *));
  net->layer_need_backward = ct_xcalloc((size_t)nl + 1, sizeof(bool));
  net->layer_contributes_loss = ct_xcalloc((size_t)nl + 1, sizeof(bool));
  builder b = {net, opts->quiet, planning_wanted(opts), NULL, source, CT_STRMAP_INIT, 0};
  b.kept = (ct_strmap)CT_STRMAP_INIT;
  net->plan_values = value_planning_wanted(opts);
  if (net->plan_values) b.release = ct_net_release_begin(net);
  for (int i = part_first; i < part_end; i++) {
    const Caffe__LayerParameter *lp = filtered->layer[i];
    for (size_t j = 0; j < lp->n_bottom; j++) ct_strmap_put(&b.kept, lp->bottom[j], 1);
    for (size_t j = 0; j < lp->n_top; j++) ct_strmap_put(&b.kept, lp->top[j], 1);
  }
  alloc_loss(net);
  NET_LOG(&b, "Initializing net '%s' (phase %s, %d layers)", net->name,
          opts->phase == CT_PHASE_TRAIN ? "TRAIN" : "TEST", nl);
  st = add_inputs(&b, err);
  size_t memory = 0;
  const bool fuse = fusion_wanted(opts);
  for (int i = 0; i < nl && st == CT_OK; i++) {
    Caffe__LayerParameter *lp = filtered->layer[i];
    if (!lp->has_phase) {
      lp->has_phase = 1;
      lp->phase = (Caffe__Phase)opts->phase;
    }
    NET_LOG(&b, "Creating Layer %s", lp->name ? lp->name : "");
    st = connect_layer(&b, i, lp, err);
    if (st != CT_OK) break;
    int ntop = (int)lp->n_top;
    const ct_layer_ops *ops = ct_layer_find(lp->type ? lp->type : "");
    if (ops && (ops->flags & CT_LAYER_AUTO_TOPS) && ntop < ops->min_tops) ntop = ops->min_tops;
    st = ct_layer_create(lp, opts->phase, ctx, (int)lp->n_bottom, ntop, &net->layers[i], err);
    if (st != CT_OK) {
      ct_srcpos_prefix(err, &lp->base, "type", 0);
      break;
    }
    net->nlayers = i + 1;
    net->layers[i]->dtype = b.layer_type;
    net->layers[i]->layout = b.layer_layout;
    if (ct_strmap_get(&net->layer_index, net->layers[i]->name) < 0)
      ct_strmap_put(&net->layer_index, net->layers[i]->name, i);
    make_vecs(net, i);
    const size_t held_before = held_bytes(ctx);
    NET_LOG(&b, "Setting up %s", net->layers[i]->name);
    st = ct_layer_setup(net->layers[i], net->bottoms[i], net->tops[i], err);
    if (st != CT_OK) break;
    for (int j = 0; j < net->layers[i]->ntop; j++) {
      char sb[256];
      ct_tensor *t = net->tops[i][j];
      NET_LOG(&b, "Top shape: %s", shape_str(t, sb, sizeof sb));
      if (net->layers[i]->loss_weight[j] != 0.0f)
        NET_LOG(&b, "    with loss weight %g", (double)net->layers[i]->loss_weight[j]);
      if (!ct_net_in_part(net, i)) st = keep_top(t, err);
      if (!t->no_storage) memory += t->count;
    }
    if (st != CT_OK) break;
    set_loss_diffs(net, i);
    if (!ct_net_in_part(net, i)) ct_layer_release(net->layers[i]);
    /* at once, so that the absorbed layer's scratch is never all held;
     * never across the part's edges */
    if (fuse && ct_net_in_part(net, i) && ct_net_in_part(net, i - 1))
      st = ct_net_fuse_layer(net, i, opts->quiet, err);
    /* only with planned diffs: callers that read blobs keep every blob's values */
    if (st == CT_OK && fuse && b.plan && ct_net_in_part(net, i)) st = ct_net_fuse_sum(net, i, opts->quiet, err);
    if (st != CT_OK) break;
    const size_t held_after = held_bytes(ctx), tops = new_top_bytes(net, i);
    net->layers[i]->state_bytes = held_after > held_before + tops ? held_after - held_before - tops : 0;
    ct_net_note_values(net, b.release, i);
    if (b.release) ct_net_release_values(net, b.release, i);
    NET_LOG(&b, "Memory required for data: %zu", memory * sizeof(float));
  }
  if (st == CT_OK) {
    net->quiet_build = opts->quiet;
    st = ct_net_params_build(net, opts->quiet, err);
  }
  for (int i = 0; i < net->nblobs && st == CT_OK; i++)
    net->typed = net->typed || net->blobs[i]->dtype != CT_F32 || net->blobs[i]->layout != CT_NCHW;
  if (st == CT_OK) ct_net_analyze_backward(net, opts->quiet);
  if (st == CT_OK) st = ct_net_fuse_finish(net, err);
  if (st == CT_OK) ct_net_mark_grad_side(net);
  if (st == CT_OK) {
    /* outputs: blobs left available */
    net->output_ids = ct_xcalloc(b.avail.count + 1, sizeof(int));
    for (int i = 0; i < net->nblobs && st == CT_OK; i++)
      if (net->blobs[i]->name && ct_strmap_get(&b.avail, net->blobs[i]->name) >= 0) {
        /* every part shows the outputs (a pipeline's are agreed on) */
        net->blobs[i]->no_storage = false;
        st = keep_top(net->blobs[i], err);
        net->output_ids[net->noutputs++] = i;
        NET_LOG(&b, "This network produces output %s", net->blobs[i]->name);
      }
  }
  /* after the outputs: they keep their values */
  if (st == CT_OK && b.plan) st = ct_net_plan_blobs(net, err);
  if (st == CT_OK) NET_LOG(&b, "Network initialization done.");
  ct_net_release_end(b.release);
  ct_strmap_free(&b.avail);
  ct_strmap_free(&b.kept);
  if (st != CT_OK) {
    locate_layer_error(filtered, err);
    if (source && strncmp(err->msg, source, strlen(source)) != 0 && !ct_srcpos_starts_with(err->msg))
      ct_error_prefix(err, "%s", source);
    ct_net_free(net);
    return st;
  }
  *out = net;
  return CT_OK;
}

void ct_net_free(ct_net *net) {
  if (!net) return;
  for (int i = 0; net->feeds && i < net->nlayers; i++) ct_net_feed_free(net->feeds[i]);
  free(net->feeds);
  free(net->weights_copied);
  for (int i = 0; i < net->nlayers; i++) ct_layer_free(net->layers[i]);
  for (int i = 0; i < (int)(net->param ? net->param->n_layer : 0); i++) {
    free(net->bottom_ids[i]);
    free(net->top_ids[i]);
    free(net->bottoms[i]);
    free(net->tops[i]);
    free(net->bottom_need_backward[i]);
  }
  for (int i = 0; i < net->nblobs; i++) ct_tensor_free(net->blobs[i]);
  for (int i = 0; i < net->nparams; i++) free(net->params[i].name);
  free(net->params);
  if (net->flat_data) ct_mem_free(net->ctx->device, net->flat_data);
  if (net->flat_diff) ct_mem_free(net->ctx->device, net->flat_diff);
  if (net->blob_pool) ct_mem_free(net->ctx->device, net->blob_pool);
  free(net->value_owner);
  free(net->value_offset);
  if (net->diff_zero) ct_mem_free(net->ctx->device, net->diff_zero);
  ct_net_blob_plan_free(net->blob_plan);
  if (net->loss_dev) ct_mem_free(net->ctx->device, net->loss_dev);
  free(net->layer_ready_count);
  free(net->layers);
  free(net->bottom_ids);
  free(net->top_ids);
  free(net->bottoms);
  free(net->tops);
  free(net->bottom_need_backward);
  free(net->layer_need_backward);
  free(net->layer_contributes_loss);
  free(net->blob_need_backward);
  free(net->blobs);
  free(net->input_ids);
  free(net->output_ids);
  ct_strmap_free(&net->blob_index);
  ct_strmap_free(&net->layer_index);
  if (net->param) protobuf_c_message_free_unpacked(&net->param->base, NULL);
  free(net);
}

void ct_net_zero_loss(ct_net *net) {
  net->loss_host = 0;
  if (net->loss_dev) ct_net_loss_zero_gpu(net->ctx, net->loss_dev);
}

/* Whether a backward pass computes a bottom gradient of layer i. */
static bool bottom_grad(const ct_net *net, int i) {
  if (!net->layer_need_backward[i]) return false;
  for (int b = 0; b < net->layers[i]->nbottom; b++)
    if (net->bottom_need_backward[i][b]) return true;
  return false;
}

/* The compute stream waits for the prepared work when it is enqueued and
 * not yet joined. */
static void prepare_join(ct_net *net) {
  if (net->prep_first < 0) return;
  ct_context_grad_join(net->ctx);
  net->prep_first = -1;
}

void ct_net_prepare_async(ct_net *net) {
  if (net->ctx->device == CT_DEVICE_CPU) return;
  /* the work of a pass before that was never joined (a forward that
   * stopped below its layers) is joined first */
  prepare_join(net);
  net->prep_launch = -1;
  int first = -1;
  for (int i = 0; i < net->nlayers && first < 0; i++)
    if (ct_layer_prepare_async(net->layers[i], NULL, bottom_grad(net, i))) first = i;
  if (first < 0) return;
  /* Enqueued at the forward of the lowest layer of the capturable run that
   * ends below the first such layer: a CUDA graph segment ends at a layer
   * that cannot be captured (a data layer), joining every stream, which
   * would put the work back on the critical path.  Above the data layers
   * even when they are captured (DummyData): a graph's GPU ran the branch's
   * kernels ahead of them, and they hold up the first layer (8 us on an
   * H100). */
  int launch = first;
  while (launch > 0 && ct_layer_replayable(net->layers[launch - 1]) &&
         !(net->layers[launch - 1]->ops->flags & CT_LAYER_DATA) &&
         !(net->feeds && net->feeds[launch - 1]))
    launch--;
  net->prep_launch = launch;
  net->prep_at = first;
}

/* The work armed by ct_net_prepare_async, enqueued at layer i's forward
 * when it is due, and joined before the first layer it serves. */
static void prepare_step(ct_net *net, int i) {
  if (net->prep_launch >= 0 && i >= net->prep_launch) {
    /* the gradient stream waits for what came before (the last update) */
    ct_context *side = ct_context_grad_begin(net->ctx);
    for (int j = net->prep_at; j < net->nlayers; j++)
      ct_layer_prepare_async(net->layers[j], side, bottom_grad(net, j));
    net->prep_launch = -1;
    net->prep_first = net->prep_at;
  }
  if (i >= net->prep_first) prepare_join(net);
}

ct_status ct_net_forward_layer_async(ct_net *net, int i, ct_error *err) {
  ct_layer *l = net->layers[i];
  CT_ASSERTF(!l->released, "layer '%s' is held by another process", l->name);
  prepare_step(net, i);
  if (net->feeds && net->feeds[i]) {
    /* a fed data layer: the staged batch, and the next one staged at once */
    CT_TRY(ct_net_feed_copy(net->feeds[i], err));
    return ct_net_feed_prefetch(net->feeds[i], err);
  }
  CT_TRY(ct_layer_forward_async(l, net->bottoms[i], net->tops[i], err));
  for (int j = 0; j < l->ntop; j++) {
    if (l->loss_weight[j] == 0.0f) continue;
    const ct_tensor *t = net->tops[i][j];
    if (net->loss_dev) ct_net_loss_add_gpu(net->ctx, t->count, t->data, t->diff, net->loss_dev);
    else net->loss_host += ct_cpu_dot(t->count, t->data, t->diff);
  }
  ct_net_poison_step(net, i);
  return CT_OK;
}

ct_status ct_net_loss_finish(ct_net *net, double *loss, ct_error *err) {
  if (!net->loss_dev) {
    if (loss) *loss = net->loss_host;
    return CT_OK;
  }
  double sum = 0;
  ct_mem_copy(CT_DEVICE_CPU, &sum, net->ctx->device, net->loss_dev, sizeof sum); /* waits */
  if (loss) *loss = sum;
  return ct_context_take_checks(net->ctx, err);
}

ct_status ct_net_forward_range(ct_net *net, int start, int end, double *loss, ct_error *err) {
  CT_ASSERT(start >= 0 && end <= net->nlayers);
  ct_net_zero_loss(net);
  if (start == 0) ct_net_prepare_async(net);
  for (int i = start; i < end; i++) CT_TRY(ct_net_forward_layer_async(net, i, err));
  net->prep_launch = -1; /* stopped below the prepared layers */
  prepare_join(net);
  return ct_net_loss_finish(net, loss, err);
}

ct_status ct_net_forward(ct_net *net, double *loss, ct_error *err) {
  return ct_net_forward_range(net, 0, net->nlayers, loss, err);
}

void ct_net_backward_layer(ct_net *net, int i) {
  ct_layer *l = net->layers[i];
  if (net->layer_need_backward[i]) {
    CT_ASSERTF(!l->released, "layer '%s' is held by another process", l->name);
    ct_layer_backward(l, net->tops[i], net->bottom_need_backward[i], net->bottoms[i]);
    /* The gradient stream: the compute stream waits for the layer before
     * this one (whose top diffs net_memory.c kept alive until here), or for
     * all of it after the last such layer. */
    if (l->grad_side && i == net->grad_side_last) ct_context_grad_join(net->ctx);
    else if (l->grad_side) ct_context_grad_step(net->ctx);
  }
  ct_net_poison_step(net, 2 * net->nlayers - 1 - i);
}

void ct_net_backward(ct_net *net) {
  for (int i = net->nlayers - 1; i >= 0; i--) ct_net_backward_layer(net, i);
  ct_context_grad_join(net->ctx);
}

void ct_net_clear_param_diffs(ct_net *net) {
  if (!net->flat_count) return;
  ct_dev_set(net->ctx, net->flat_count, 0.0f, net->flat_diff);
}

ct_status ct_net_reshape(ct_net *net, ct_error *err) {
  net->layout_version++;
  /* feeds are sized for the old tops: made again on their next use */
  for (int i = 0; net->feeds && i < net->nlayers; i++) {
    ct_net_feed_free(net->feeds[i]);
    net->feeds[i] = NULL;
  }
  if (net->plan_values) ct_net_detach_values(net);
  for (int i = net->part_first; i < net->part_end; i++) {
    CT_TRY(ct_layer_reshape(net->layers[i], net->bottoms[i], net->tops[i], err));
    set_loss_diffs(net, i);
    ct_net_note_values(net, NULL, i);
  }
  if (net->blob_plan) CT_TRY(ct_net_plan_blobs(net, err));
  return CT_OK;
}

/* A multiply-xorshift step over the words that locate the net's storage
 * (a few operations per word: this runs every iteration). */
static uint64_t mix(uint64_t h, uint64_t v) {
  h = (h ^ v) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

uint64_t ct_net_signature(const ct_net *net) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = mix(h, net->layout_version);
  h = mix(h, (uintptr_t)net->flat_data);
  h = mix(h, (uintptr_t)net->flat_diff);
  h = mix(h, (uintptr_t)net->blob_pool);
  for (int b = 0; b < net->nblobs; b++) {
    const ct_tensor *t = net->blobs[b];
    h = mix(h, (uintptr_t)t->data);
    h = mix(h, (uintptr_t)t->diff);
    h = mix(h, t->count);
  }
  return h;
}

int ct_net_draws_per_pass(const ct_net *net) {
  int n = 0;
  for (int i = 0; i < net->nlayers; i++) {
    const ct_layer *l = net->layers[i];
    if ((l->ops->flags & CT_LAYER_DRAWS) && l->phase == CT_PHASE_TRAIN) n++;
  }
  return n;
}

int ct_net_first_nonfinite_layer(ct_net *net) {
  ct_error err;
  for (int i = net->part_first; i < net->part_end; i++) {
    if (ct_layer_forward(net->layers[i], net->bottoms[i], net->tops[i], NULL, &err) != CT_OK) return i;
    for (int j = 0; j < net->layers[i]->ntop; j++) {
      ct_tensor *t = net->tops[i][j];
      if (!ct_dev_all_finite(net->ctx, t->count, t->data)) return i;
    }
  }
  return -1;
}
