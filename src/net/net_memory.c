/* Diff memory planning: blob gradients share one pool by lifetime.
 *
 * During backward (layers n-1 down to 0, backward step s = n-1-L for layer
 * L) a blob's diff is written by the backward of the layers that read the
 * blob (its consumers) and read by the backward of the layer that wrote it
 * (its producer).  So it is only live from the first backward step that
 * touches it to the last, and two diffs whose step intervals do not meet can
 * use the same memory.  Blobs whose data alias (in place, Flatten/Reshape
 * views) form one group with one diff, as their diffs alias too; Split tops,
 * which view their bottom's data, keep diffs of their own.
 *
 * Sizes and offsets count float-sized (4-byte) words, whatever the blobs'
 * element types.
 *
 * Kinds of groups:
 *  - pooled: written by some backward; an offset in the pool, given by a
 *    first-fit placement of the groups by decreasing size among those whose
 *    intervals meet (interval colouring on the backward order);
 *  - loss: a loss top, whose diff holds its loss weight for the whole run:
 *    keeps its own storage;
 *  - zero: read by some backward but written by none (e.g. a Split top that
 *    feeds a layer without backward): all share one zeroed buffer that no
 *    one writes;
 *  - none: touched by no backward: no diff at all.
 * Groups holding a net input or the top of a layer without bottoms (data)
 * stay live to the end of backward, so that a caller can read the input
 * gradient (force_backward) afterwards; the top diffs of a layer that
 * computes its parameter gradients on the gradient stream stay live until
 * the compute stream has waited for that work. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "net/net.h"

/* Pool offsets are multiples of this many floats (256 bytes). */
#define CT_DIFF_ALIGN 64

typedef struct {
  int root;
  uintptr_t base; /* lowest data address among the group's blobs */
} group_root;

static int cmp_root(const void *a, const void *b) {
  const group_root *x = a, *y = b;
  if (x->base != y->base) return x->base < y->base ? -1 : 1;
  return x->root - y->root;
}

/* A blob's data extent in float-sized words, the plan's unit (a 16-bit
 * blob takes half as many). */
static size_t blob_extent(const ct_tensor *t) {
  size_t n = t->capacity > t->count ? t->capacity : t->count;
  return (ct_tensor_bytes(t, n) + sizeof(float) - 1) / sizeof(float);
}

static bool spans_meet(const ct_tensor *a, const ct_tensor *b) {
  const char *pa = a->data, *pb = b->data;
  return pa < pb + blob_extent(b) * sizeof(float) && pb < pa + blob_extent(a) * sizeof(float);
}

static int root_of(int *parent, int b) {
  while (parent[b] != b) b = parent[b] = parent[parent[b]];
  return b;
}

/* Groups blobs whose data a layer made alias (in place, Flatten/Reshape
 * views): a top joins a bottom of its layer when their data ranges overlap.
 * Split tops view their bottom's data but keep diffs of their own, so a
 * Split joins nothing.  Fills plan->blob_group, the members' offsets from
 * the group's lowest address and the groups' sizes; groups are numbered by
 * address. */
static void make_groups(const ct_net *net, ct_diff_plan *plan) {
  int nb = net->nblobs;
  int *parent = ct_xcalloc((size_t)nb + 1, sizeof(int));
  for (int b = 0; b < nb; b++) parent[b] = b;
  for (int li = 0; li < net->nlayers; li++) {
    const ct_layer *l = net->layers[li];
    if (strcmp(l->ops->type, "Split") == 0) continue;
    for (int j = 0; j < l->ntop; j++)
      for (int k = 0; k < l->nbottom; k++) {
        int t = net->top_ids[li][j], u = net->bottom_ids[li][k];
        const ct_tensor *tt = net->blobs[t], *tu = net->blobs[u];
        if (t == u || !tt->data || !tu->data || !spans_meet(tt, tu)) continue;
        parent[root_of(parent, t)] = root_of(parent, u);
      }
  }
  group_root *roots = ct_xcalloc((size_t)nb + 1, sizeof *roots);
  int *root_group = ct_xcalloc((size_t)nb + 1, sizeof(int));
  int nroots = 0;
  for (int b = 0; b < nb; b++) root_group[b] = -1;
  for (int b = 0; b < nb; b++) {
    if (!net->blobs[b]->data) continue;
    int r = root_of(parent, b);
    uintptr_t a = (uintptr_t)net->blobs[b]->data;
    if (root_group[r] < 0) {
      root_group[r] = nroots;
      roots[nroots++] = (group_root){r, a};
    } else if (a < roots[root_group[r]].base) {
      roots[root_group[r]].base = a;
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
    if (!t->data) continue;
    int g = root_group[root_of(parent, b)];
    plan->blob_group[b] = g;
    plan->blob_offset[b] = ((uintptr_t)t->data - roots[g].base) / sizeof(float);
    size_t need = plan->blob_offset[b] + blob_extent(t);
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

static ct_diff_group *group_of(ct_diff_plan *plan, int blob) {
  int g = plan->blob_group[blob];
  return g < 0 ? NULL : &plan->groups[g];
}

/* Lifetimes over the backward steps and each group's kind. */
static void find_lifetimes(const ct_net *net, ct_diff_plan *plan) {
  int n = net->nlayers;
  for (int li = 0; li < n; li++) {
    const ct_layer *l = net->layers[li];
    int step = n - 1 - li;
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
   * the compute stream waits for it: at the end of the next such layer's
   * backward step (net.c), where the diffs must still be there. */
  int below = -1; /* the nearest grad_side layer below li */
  for (int li = 0; li < n; li++) {
    const ct_layer *l = net->layers[li];
    if (!l->grad_side || !net->layer_need_backward[li]) continue;
    for (int j = 0; below >= 0 && j < l->ntop; j++) {
      ct_diff_group *g = group_of(plan, net->top_ids[li][j]);
      if (g && g->first >= 0 && g->last < n - 1 - below) g->last = n - 1 - below;
    }
    below = li;
  }
  for (int g = 0; g < plan->ngroups; g++) {
    ct_diff_group *d = &plan->groups[g];
    if (d->loss) d->kind = CT_DIFF_LOSS;
    else if (d->written) d->kind = CT_DIFF_POOLED;
    else if (d->read) d->kind = CT_DIFF_ZERO;
    else d->kind = CT_DIFF_NONE;
    if (d->kind == CT_DIFF_POOLED && d->keep_to_end) d->last = n;
  }
}

static int cmp_by_size(const void *a, const void *b, void *plan_) {
  const ct_diff_plan *plan = plan_;
  const ct_diff_group *x = &plan->groups[*(const int *)a], *y = &plan->groups[*(const int *)b];
  if (x->count != y->count) return x->count > y->count ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return *(const int *)a - *(const int *)b;
}

static int cmp_size_t(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* The groups placed so far that are live at each backward step (a list per
 * step), so that a group meets only the placed groups of its own steps:
 * placement is linear in the net's size for the short lifetimes of most
 * diffs, not quadratic in the number of groups. */
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

/* First fit: the lowest aligned offset at which group g does not overlap a
 * placed group whose interval meets g's. */
static void place_groups(ct_diff_plan *plan, int nsteps) {
  int *order = ct_xcalloc((size_t)plan->ngroups + 1, sizeof(int));
  int nplace = 0;
  for (int g = 0; g < plan->ngroups; g++)
    if (plan->groups[g].kind == CT_DIFF_POOLED) order[nplace++] = g;
  qsort_r(order, (size_t)nplace, sizeof(int), cmp_by_size, plan);
  step_list *live = ct_xcalloc((size_t)nsteps + 1, sizeof *live);
  int *seen = ct_xcalloc((size_t)plan->ngroups + 1, sizeof(int)); /* k + 1 of the last look */
  size_t *busy = NULL; /* (start, end) pairs */
  size_t busy_cap = 0;
  for (int k = 0; k < nplace; k++) {
    ct_diff_group *g = &plan->groups[order[k]];
    CT_ASSERT(g->first >= 0 && g->first <= g->last && g->last <= nsteps);
    size_t size = (g->count + CT_DIFF_ALIGN - 1) / CT_DIFF_ALIGN * CT_DIFF_ALIGN;
    size_t nbusy = 0;
    for (int step = g->first; step <= g->last; step++)
      for (int i = 0; i < live[step].n; i++) {
        const int q = live[step].items[i];
        if (seen[q] == k + 1) continue;
        seen[q] = k + 1;
        const ct_diff_group *o = &plan->groups[q];
        if (nbusy == busy_cap) {
          busy_cap = busy_cap ? 2 * busy_cap : 64;
          busy = ct_xrealloc(busy, 2 * busy_cap * sizeof *busy);
        }
        busy[2 * nbusy] = o->offset;
        busy[2 * nbusy + 1] = o->offset + (o->count + CT_DIFF_ALIGN - 1) / CT_DIFF_ALIGN * CT_DIFF_ALIGN;
        nbusy++;
      }
    if (nbusy) qsort(busy, nbusy, 2 * sizeof(size_t), cmp_size_t);
    size_t off = 0;
    for (size_t q = 0; q < nbusy; q++) {
      if (off + size <= busy[2 * q]) break;
      if (busy[2 * q + 1] > off) off = busy[2 * q + 1];
    }
    g->offset = off;
    if (off + size > plan->pool_count) plan->pool_count = off + size;
    for (int step = g->first; step <= g->last; step++) step_add(&live[step], order[k]);
  }
  for (int step = 0; step <= nsteps; step++) free(live[step].items);
  free(live);
  free(seen);
  free(busy);
  free(order);
}

ct_net_memory ct_net_memory_split(const ct_net *net) {
  ct_net_memory m = {0};
  for (int b = 0; b < net->nblobs; b++) {
    const ct_tensor *t = net->blobs[b];
    if (t->owns_data) m.blob_data += ct_tensor_bytes(t, t->capacity);
    if (t->owns_diff) m.blob_diffs += ct_tensor_bytes(t, t->diff_capacity);
  }
  if (net->diff_plan)
    m.diff_pool = (net->diff_plan->pool_count + net->diff_plan->zero_count) * sizeof(float);
  m.flat = 2 * net->flat_count * sizeof(float);
  for (int i = 0; i < net->nlayers; i++) m.layer_state += net->layers[i]->state_bytes;
  return m;
}

ct_diff_plan *ct_net_diff_plan_make(const ct_net *net) {
  ct_diff_plan *plan = ct_xcalloc(1, sizeof *plan);
  plan->nblobs = net->nblobs;
  plan->blob_group = ct_xcalloc((size_t)net->nblobs + 1, sizeof(int));
  plan->blob_offset = ct_xcalloc((size_t)net->nblobs + 1, sizeof(size_t));
  make_groups(net, plan);
  find_lifetimes(net, plan);
  place_groups(plan, net->nlayers);
  for (int g = 0; g < plan->ngroups; g++) {
    const ct_diff_group *d = &plan->groups[g];
    if (d->kind == CT_DIFF_ZERO && d->count > plan->zero_count) plan->zero_count = d->count;
    if (d->kind == CT_DIFF_POOLED || d->kind == CT_DIFF_LOSS) plan->unplanned_count += d->count;
  }
  return plan;
}

void ct_net_diff_plan_free(ct_diff_plan *plan) {
  if (!plan) return;
  free(plan->groups);
  free(plan->blob_group);
  free(plan->blob_offset);
  free(plan);
}

/* Points t's diff at external storage (or none), freeing an owned one. */
static void set_diff(ct_tensor *t, float *diff) {
  if (t->owns_diff) ct_mem_free(t->device, t->diff);
  t->diff = diff;
  t->owns_diff = false;
  t->has_diff = diff != NULL;
}

ct_status ct_net_plan_diffs(ct_net *net, ct_error *err) {
  ct_diff_plan *plan = ct_net_diff_plan_make(net);
  int dev = net->ctx->device;
  if (net->diff_pool) ct_mem_free(dev, net->diff_pool);
  if (net->diff_zero) ct_mem_free(dev, net->diff_zero);
  net->diff_pool = plan->pool_count ? ct_mem_alloc(dev, plan->pool_count * sizeof(float)) : NULL;
  net->diff_zero = plan->zero_count ? ct_mem_alloc(dev, plan->zero_count * sizeof(float)) : NULL;
  for (int b = 0; b < net->nblobs; b++) {
    ct_tensor *t = net->blobs[b];
    int g = plan->blob_group[b];
    if (g < 0) continue;
    const ct_diff_group *d = &plan->groups[g];
    size_t off = plan->blob_offset[b];
    switch (d->kind) {
      case CT_DIFF_POOLED: set_diff(t, net->diff_pool + d->offset + off); break;
      case CT_DIFF_ZERO: set_diff(t, net->diff_zero + off); break;
      case CT_DIFF_NONE: set_diff(t, NULL); break;
      case CT_DIFF_LOSS:
        /* The loss weight's storage, shared by the group when it aliases. */
        ct_tensor_need_diff(t);
        break;
    }
  }
  ct_net_diff_plan_free(net->diff_plan);
  net->diff_plan = plan;
  if (!net->quiet_build)
    LOG_INFO("Diff memory: %zu values in a pool by lifetime (%zu if each blob kept its own)",
             plan->pool_count, plan->unplanned_count);
  (void)err;
  return CT_OK;
}
