/* Learnable parameters of a net: sharing by ParamSpec name, the flat data and
 * gradient buffers, and which layers need backward (Caffe's AppendParam and
 * the backward analysis of Net::Init). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strmap.h"
#include "net/net.h"

/* Values between parameters in the flat buffers are padded to this many
 * floats, so each parameter starts on a 128-byte boundary. */
#define CT_FLAT_ALIGN 32

typedef struct {
  int owner;    /* index into the owners table */
} param_ref;

static bool shapes_equal(const ct_tensor *a, const ct_tensor *b) { return ct_tensor_same_shape(a, b); }

static int cmp_params(const void *pa, const void *pb) {
  const ct_net_param *a = pa, *b = pb;
  if (a->final_layer != b->final_layer) return a->final_layer > b->final_layer ? -1 : 1;
  if (a->layer != b->layer) return a->layer > b->layer ? -1 : 1;
  return a->index - b->index;
}

/* Moves a host-filled parameter tensor into the flat buffers on the device. */
static void bind_view(ct_tensor *t, int device, float *data, float *diff, bool copy_in) {
  if (copy_in) ct_mem_copy(device, data, CT_DEVICE_CPU, t->data, t->count * sizeof(float));
  size_t count = t->count;
  int nd = t->ndim, shape[CT_MAX_AXES];
  memcpy(shape, t->shape, sizeof shape);
  ct_tensor_set_view(t, NULL, NULL); /* frees the host storage */
  t->device = device;
  t->ndim = nd;
  memcpy(t->shape, shape, sizeof shape);
  t->count = count;
  ct_tensor_set_view(t, data, diff);
}

/* After layer i's backward, every parameter with final_layer >= i is final
 * (the flat layout is in decreasing final_layer, so they form a prefix). */
void ct_net_params_ready_counts(ct_net *net) {
  if (!net->layer_ready_count)
    net->layer_ready_count = ct_xcalloc((size_t)net->nlayers + 1, sizeof(size_t));
  /* the largest end of the parameters final at each layer, then the
   * maximum over the layers above: linear in the layers and parameters */
  size_t *at = ct_xcalloc((size_t)net->nlayers + 1, sizeof *at);
  for (int q = 0; q < net->nparams; q++) {
    const int f = net->params[q].final_layer;
    CT_ASSERT(f >= 0 && f < net->nlayers);
    size_t end = q + 1 < net->nparams ? net->params[q + 1].offset : net->flat_count;
    if (end > at[f]) at[f] = end;
  }
  size_t ready = 0;
  for (int li = net->nlayers - 1; li >= 0; li--) {
    if (at[li] > ready) ready = at[li];
    net->layer_ready_count[li] = ready;
  }
  free(at);
}

ct_status ct_net_params_build(ct_net *net, bool quiet, ct_error *err) {
  static const Caffe__ParamSpec k_default_spec = CAFFE__PARAM_SPEC__INIT;
  int total = 0;
  for (int i = 0; i < net->nlayers; i++) total += net->layers[i]->nparams;
  net->params = ct_xcalloc((size_t)total + 1, sizeof *net->params);
  bool *has_lr = ct_xcalloc((size_t)total + 1, sizeof(bool));
  bool *has_decay = ct_xcalloc((size_t)total + 1, sizeof(bool));
  int *owner_of = ct_xcalloc((size_t)total + 1, sizeof(int)); /* per (layer, j) flattened */
  ct_strmap by_name = CT_STRMAP_INIT;                            /* shared param name -> owner */
  int k = 0;
  ct_status st = CT_OK;
  for (int li = 0; li < net->nlayers && st == CT_OK; li++) {
    ct_layer *l = net->layers[li];
    const Caffe__LayerParameter *lp = l->param;
    if ((int)lp->n_param > l->nparams) {
      st = ct_error_set(err, CT_ERR_INVALID, "layer '%s' (%s): %zu param specs for %d learnable blobs",
                        l->name, l->ops->type, lp->n_param, l->nparams);
      break;
    }
    for (int j = 0; j < l->nparams; j++, k++) {
      const Caffe__ParamSpec *spec = j < (int)lp->n_param ? lp->param[j] : &k_default_spec;
      const char *pname = spec->name && *spec->name ? spec->name : NULL;
      int owner = pname ? ct_strmap_get(&by_name, pname) : -1;
      bool learn = l->param_propagate_down[j];
      float lr = learn ? (spec->has_lr_mult ? spec->lr_mult : 1.0f) : 0.0f;
      float decay = spec->has_decay_mult ? spec->decay_mult : 1.0f;
      if (owner < 0) {
        ct_net_param *p = &net->params[net->nparams];
        p->tensor = l->params[j];
        if (pname) p->name = ct_xstrdup(pname);
        else if (asprintf(&p->name, "%s_%d", l->name, j) < 0) ct_abort(__FILE__, __LINE__, "oom");
        p->layer = li;
        p->index = j;
        p->count = l->params[j]->count;
        p->lr_mult = lr;
        p->decay_mult = decay;
        p->final_layer = li;
        has_lr[net->nparams] = spec->has_lr_mult || !learn;
        has_decay[net->nparams] = spec->has_decay_mult;
        if (pname) ct_strmap_put(&by_name, p->name, net->nparams);
        owner = net->nparams++;
      } else {
        ct_net_param *p = &net->params[owner];
        const ct_tensor *a = p->tensor, *b = l->params[j];
        bool permissive = spec->has_share_mode &&
                          spec->share_mode == CAFFE__PARAM_SPEC__DIM_CHECK_MODE__PERMISSIVE;
        if (permissive ? a->count != b->count : !shapes_equal(a, b)) {
          char sa[128], sb[128];
          st = ct_error_set(err, CT_ERR_INVALID,
                            "layer '%s': cannot share param '%s' owned by layer '%s': shape %s vs %s%s",
                            l->name, pname, net->layers[p->layer]->name,
                            ct_tensor_shape_string(b, sb, sizeof sb), ct_tensor_shape_string(a, sa, sizeof sa),
                            permissive ? " (counts differ)" : "");
          break;
        }
        if (spec->has_lr_mult) {
          if (has_lr[owner] && p->lr_mult != lr) {
            st = ct_error_set(err, CT_ERR_INVALID, "layer '%s': shared param '%s' has mismatched lr_mult",
                              l->name, pname);
            break;
          }
          p->lr_mult = lr;
          has_lr[owner] = true;
        }
        if (spec->has_decay_mult) {
          if (has_decay[owner] && p->decay_mult != decay) {
            st = ct_error_set(err, CT_ERR_INVALID,
                              "layer '%s': shared param '%s' has mismatched decay_mult", l->name, pname);
            break;
          }
          p->decay_mult = decay;
          has_decay[owner] = true;
        }
        if (li < p->final_layer) p->final_layer = li;
      }
      owner_of[k] = owner;
    }
  }
  if (st != CT_OK) goto done;

  /* A layer computes a parameter's gradient when its owner's lr_mult is
   * not 0 (Caffe: param_need_backward). */
  k = 0;
  for (int li = 0; li < net->nlayers; li++)
    for (int j = 0; j < net->layers[li]->nparams; j++, k++)
      net->layers[li]->param_propagate_down[j] = net->params[owner_of[k]].lr_mult != 0.0f;

  /* A part (net.h): the owners of the layers outside it leave the table
   * (sharing never crosses the part's edges: their layers are released);
   * owner_of then points at the new indices, -1 for those. */
  int *kept_as = ct_xcalloc((size_t)net->nparams + 1, sizeof(int));
  int nkept = 0;
  for (int q = 0; q < net->nparams; q++) {
    const int li = net->params[q].layer;
    if (ct_net_in_part(net, li)) {
      kept_as[q] = nkept;
      net->params[nkept++] = net->params[q];
    } else {
      kept_as[q] = -1;
      free(net->params[q].name);
    }
  }
  net->nparams = nkept;
  for (int q = 0; q < k; q++) owner_of[q] = kept_as[owner_of[q]];
  free(kept_as);

  /* Flat layout: parameters whose gradient is final first. */
  int *order = ct_xcalloc((size_t)net->nparams + 1, sizeof(int));
  {
    /* sort a copy, then remap owner indices */
    ct_net_param *sorted = ct_xcalloc((size_t)net->nparams + 1, sizeof *sorted);
    memcpy(sorted, net->params, (size_t)net->nparams * sizeof *sorted);
    for (int q = 0; q < net->nparams; q++) sorted[q].offset = (size_t)q; /* old index */
    qsort(sorted, (size_t)net->nparams, sizeof *sorted, cmp_params);
    for (int q = 0; q < net->nparams; q++) order[sorted[q].offset] = q;
    size_t off = 0;
    for (int q = 0; q < net->nparams; q++) {
      sorted[q].offset = off;
      off += (sorted[q].count + CT_FLAT_ALIGN - 1) / CT_FLAT_ALIGN * CT_FLAT_ALIGN;
    }
    net->flat_count = off;
    memcpy(net->params, sorted, (size_t)net->nparams * sizeof *sorted);
    free(sorted);
  }
  int dev = net->ctx->device;
  net->flat_data = ct_mem_alloc(dev, (net->flat_count ? net->flat_count : 1) * sizeof(float));
  net->flat_diff = ct_mem_alloc(dev, (net->flat_count ? net->flat_count : 1) * sizeof(float));
  for (int q = 0; q < net->nparams; q++) {
    ct_net_param *p = &net->params[q];
    bind_view(p->tensor, dev, net->flat_data + p->offset, net->flat_diff + p->offset, true);
  }
  k = 0;
  for (int li = 0; li < net->nlayers; li++) {
    ct_layer *l = net->layers[li];
    for (int j = 0; j < l->nparams; j++, k++) {
      if (owner_of[k] < 0) continue; /* outside the part */
      ct_net_param *p = &net->params[order[owner_of[k]]];
      if (p->tensor == l->params[j]) continue;
      /* shared: a view of the owner's storage, keeping this layer's shape */
      bind_view(l->params[j], dev, net->flat_data + p->offset, net->flat_diff + p->offset, false);
    }
  }
  ct_net_params_ready_counts(net);
  if (!quiet && net->nparams)
    LOG_INFO("%d learnable parameter blobs, %zu values (%.1f MB) in one flat buffer", net->nparams,
             net->flat_count, net->flat_count * 4.0 / 1e6);
  free(order);
done:
  ct_strmap_free(&by_name);
  free(has_lr);
  free(has_decay);
  free(owner_of);
  return st;
}

/* Which layers and bottoms need backward (Caffe's rules, including the
 * pruning of layers that do not reach a loss and force_backward), over
 * every layer of the net, those outside a part too: what a part's blobs
 * need is what they need in the whole net.  A parameter's
 * param_propagate_down (its owner's lr_mult is not 0) was set by
 * ct_net_params_build. */
void ct_net_analyze_backward(ct_net *net, bool quiet) {
  int nl = net->nlayers;
  for (int b = 0; b < net->nblobs; b++) net->blob_need_backward[b] = false;
  for (int li = 0; li < nl; li++) {
    ct_layer *l = net->layers[li];
    const Caffe__LayerParameter *lp = l->param;
    bool need = false;
    for (int j = 0; j < l->nbottom; j++) {
      int id = net->bottom_ids[li][j];
      bool nb = net->blob_need_backward[id];
      if (lp->n_propagate_down > 0) nb = lp->propagate_down[j];
      net->bottom_need_backward[li][j] = nb;
      need |= net->blob_need_backward[id];
    }
    for (int j = 0; j < l->nparams; j++) need |= l->param_propagate_down[j];
    if (!l->ops->backward_cpu) need = false;
    net->layer_need_backward[li] = need;
    if (need)
      for (int j = 0; j < l->ntop; j++) net->blob_need_backward[net->top_ids[li][j]] = true;
  }
  /* Backward pass: which blobs are under a loss, which skip backprop. */
  bool *under_loss = ct_xcalloc((size_t)net->nblobs + 1, sizeof(bool));
  bool *skip = ct_xcalloc((size_t)net->nblobs + 1, sizeof(bool));
  for (int li = nl - 1; li >= 0; li--) {
    ct_layer *l = net->layers[li];
    bool contributes = false, skip_down = true;
    for (int j = 0; j < l->ntop; j++) {
      int id = net->top_ids[li][j];
      if (l->loss_weight[j] != 0.0f || under_loss[id]) contributes = true;
      if (!skip[id]) skip_down = false;
    }
    if (net->layer_need_backward[li] && skip_down) {
      net->layer_need_backward[li] = false;
      for (int j = 0; j < l->nbottom; j++) net->bottom_need_backward[li][j] = false;
    }
    if (!contributes) net->layer_need_backward[li] = false;
    net->layer_contributes_loss[li] = contributes;
    if (!quiet)
      LOG_INFO("%s %s backward computation.", l->name, net->layer_need_backward[li] ? "needs" : "does not need");
    for (int j = 0; j < l->nbottom; j++) {
      int id = net->bottom_ids[li][j];
      if (contributes) under_loss[id] = true;
      else net->bottom_need_backward[li][j] = false;
      if (!net->bottom_need_backward[li][j]) skip[id] = true;
    }
  }
  free(under_loss);
  free(skip);
  if (net->param->has_force_backward && net->param->force_backward) {
    for (int li = 0; li < nl; li++) {
      ct_layer *l = net->layers[li];
      if (!l->ops->backward_cpu) continue;
      net->layer_need_backward[li] = true;
      for (int j = 0; j < l->nbottom; j++) {
        bool allow = !(l->ops->no_force_backward_bottoms & (1u << j));
        net->bottom_need_backward[li][j] = net->bottom_need_backward[li][j] || allow;
        int id = net->bottom_ids[li][j];
        net->blob_need_backward[id] = net->blob_need_backward[id] || net->bottom_need_backward[li][j];
      }
      for (int j = 0; j < l->nparams; j++) l->param_propagate_down[j] = true;
    }
  }
}

static int cmp_ptr(const void *a, const void *b) {
  const float *x = *(const float *const *)a, *y = *(const float *const *)b;
  return x < y ? -1 : x > y;
}

/* How many of the n sorted storage pointers equal data. */
static int users_of(const float *const *sorted, size_t n, const float *data) {
  size_t lo = 0, hi = n;
  while (lo < hi) { /* the first >= data */
    size_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < data) lo = mid + 1;
    else hi = mid;
  }
  int users = 0;
  for (size_t i = lo; i < n && sorted[i] == data; i++) users++;
  return users;
}

/* Which layers put their parameter gradients on the gradient stream
 * (core/context.h): those whose type can, that need backward and compute a
 * parameter gradient, and whose parameters no other layer shares (shared
 * gradients accumulate from several layers, which must stay in one
 * stream's order).  Sets l->grad_side and net->grad_side_last, the lowest
 * such layer, after whose backward the net joins the stream. */
void ct_net_mark_grad_side(ct_net *net) {
  net->grad_side_last = -1;
  /* every layer parameter's storage, sorted: users counted by search */
  size_t n = 0;
  for (int li = 0; li < net->nlayers; li++) n += (size_t)net->layers[li]->nparams;
  const float **data = ct_xcalloc(n + 1, sizeof *data);
  n = 0;
  for (int li = 0; li < net->nlayers; li++)
    for (int j = 0; j < net->layers[li]->nparams; j++) data[n++] = net->layers[li]->params[j]->data;
  qsort(data, n, sizeof *data, cmp_ptr);
  for (int li = net->nlayers - 1; li >= 0; li--) {
    ct_layer *l = net->layers[li];
    l->grad_side = false;
    if (!net->ctx->grads || !(l->ops->flags & CT_LAYER_GRAD_SIDE) || l->absorbed ||
        !net->layer_need_backward[li])
      continue;
    bool any = false, shared = false;
    for (int j = 0; j < l->nparams; j++) {
      any |= l->param_propagate_down[j];
      shared |= users_of(data, n, l->params[j]->data) != 1;
    }
    if (!any || shared) continue;
    l->grad_side = true;
    net->grad_side_last = li;
  }
  free(data);
}
