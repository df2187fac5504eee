/* Blob memory planning: blob values and gradients share one pool by
 * lifetime.
 *
 * Steps number one pass (net.h): layer L's forward is step L, its backward
 * step 2n-1-L for n layers, and 2n is after the pass.  An array is live
 * from the first step that touches it to the last, and two arrays whose
 * intervals do not meet can use the same memory.
 *
 * Values.  A blob that owns its values and the blobs that view them (in
 * place, Split, Flatten/Reshape, a SUM written over its bottom), as
 * net->value_owner records them, form a value group with one storage.  Its
 * values are written by its producer's forward, read by the forwards of
 * the layers that take a member as bottom, and by the backwards that read
 * them (ct_layer_backward_reads).  A layer absorbed into the one before it
 * reads nothing of its own (that layer declares what the pair reads); one
 * whose backward the layer after computes (backward_absorbed) reads at both
 * layers' steps; a layer that computes its parameter
 * gradients on the gradient stream reads until the compute stream waits
 * for that work (below).  Kept whole (CT_VALUE_OWN): the net's inputs and
 * outputs, the tops of layers without bottoms (data) and of losses, values
 * of memory that is no blob's, in a pipeline stage's part what the other
 * stages' layers name (the blobs that cross a cut), and every value of a
 * net that plans none (CORTADO_VALUE_PLANNING=0).  A part's steps are its
 * layers' (each micro-batch's backward follows a forward of its own,
 * runtime/stages.h).
 *
 * Diffs.  During backward a blob's diff is written by the backward of the
 * layers that read the blob (its consumers) and read by the backward of
 * the layer that wrote it (its producer).  Blobs whose values alias (in
 * place, Flatten/Reshape views) form one group with one diff, as their
 * diffs alias too; Split tops, which view their bottom's values, keep diffs
 * of their own.  Kinds of groups:
 *  - pooled: written by some backward: a place in the pool;
 *  - loss: a loss top, whose diff holds its loss weight for the whole run:
 *    keeps its own storage;
 *  - zero: read by some backward but written by none (e.g. a Split top that
 *    feeds a layer without backward): all share one zeroed buffer that no
 *    one writes;
 *  - none: touched by no backward: no diff at all.
 * Groups holding a net input or the top of a layer without bottoms (data)
 * stay live to the end of the pass, so that a caller can read the input
 * gradient (force_backward) afterwards; the top diffs of a layer that
 * computes its parameter gradients on the gradient stream stay live until
 * the compute stream has waited for that work.
 *
 * Placement: every pooled group, values and diffs together, by decreasing
 * size at the lowest offset where it overlaps no placed group whose
 * interval meets its own (first fit: interval colouring over the steps).
 * Sizes and offsets count float-sized (4-byte) words, whatever the blobs'
 * element types.
 *
 * While the net is built, a blob's storage is released once the layers
 * that touch it are set up (ct_net_release_values), so the build never
 * holds every activation at once either; the plan then places it. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/settings.h"
#include "core/strmap.h"
#include "math/math.h"
#include "net/net.h"
#include "net/net_internal.h"

/* Pool offsets are multiples of this many floats (256 bytes). */
#define CT_DIFF_ALIGN 64
/* Layers between the last reference to a blob and its release while the
 * net is built: fusion (net_fuse.c) still sets up again the two layers
 * before the one being built. */
#define RELEASE_MARGIN 3

static size_t words_of(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }

/* A blob's values' extent in bytes (its capacity when larger). */
static size_t blob_bytes(const ct_tensor *t) {
  size_t n = t->capacity > t->count ? t->capacity : t->count;
  return ct_tensor_bytes(t, n);
}

/* ------------------------------------------------------------ ownership */

/* The storage owner of blob t among the owners of the given blobs, or -1. */
static int owner_by_address(const ct_net *net, const ct_tensor *t, const int *candidates, int n) {
  for (int k = 0; k < n; k++) {
    const int o = net->value_owner[candidates[k]];
    if (o < 0) continue;
    const ct_tensor *u = net->blobs[o];
    if (!u->owns_data || !u->data) continue;
    const char *p = t->data, *lo = u->data;
    if (p >= lo && p < lo + blob_bytes(u)) return o;
  }
  return -1;
}

/* While the net is built: the storages that may be released, by the layer
 * after which they may go. */
struct ct_value_release {
  ct_strmap last;  /* blob name -> 2 * the last layer naming it + (it names it as a bottom only) */
  int cap;         /* blobs the arrays below hold */
  int *next;       /* (cap) the next blob viewing the same storage, -1 at the end */
  int *until;      /* (cap) owners: the layer after which the storage may go; INT_MAX: never */
  int *due;        /* (nlayers + RELEASE_MARGIN + 1) the first entry due at each layer, -1 */
  int (*entries)[2]; /* (owner, next entry) */
  int nentries, entries_cap, ndue;
};

ct_value_release *ct_net_release_begin(const ct_net *net) {
  ct_value_release *r = ct_xcalloc(1, sizeof *r);
  r->last = (ct_strmap)CT_STRMAP_INIT;
  const Caffe__NetParameter *p = net->param;
  for (size_t li = 0; li < p->n_layer; li++) {
    const Caffe__LayerParameter *lp = p->layer[li];
    for (size_t k = 0; k < lp->n_bottom; k++) ct_strmap_put(&r->last, lp->bottom[k], 2 * (int)li + 1);
    for (size_t k = 0; k < lp->n_top; k++) ct_strmap_put(&r->last, lp->top[k], 2 * (int)li);
  }
  r->ndue = (int)p->n_layer + RELEASE_MARGIN + 1;
  r->due = ct_xcalloc((size_t)r->ndue, sizeof(int));
  for (int i = 0; i < r->ndue; i++) r->due[i] = -1;
  return r;
}

void ct_net_release_end(ct_value_release *r) {
  if (!r) return;
  ct_strmap_free(&r->last);
  free(r->next);
  free(r->until);
  free(r->due);
  free(r->entries);
  free(r);
}

static void grow(ct_value_release *r, int nblobs) {
  if (nblobs <= r->cap) return;
  int cap = r->cap ? r->cap : 64;
  while (cap < nblobs) cap *= 2;
  r->next = ct_xrealloc(r->next, (size_t)cap * sizeof(int));
  r->until = ct_xrealloc(r->until, (size_t)cap * sizeof(int));
  for (int b = r->cap; b < cap; b++) r->next[b] = -1, r->until[b] = -1;
  r->cap = cap;
}

/* Whether top j of layer l keeps its values whole: a data layer's (no
 * bottoms) or a loss's. */
static bool top_keeps_values(const ct_layer *l, int j) {
  return l->nbottom == 0 || (l->ops->flags & CT_LAYER_DATA) || l->loss_weight[j] != 0.0f;
}

/* The layer after which blob b (top j of layer li) may lose its values:
 * RELEASE_MARGIN layers after the last layer that names it, when that one
 * names it as a bottom only (else it is an output), and it is no data or
 * loss top; INT_MAX: never. */
static int release_after(const ct_value_release *r, const ct_net *net, int b, int li, int j) {
  const ct_layer *l = net->layers[li];
  const char *name = net->blobs[b]->name;
  if (!name || top_keeps_values(l, j)) return INT_MAX;
  const int v = ct_strmap_get(&r->last, name);
  return v >= 0 && (v & 1) ? v / 2 + RELEASE_MARGIN : INT_MAX;
}

static void extend_until(ct_value_release *r, int o, int until) {
  if (until <= r->until[o] || r->until[o] == INT_MAX) return;
  r->until[o] = until;
  if (until == INT_MAX || until >= r->ndue) {
    r->until[o] = INT_MAX;
    return;
  }
  if (r->nentries == r->entries_cap) {
    r->entries_cap = r->entries_cap ? 2 * r->entries_cap : 64;
    r->entries = ct_xrealloc(r->entries, (size_t)r->entries_cap * sizeof *r->entries);
  }
  r->entries[r->nentries][0] = o;
  r->entries[r->nentries][1] = r->due[until];
  r->due[until] = r->nentries++;
}

void ct_net_note_values(ct_net *net, ct_value_release *r, int li) {
  const ct_layer *l = net->layers[li];
  if (r) grow(r, net->nblobs);
  for (int j = 0; j < l->ntop; j++) {
    const int b = net->top_ids[li][j];
    const ct_tensor *t = net->blobs[b];
    if (t->no_storage && !t->data) continue; /* released, or shape only */
    bool in_place = false;
    for (int k = 0; k < l->nbottom; k++) in_place = in_place || net->bottom_ids[li][k] == b;
    int o = -1;
    if (t->owns_data && t->data) {
      o = b;
    } else if (t->data) {
      o = owner_by_address(net, t, net->bottom_ids[li], l->nbottom);
      for (int k = 0; k < net->nblobs && o < 0; k++) o = owner_by_address(net, t, &k, 1);
    }
    net->value_owner[b] = o;
    net->value_offset[b] = o >= 0 ? (size_t)((const char *)t->data - (const char *)net->blobs[o]->data) : 0;
    if (!r || o < 0) continue;
    if (r->until[o] < 0) r->until[o] = 0; /* a new owner */
    if (o != b && !in_place) {
      r->next[b] = r->next[o];
      r->next[o] = b;
    }
    extend_until(r, o, release_after(r, net, b, li, j));
  }
}

void ct_net_release_values(ct_net *net, ct_value_release *r, int li) {
  if (li >= r->ndue) return;
  for (int e = r->due[li]; e >= 0; e = r->entries[e][1]) {
    const int o = r->entries[e][0];
    ct_tensor *t = net->blobs[o];
    if (r->until[o] != li || net->value_owner[o] != o || !t->owns_data || !t->data) continue;
    for (int b = r->next[o]; b >= 0; b = r->next[b]) {
      if (net->value_owner[b] != o) continue;
      ct_tensor *v = net->blobs[b];
      v->data = NULL;
      v->capacity = 0;
      v->no_storage = true;
    }
    ct_mem_free(t->device, t->data);
    t->data = NULL;
    t->owns_data = false;
    t->capacity = 0;
    t->no_storage = true;
  }
}

/* ------------------------------------------------------------ diff groups */

typedef struct {
  int root;
  int owner;      /* value owner of the group's blobs (-1: none) */
  size_t base;    /* lowest value offset among the group's blobs */
} group_root;

static int cmp_root(const void *a, const void *b) {
  const group_root *x = a, *y = b;
  if (x->owner != y->owner) return x->owner < y->owner ? -1 : 1;
  if (x->base != y->base) return x->base < y->base ? -1 : 1;
  return x->root - y->root;
}

static int root_of(int *parent, int b) {
  while (parent[b] != b) b = parent[b] = parent[parent[b]];
  return b;
}

/* Whether blobs a and b hold some of the same values: by their owner's
 * storage, or by address for values of memory that is no blob's. */
static bool values_meet(const ct_net *net, int a, int b) {
  const int oa = net->value_owner[a], ob = net->value_owner[b];
  const ct_tensor *ta = net->blobs[a], *tb = net->blobs[b];
  if (oa < 0 || ob < 0) {
    const char *pa = ta->data, *pb = tb->data;
    return pa && pb && pa < pb + blob_bytes(tb) && pb < pa + blob_bytes(ta);
  }
  if (oa != ob) return false;
  const size_t pa = net->value_offset[a], pb = net->value_offset[b];
  return pa < pb + blob_bytes(tb) && pb < pa + blob_bytes(ta);
}

/* Whether blob b has values to plan for: storage, or storage released. */
static bool has_values(const ct_net *net, int b) {
  return net->blobs[b]->data || net->value_owner[b] >= 0;
}

/* Groups blobs whose values a layer made alias (in place, Flatten/Reshape
 * views): a top joins a bottom of its layer when their values overlap.
 * Split tops view their bottom's values but keep diffs of their own, so a
 * Split joins nothing.  Fills plan->blob_group, the members' offsets from
 * the group's lowest value and the groups' sizes; groups are numbered by
 * their values' owner and place. */
static void make_groups(const ct_net *net, ct_blob_plan *plan) {
  int nb = net->nblobs;
  int *parent = ct_xcalloc((size_t)nb + 1, sizeof(int));
  for (int b = 0; b < nb; b++) parent[b] = b;
  for (int li = 0; li < net->nlayers; li++) {
    const ct_layer *l = net->layers[li];
    if (strcmp(l->ops->type, "Split") == 0) continue;
    for (int j = 0; j < l->ntop; j++)
      for (int k = 0; k < l->nbottom; k++) {
        int t = net->top_ids[li][j], u = net->bottom_ids[li][k];
        if (t == u || !has_values(net, t) || !has_values(net, u) || !values_meet(net, t, u)) continue;
        parent[root_of(parent, t)] = root_of(parent, u);
      }
  }
  group_root *roots = ct_xcalloc((size_t)nb + 1, sizeof *roots);
  int *root_group = ct_xcalloc((size_t)nb + 1, sizeof(int));
  int nroots = 0;
  for (int b = 0; b < nb; b++) root_group[b] = -1;
  for (int b = 0; b < nb; b++) {
    if (!has_values(net, b)) continue;
    int r = root_of(parent, b);
    const size_t at = net->value_owner[b] >= 0 ? net->value_offset[b] : 0;
    if (root_group[r] < 0) {
      root_group[r] = nroots;
      roots[nroots++] = (group_root){r, net->value_owner[b] >= 0 ? net->value_owner[b] : nb + b, at};
    } else if (at < roots[root_group[r]].base) {
      roots[root_group[r]].base = at;
    }
  }
  qsort(roots, (size_t)nroots, sizeof *roots, cmp_root);
  for (int g = 0; g < nroots; g++) root_group[roots[g].root] = g;
  plan->groups = ct_xcalloc((size_t)nroots + 1, sizeof *plan->groups);
  plan->ngroups = nroots;
  for (int g = 0; g < nroots; g++) plan->groups[g].first = plan->groups[g].last = -1;
  for (int b = 0; b < nb; b++) {
    const ct_tensor *t = net->blobs[b];
    plan->blob_group[b] = -1;
    if (!has_values(net, b)) continue;
    int g = root_group[root_of(parent, b)];
    plan->blob_group[b] = g;
    const size_t at = net->value_owner[b] >= 0 ? net->value_offset[b] : 0;
    plan->blob_offset[b] = (at - roots[g].base) / sizeof(float);
    size_t need = plan->blob_offset[b] + words_of(blob_bytes(t));
    if (need > plan->groups[g].count) plan->groups[g].count = need;
  }
  free(roots);
  free(root_group);
  free(parent);
}

static void touch(ct_diff_group *g, int step, bool write) {
  if (g->first < 0 || step < g->first) g->first = step;
  if (step > g->last) g->last = step;
  if (write) g->written = true;
  else g->read = true;
}

static ct_diff_group *group_of(ct_blob_plan *plan, int blob) {
  int g = plan->blob_group[blob];
  return g < 0 ? NULL : &plan->groups[g];
}

static int bwd_step(const ct_net *net, int li) { return 2 * net->nlayers - 1 - li; }

/* The nearest layer below li (lower index) that computes its parameter
 * gradients on the gradient stream, or -1: li's work there is waited for
 * at the end of that layer's backward step (net.c). */
static int grad_side_below(const ct_net *net, int li) {
  for (int k = li - 1; k >= 0; k--)
    if (net->layers[k]->grad_side && net->layer_need_backward[k]) return k;
  return -1;
}

/* Lifetimes over the backward steps and each group's kind. */
static void find_diff_lifetimes(const ct_net *net, ct_blob_plan *plan) {
  int n = net->nlayers;
  for (int li = 0; li < n; li++) {
    const ct_layer *l = net->layers[li];
    int step = bwd_step(net, li);
    for (int j = 0; j < l->ntop; j++) {
      int g = plan->blob_group[net->top_ids[li][j]];
      if (g < 0) continue;
      if (l->loss_weight[j] != 0.0f) plan->groups[g].loss = true;
      if (l->nbottom == 0) plan->groups[g].keep_to_end = true;
      if (net->layer_need_backward[li]) touch(&plan->groups[g], step, false);
    }
    if (!net->layer_need_backward[li]) continue;
    for (int j = 0; j < l->nbottom; j++) {
      if (!net->bottom_need_backward[li][j]) continue;
      int g = plan->blob_group[net->bottom_ids[li][j]];
      if (g >= 0) touch(&plan->groups[g], step, true);
    }
  }
  for (int i = 0; i < net->ninputs; i++) {
    int g = plan->blob_group[net->input_ids[i]];
    if (g >= 0) plan->groups[g].keep_to_end = true;
  }
  /* A layer with grad_side reads its top diffs on the gradient stream until
   * the compute stream waits for it. */
  for (int li = 0; li < n; li++) {
    const ct_layer *l = net->layers[li];
    const int below = l->grad_side && net->layer_need_backward[li] ? grad_side_below(net, li) : -1;
    for (int j = 0; below >= 0 && j < l->ntop; j++) {
      ct_diff_group *g = group_of(plan, net->top_ids[li][j]);
      if (g && g->first >= 0 && g->last < bwd_step(net, below)) g->last = bwd_step(net, below);
    }
  }
  for (int g = 0; g < plan->ngroups; g++) {
    ct_diff_group *d = &plan->groups[g];
    if (d->loss) d->kind = CT_DIFF_LOSS;
    else if (d->written) d->kind = CT_DIFF_POOLED;
    else if (d->read) d->kind = CT_DIFF_ZERO;
    else d->kind = CT_DIFF_NONE;
    if (d->kind == CT_DIFF_POOLED && d->keep_to_end) d->last = 2 * n;
  }
}

/* ------------------------------------------------------------ value groups */

static void vtouch(ct_blob_plan *plan, int blob, int step) {
  const int g = plan->blob_vgroup[blob];
  if (g < 0) return;
  ct_value_group *v = &plan->vgroups[g];
  if (v->first < 0 || step < v->first) v->first = step;
  if (step > v->last) v->last = step;
}

/* The layer whose backward step computes li's backward: the nearest one
 * before it that is not absorbed (absorbed: the layer before computes it),
 * or the one after (backward_absorbed). */
static int backward_runner(const ct_net *net, int li) {
  if (net->layers[li]->backward_absorbed && li + 1 < net->nlayers) return li + 1;
  int k = li;
  while (k > 0 && net->layers[k]->absorbed) k--;
  return k;
}

/* The values layer li's backward reads, at the steps that read them.  A
 * layer absorbed into the one before reads nothing itself: that layer
 * computes its backward and declares what the pair reads. */
static void touch_backward_reads(const ct_net *net, ct_blob_plan *plan, int li) {
  const ct_layer *l = net->layers[li];
  if (l->absorbed) return;
  const int runner = backward_runner(net, li);
  if (!net->layer_need_backward[runner] && !net->layer_need_backward[li]) return;
  bool *rb = ct_xcalloc((size_t)l->nbottom + 1, sizeof(bool));
  bool *rt = ct_xcalloc((size_t)l->ntop + 1, sizeof(bool));
  ct_layer_backward_reads(l, rb, rt);
  int last = bwd_step(net, li) > bwd_step(net, runner) ? bwd_step(net, li) : bwd_step(net, runner);
  /* the gradient stream's work reads them until the compute stream waits */
  const int below = l->grad_side && net->layer_need_backward[li] ? grad_side_below(net, li) : -1;
  if (below >= 0 && bwd_step(net, below) > last) last = bwd_step(net, below);
  for (int j = 0; j < l->nbottom; j++)
    if (rb[j]) vtouch(plan, net->bottom_ids[li][j], last);
  for (int j = 0; j < l->ntop; j++)
    if (rt[j]) vtouch(plan, net->top_ids[li][j], last);
  free(rb);
  free(rt);
}

static void make_value_groups(const ct_net *net, ct_blob_plan *plan) {
  const int nb = net->nblobs;
  for (int b = 0; b < nb; b++) plan->blob_vgroup[b] = -1;
  if (!net->plan_values) return;
  int *group_of_owner = ct_xcalloc((size_t)nb + 1, sizeof(int));
  for (int b = 0; b < nb; b++) group_of_owner[b] = -1;
  plan->vgroups = ct_xcalloc((size_t)nb + 1, sizeof *plan->vgroups);
  for (int b = 0; b < nb; b++) {
    const int o = net->value_owner[b];
    if (o < 0) continue;
    if (group_of_owner[o] < 0) {
      group_of_owner[o] = plan->nvgroups;
      plan->vgroups[plan->nvgroups++] = (ct_value_group){CT_VALUE_POOLED, o, -1, -1, 0, 0};
    }
    const int g = group_of_owner[o];
    plan->blob_vgroup[b] = g;
    const size_t need = words_of(net->value_offset[b] + blob_bytes(net->blobs[b]));
    if (need > plan->vgroups[g].count) plan->vgroups[g].count = need;
  }
  /* kept whole: inputs, outputs, the tops of data layers and losses, and a
   * storage its owner does not own (memory that is no blob's) */
  bool *keep = ct_xcalloc((size_t)nb + 1, sizeof(bool));
  for (int i = 0; i < net->ninputs; i++) keep[net->input_ids[i]] = true;
  for (int i = 0; i < net->noutputs; i++) keep[net->output_ids[i]] = true;
  for (int li = 0; li < net->nlayers; li++) {
    const ct_layer *l = net->layers[li];
    for (int j = 0; j < l->ntop; j++)
      if (top_keeps_values(l, j)) keep[net->top_ids[li][j]] = true;
    /* a pipeline stage's part: what a layer of another stage names crosses
     * a cut (received, sent, stashed between micro-batches) */
    if (ct_net_in_part(net, li)) continue;
    for (int j = 0; j < l->nbottom; j++) keep[net->bottom_ids[li][j]] = true;
    for (int j = 0; j < l->ntop; j++) keep[net->top_ids[li][j]] = true;
  }
  for (int b = 0; b < nb; b++) {
    const int g = plan->blob_vgroup[b];
    if (g < 0) continue;
    const ct_tensor *owner = net->blobs[plan->vgroups[g].owner];
    if (keep[b] || !(owner->owns_data || owner->no_storage)) plan->vgroups[g].kind = CT_VALUE_OWN;
  }
  free(keep);
  for (int li = net->part_first; li < net->part_end; li++) {
    const ct_layer *l = net->layers[li];
    for (int j = 0; j < l->nbottom; j++) vtouch(plan, net->bottom_ids[li][j], li);
    for (int j = 0; j < l->ntop; j++) vtouch(plan, net->top_ids[li][j], li);
    touch_backward_reads(net, plan, li);
  }
  free(group_of_owner);
}

/* ------------------------------------------------------------ placement */

typedef struct {
  size_t count;   /* words */
  int first, last;
  size_t *offset; /* where the placement goes */
} plan_item;

static int cmp_items(const void *a, const void *b) {
  const plan_item *x = a, *y = b;
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_size_t(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

static size_t aligned(size_t words) { return (words + CT_DIFF_ALIGN - 1) / CT_DIFF_ALIGN * CT_DIFF_ALIGN; }

/* The items placed so far that are live at each step (a list per step), so
 * that an item meets only the placed items of its own steps: placement is
 * linear in the net's size for the short lifetimes of most arrays. */
typedef struct {
  int *items;
  int n, cap;
} step_list;

static void step_add(step_list *l, int g) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 4;
    l->items = ct_xrealloc(l->items, (size_t)l->cap * sizeof *l->items);
  }
  l->items[l->n++] = g;
}

/* First fit: each item, largest first, at the lowest aligned offset where
 * it overlaps no placed item whose interval meets its own.  Returns the
 * pool's size in words. */
static size_t place(plan_item *items, int nitems, int nsteps) {
  qsort(items, (size_t)nitems, sizeof *items, cmp_items);
  step_list *live = ct_xcalloc((size_t)nsteps + 1, sizeof *live);
  int *seen = ct_xcalloc((size_t)nitems + 1, sizeof(int)); /* k + 1 of the last look */
  size_t *busy = NULL; /* (start, end) pairs */
  size_t busy_cap = 0, pool = 0;
  for (int k = 0; k < nitems; k++) {
    plan_item *g = &items[k];
    CT_ASSERT(g->first >= 0 && g->first <= g->last && g->last <= nsteps);
    const size_t size = aligned(g->count);
    size_t nbusy = 0;
    for (int step = g->first; step <= g->last; step++)
      for (int i = 0; i < live[step].n; i++) {
        const int q = live[step].items[i];
        if (seen[q] == k + 1) continue;
        seen[q] = k + 1;
        if (nbusy == busy_cap) {
          busy_cap = busy_cap ? 2 * busy_cap : 64;
          busy = ct_xrealloc(busy, 2 * busy_cap * sizeof *busy);
        }
        busy[2 * nbusy] = *items[q].offset;
        busy[2 * nbusy + 1] = *items[q].offset + aligned(items[q].count);
        nbusy++;
      }
    if (nbusy) qsort(busy, nbusy, 2 * sizeof(size_t), cmp_size_t);
    size_t off = 0;
    for (size_t q = 0; q < nbusy; q++) {
      if (off + size <= busy[2 * q]) break;
      if (busy[2 * q + 1] > off) off = busy[2 * q + 1];
    }
    *g->offset = off;
    if (off + size > pool) pool = off + size;
    for (int step = g->first; step <= g->last; step++) step_add(&live[step], k);
  }
  for (int step = 0; step <= nsteps; step++) free(live[step].items);
  free(live);
  free(seen);
  free(busy);
  return pool;
}

/* The ranges each step ends, for CORTADO_POOL_POISON (items kept to the
 * end of the pass are not). */
static void find_dead(ct_blob_plan *plan, const plan_item *items, int nitems, int nsteps) {
  plan->dead_at = ct_xcalloc((size_t)nsteps + 2, sizeof(int));
  plan->dead = ct_xcalloc(2 * (size_t)nitems + 2, sizeof(size_t));
  for (int k = 0; k < nitems; k++)
    if (items[k].last < nsteps) plan->dead_at[items[k].last + 1]++;
  for (int s = 0; s <= nsteps; s++) plan->dead_at[s + 1] += plan->dead_at[s];
  int *fill = ct_xcalloc((size_t)nsteps + 1, sizeof(int));
  for (int k = 0; k < nitems; k++) {
    const int s = items[k].last;
    if (s >= nsteps) continue;
    const int at = plan->dead_at[s] + fill[s]++;
    plan->dead[2 * at] = *items[k].offset;
    plan->dead[2 * at + 1] = items[k].count;
  }
  free(fill);
}

ct_net_memory ct_net_memory_split(const ct_net *net) {
  ct_net_memory m = {0};
  for (int b = 0; b < net->nblobs; b++) {
    const ct_tensor *t = net->blobs[b];
    if (t->owns_data) m.blob_data += ct_tensor_bytes(t, t->capacity);
    if (t->owns_diff) m.blob_diffs += ct_tensor_bytes(t, t->diff_capacity);
  }
  if (net->blob_plan) m.pool = (net->blob_plan->pool_count + net->blob_plan->zero_count) * sizeof(float);
  m.flat = 2 * net->flat_count * sizeof(float);
  for (int i = 0; i < net->nlayers; i++) m.layer_state += net->layers[i]->state_bytes;
  return m;
}

ct_blob_plan *ct_net_blob_plan_make(const ct_net *net) {
  ct_blob_plan *plan = ct_xcalloc(1, sizeof *plan);
  const int nb = net->nblobs, nsteps = 2 * net->nlayers;
  plan->nblobs = nb;
  plan->blob_group = ct_xcalloc((size_t)nb + 1, sizeof(int));
  plan->blob_offset = ct_xcalloc((size_t)nb + 1, sizeof(size_t));
  plan->blob_vgroup = ct_xcalloc((size_t)nb + 1, sizeof(int));
  make_groups(net, plan);
  find_diff_lifetimes(net, plan);
  make_value_groups(net, plan);
  plan_item *items = ct_xcalloc((size_t)(plan->ngroups + plan->nvgroups) + 1, sizeof *items);
  int nitems = 0;
  for (int g = 0; g < plan->nvgroups; g++) {
    ct_value_group *v = &plan->vgroups[g];
    if (v->kind != CT_VALUE_POOLED) continue;
    if (v->first < 0) v->first = v->last = 0; /* touched by no layer: a place of its own */
    items[nitems++] = (plan_item){v->count, v->first, v->last, &v->offset};
    plan->values_unplanned += v->count;
  }
  for (int g = 0; g < plan->ngroups; g++) {
    ct_diff_group *d = &plan->groups[g];
    if (d->kind == CT_DIFF_POOLED) items[nitems++] = (plan_item){d->count, d->first, d->last, &d->offset};
    if (d->kind == CT_DIFF_ZERO && d->count > plan->zero_count) plan->zero_count = d->count;
    if (d->kind == CT_DIFF_POOLED || d->kind == CT_DIFF_LOSS) plan->unplanned_count += d->count;
  }
  plan->pool_count = place(items, nitems, nsteps);
  if (ct_setting_bool("CORTADO_POOL_POISON")) find_dead(plan, items, nitems, nsteps);
  free(items);
  return plan;
}

void ct_net_blob_plan_free(ct_blob_plan *plan) {
  if (!plan) return;
  free(plan->groups);
  free(plan->blob_group);
  free(plan->blob_offset);
  free(plan->vgroups);
  free(plan->blob_vgroup);
  free(plan->dead_at);
  free(plan->dead);
  free(plan);
}

/* ------------------------------------------------------------ applying */

/* Points t's diff at external storage (or none), freeing an owned one. */
static void set_diff(ct_tensor *t, float *diff) {
  if (t->owns_diff) ct_mem_free(t->device, t->diff);
  t->diff = diff;
  t->owns_diff = false;
  t->has_diff = diff != NULL;
}

/* Points blob b, of pooled value group g, at its place in the pool,
 * freeing what it owned. */
static void point_value(ct_net *net, const ct_blob_plan *plan, int b) {
  ct_tensor *t = net->blobs[b];
  const ct_value_group *v = &plan->vgroups[plan->blob_vgroup[b]];
  if (t->owns_data) ct_mem_free(t->device, t->data);
  t->data = (char *)(net->blob_pool + v->offset) + net->value_offset[b];
  t->owns_data = false;
  t->no_storage = false;
  t->own_diff_on_view = true;
  if (t->capacity < t->count) t->capacity = t->count;
}

/* Kept groups whose storage was released while the net was built (which
 * only a plan that keeps what the build did not foresee has): storage of
 * their own again, the owners first. */
static ct_status restore_values(ct_net *net, const ct_blob_plan *plan, ct_error *err) {
  for (int pass = 0; pass < 2; pass++)
    for (int b = 0; b < net->nblobs; b++) {
      const int g = plan->blob_vgroup[b];
      ct_tensor *t = net->blobs[b];
      if (g < 0 || plan->vgroups[g].kind != CT_VALUE_OWN || t->data || !t->no_storage) continue;
      const int o = plan->vgroups[g].owner;
      if (pass == 0 && b == o) {
        t->no_storage = false;
        t->capacity = 0;
        CT_TRY(ct_tensor_reshape(t, t->ndim, t->shape, err));
      } else if (pass == 1 && b != o) {
        t->data = (char *)net->blobs[o]->data + net->value_offset[b];
        t->no_storage = false;
        t->capacity = t->count;
      }
    }
  return CT_OK;
}

void ct_net_detach_values(ct_net *net) {
  const ct_blob_plan *plan = net->blob_plan;
  if (!plan) return;
  for (int b = 0; b < net->nblobs; b++) {
    const int g = plan->blob_vgroup[b];
    if (g < 0 || plan->vgroups[g].kind != CT_VALUE_POOLED) continue;
    ct_tensor *t = net->blobs[b];
    t->data = NULL;
    t->capacity = 0;
    t->own_diff_on_view = false;
    net->value_owner[b] = -1;
  }
}

/* Fills n words of the pool from word off with NaN: all ones, a NaN as
 * float32 and as both halves in 16 bits. */
static void poison(ct_net *net, size_t off, size_t n) {
  const union {
    uint32_t u;
    float f;
  } nan_bits = {0xffffffffu};
  ct_dev_set(net->ctx, n, nan_bits.f, net->blob_pool + off);
}

void ct_net_poison_step(ct_net *net, int step) {
  const ct_blob_plan *plan = net->blob_plan;
  if (!plan || !plan->dead_at || step < 0 || step >= 2 * net->nlayers) return;
  for (int k = plan->dead_at[step]; k < plan->dead_at[step + 1]; k++)
    poison(net, plan->dead[2 * k], plan->dead[2 * k + 1]);
}

ct_status ct_net_plan_blobs(ct_net *net, ct_error *err) {
  ct_blob_plan *plan = ct_net_blob_plan_make(net);
  int dev = net->ctx->device;
  if (net->blob_pool) ct_mem_free(dev, net->blob_pool);
  if (net->diff_zero) ct_mem_free(dev, net->diff_zero);
  net->blob_pool = NULL;
  ct_status st = restore_values(net, plan, err);
  if (st != CT_OK) {
    ct_net_blob_plan_free(plan);
    return st;
  }
  /* the owners' own storage goes before the pool is taken */
  for (int b = 0; b < net->nblobs; b++) {
    const int g = plan->blob_vgroup[b];
    ct_tensor *t = net->blobs[b];
    if (g < 0 || plan->vgroups[g].kind != CT_VALUE_POOLED || !t->owns_data) continue;
    ct_mem_free(t->device, t->data);
    t->data = NULL;
    t->owns_data = false;
  }
  net->blob_pool = plan->pool_count ? ct_mem_alloc(dev, plan->pool_count * sizeof(float)) : NULL;
  net->diff_zero = plan->zero_count ? ct_mem_alloc(dev, plan->zero_count * sizeof(float)) : NULL;
  if (plan->dead_at && net->blob_pool) poison(net, 0, plan->pool_count);
  for (int b = 0; b < net->nblobs; b++) {
    const int g = plan->blob_vgroup[b];
    if (g >= 0 && plan->vgroups[g].kind == CT_VALUE_POOLED) point_value(net, plan, b);
  }
  for (int b = 0; b < net->nblobs; b++) {
    ct_tensor *t = net->blobs[b];
    int g = plan->blob_group[b];
    if (g < 0) continue;
    const ct_diff_group *d = &plan->groups[g];
    size_t off = plan->blob_offset[b];
    switch (d->kind) {
      case CT_DIFF_POOLED: set_diff(t, net->blob_pool + d->offset + off); break;
      case CT_DIFF_ZERO: set_diff(t, net->diff_zero + off); break;
      case CT_DIFF_NONE: set_diff(t, NULL); break;
      case CT_DIFF_LOSS:
        /* The loss weight's storage, shared by the group when it aliases. */
        ct_tensor_need_diff(t);
        break;
    }
  }
  ct_net_blob_plan_free(net->blob_plan);
  net->blob_plan = plan;
  net->layout_version++;
  if (!net->quiet_build)
    LOG_INFO("Blob memory: %zu words for values and gradients by lifetime (%zu + %zu if each "
             "blob kept its own)",
             plan->pool_count, plan->values_unplanned, plan->unplanned_count);
  return CT_OK;
}
