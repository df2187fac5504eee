/* Net rewriting before layers are built: NetState filtering and Split
 * insertion, both on protobuf-c messages (Caffe's FilterNet/InsertSplits). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"
#include "net/net.h"
#include "net/net_internal.h"
#include "proto/srcpos.h"

Caffe__NetParameter *ct_net_param_clone(const Caffe__NetParameter *p) {
  size_t n = protobuf_c_message_get_packed_size(&p->base);
  uint8_t *buf = ct_xcalloc(n ? n : 1, 1);
  protobuf_c_message_pack(&p->base, buf);
  Caffe__NetParameter *c = caffe__net_parameter__unpack(NULL, n, buf);
  free(buf);
  CT_ASSERTF(c, "re-decoding a NetParameter failed");
  return c;
}

static bool has_stage(const Caffe__NetState *s, const char *stage) {
  for (size_t i = 0; i < s->n_stage; i++)
    if (strcmp(s->stage[i], stage) == 0) return true;
  return false;
}

/* Caffe's StateMeetsRule. */
static bool state_meets_rule(const Caffe__NetState *s, const Caffe__NetStateRule *r) {
  if (r->has_phase && r->phase != s->phase) return false;
  if (r->has_min_level && s->level < r->min_level) return false;
  if (r->has_max_level && s->level > r->max_level) return false;
  for (size_t i = 0; i < r->n_stage; i++)
    if (!has_stage(s, r->stage[i])) return false;
  for (size_t i = 0; i < r->n_not_stage; i++)
    if (has_stage(s, r->not_stage[i])) return false;
  return true;
}

bool ct_net_state_includes(const Caffe__NetState *state, const Caffe__LayerParameter *l) {
  bool keep = l->n_include == 0;
  for (size_t j = 0; j < l->n_exclude && keep; j++)
    if (state_meets_rule(state, l->exclude[j])) keep = false;
  for (size_t j = 0; j < l->n_include && !keep; j++)
    if (state_meets_rule(state, l->include[j])) keep = true;
  return keep;
}

ct_status ct_net_filter(const Caffe__NetParameter *param, const Caffe__NetState *state,
                        Caffe__NetParameter **out, ct_error *err) {
  *out = NULL;
  Caffe__NetParameter *net = ct_net_param_clone(param);
  size_t kept = 0;
  for (size_t i = 0; i < net->n_layer; i++) {
    Caffe__LayerParameter *l = net->layer[i];
    if (l->n_include > 0 && l->n_exclude > 0) {
      ct_error_set(err, CT_ERR_INVALID,
                   "layer '%s': specify either include rules or exclude rules, not both",
                   l->name ? l->name : "");
      ct_srcpos_prefix(err, &l->base, "exclude", 0);
      /* the array holds kept layers, then freed ones, then unvisited ones */
      memmove(net->layer + kept, net->layer + i, (net->n_layer - i) * sizeof *net->layer);
      net->n_layer = kept + (net->n_layer - i);
      protobuf_c_message_free_unpacked(&net->base, NULL);
      return CT_ERR_INVALID;
    }
    if (ct_net_state_includes(state, l)) net->layer[kept++] = l;
    else protobuf_c_message_free_unpacked(&l->base, NULL);
  }
  net->n_layer = kept;
  *out = net;
  return CT_OK;
}

/* ------------------------------------------------------------- splits */

typedef struct {
  const char *name;
  int layer; /* -1 for a net input */
  int top;
} blob_src;

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  char *s = NULL;
  if (vasprintf(&s, f, ap) < 0) ct_abort(__FILE__, __LINE__, "out of memory");
  va_end(ap);
  return s;
}

static char *split_layer_name(const char *layer, const char *blob, int idx) {
  return fmt("%s_%s_%d_split", blob, layer, idx);
}

static char *split_blob_name(const char *layer, const char *blob, int idx, int k) {
  return fmt("%s_%s_%d_split_%d", blob, layer, idx, k);
}

/* Per (layer, top) counters, layer -1 being the net inputs. */
typedef struct {
  int ntops_max;
  int *count;     /* ((nlayers+1) * ntops_max) consumers of each top */
  float *loss;    /* explicit loss weight of each top */
  int *next;      /* next split index to hand out */
} top_table;

static int tt_idx(const top_table *t, int layer, int top) { return (layer + 1) * t->ntops_max + top; }

static Caffe__LayerParameter *new_split_layer(const char *layer_name, const char *blob, int idx,
                                              int count, float loss_weight) {
  Caffe__LayerParameter *s = ct_xcalloc(1, sizeof *s);
  caffe__layer_parameter__init(s);
  s->name = split_layer_name(layer_name, blob, idx);
  s->type = ct_xstrdup("Split");
  s->n_bottom = 1;
  s->bottom = ct_xcalloc(1, sizeof(char *));
  s->bottom[0] = ct_xstrdup(blob);
  s->n_top = (size_t)count;
  s->top = ct_xcalloc((size_t)count, sizeof(char *));
  for (int k = 0; k < count; k++) s->top[k] = split_blob_name(layer_name, blob, idx, k);
  if (loss_weight != 0.0f) {
    s->n_loss_weight = (size_t)count;
    s->loss_weight = ct_xcalloc((size_t)count, sizeof(float));
    s->loss_weight[0] = loss_weight;
  }
  return s;
}

ct_status ct_net_insert_splits(Caffe__NetParameter *net, ct_error *err) {
  int nl = (int)net->n_layer;
  int ntops_max = (int)net->n_input;
  for (int i = 0; i < nl; i++)
    if ((int)net->layer[i]->n_top > ntops_max) ntops_max = (int)net->layer[i]->n_top;
  if (ntops_max == 0) return CT_OK;
  top_table t = {ntops_max, NULL, NULL, NULL};
  size_t cells = (size_t)(nl + 1) * (size_t)ntops_max;
  t.count = ct_xcalloc(cells, sizeof(int));
  t.loss = ct_xcalloc(cells, sizeof(float));
  t.next = ct_xcalloc(cells, sizeof(int));
  /* last producer of each blob name (found by name in `index`), and the
   * source of each bottom */
  size_t nsrc = 0, cap = 16;
  blob_src *last = ct_xcalloc(cap, sizeof *last);
  ct_strmap index = CT_STRMAP_INIT;
  int **bottom_src = ct_xcalloc((size_t)nl + 1, sizeof(int *)); /* pairs (layer, top) */
  ct_status st = CT_OK;

#define SET_LAST(nm, ly, tp)                                          \
  do {                                                                \
    int k_ = ct_strmap_get(&index, nm);                               \
    if (k_ < 0) {                                                     \
      if (nsrc == cap) last = ct_xrealloc(last, (cap *= 2) * sizeof *last); \
      k_ = (int)nsrc++;                                               \
      ct_strmap_put(&index, nm, k_);                                  \
    }                                                                 \
    last[k_] = (blob_src){nm, ly, tp};                                \
  } while (0)

  for (size_t i = 0; i < net->n_input; i++) SET_LAST(net->input[i], -1, (int)i);
  for (int i = 0; i < nl && st == CT_OK; i++) {
    Caffe__LayerParameter *l = net->layer[i];
    bottom_src[i] = ct_xcalloc(2 * l->n_bottom + 1, sizeof(int));
    for (size_t j = 0; j < l->n_bottom; j++) {
      int found = ct_strmap_get(&index, l->bottom[j]);
      size_t k = found < 0 ? nsrc : (size_t)found;
      if (k == nsrc) {
        ct_error_set(err, CT_ERR_NOTFOUND, "layer '%s': unknown bottom blob '%s' (bottom index %zu)",
                     l->name ? l->name : "", l->bottom[j], j);
        st = ct_srcpos_prefix(err, &l->base, "bottom", j);
        break;
      }
      bottom_src[i][2 * j] = last[k].layer;
      bottom_src[i][2 * j + 1] = last[k].top;
      t.count[tt_idx(&t, last[k].layer, last[k].top)]++;
    }
    for (size_t j = 0; j < l->n_top && st == CT_OK; j++) SET_LAST(l->top[j], i, (int)j);
    size_t last_loss = l->n_loss_weight < l->n_top ? l->n_loss_weight : l->n_top;
    for (size_t j = 0; j < last_loss && st == CT_OK; j++) {
      int k = ct_strmap_get(&index, l->top[j]);
      CT_ASSERT(k >= 0);
      int idx = tt_idx(&t, last[k].layer, last[k].top);
      t.loss[idx] = l->loss_weight[j];
      if (t.loss[idx] != 0.0f) t.count[idx]++;
    }
  }
#undef SET_LAST
  ct_strmap_free(&index);
  if (st != CT_OK) goto done;

  /* Rebuild the layer list with Split layers after each multiply-used top. */
  size_t out_cap = (size_t)nl + cells + 1, nout = 0;
  Caffe__LayerParameter **out = ct_xcalloc(out_cap, sizeof *out);
  for (size_t j = 0; j < net->n_input; j++) {
    int idx = tt_idx(&t, -1, (int)j);
    if (t.count[idx] > 1)
      out[nout++] = new_split_layer("input", net->input[j], (int)j, t.count[idx], t.loss[idx]);
  }
  for (int i = 0; i < nl; i++) {
    Caffe__LayerParameter *l = net->layer[i];
    out[nout++] = l;
    for (size_t j = 0; j < l->n_bottom; j++) {
      int sl = bottom_src[i][2 * j], stp = bottom_src[i][2 * j + 1];
      int idx = tt_idx(&t, sl, stp);
      if (t.count[idx] > 1) {
        const char *src_name = sl < 0 ? "input" : (net->layer[sl]->name ? net->layer[sl]->name : "");
        char *nb = split_blob_name(src_name, l->bottom[j], stp, t.next[idx]++);
        free(l->bottom[j]);
        l->bottom[j] = nb;
      }
    }
    for (size_t j = 0; j < l->n_top; j++) {
      int idx = tt_idx(&t, i, (int)j);
      if (t.count[idx] > 1) {
        out[nout++] = new_split_layer(l->name ? l->name : "", l->top[j], (int)j, t.count[idx],
                                      t.loss[idx]);
        if (t.loss[idx] != 0.0f) {
          free(l->loss_weight);
          l->loss_weight = NULL;
          l->n_loss_weight = 0;
          t.next[idx]++;
        }
      }
    }
  }
  free(net->layer);
  net->layer = out;
  net->n_layer = nout;
done:
  for (int i = 0; i <= nl; i++) free(bottom_src[i]);
  free(bottom_src);
  free(last);
  free(t.count);
  free(t.loss);
  free(t.next);
  return st;
}
