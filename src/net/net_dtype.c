/* Element types of a net's layers: which type each layer computes in, and
 * Cast layers where a layer reads a blob of another type (NVCaffe's
 * forward_type / default_forward_type, Cortado's --precision).
 *
 * Each layer runs in the net's 16-bit type when its type declares it can on
 * this device (ct_layer_ops.dtypes_cpu / dtypes_gpu) and in float32
 * otherwise; losses, softmax, BatchNorm's statistics and accuracy stay
 * float32 because their types do not declare a 16-bit path.  The pass walks
 * the layers in order, knowing for each blob name the blob that now holds
 * its values and that blob's type, and renames a bottom of another type to
 * a Cast of it (one Cast per blob version and type, shared by all its
 * readers).  A layer working in place on a blob of another type works in
 * place on the Cast instead, and later readers of the name read that.
 * Every layer leaves with forward_type set to the type it runs in.  A type
 * with CT_LAYER_OWN_TOP_16 (BatchNorm) in place in its 16-bit channels-last
 * GPU form gets a top of its own, "blob@layer", which later readers of the
 * blob's name read (so that it need not copy its bottom aside). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/strmap.h"
#include "layers/layer.h"
#include "net/net.h"
#include "proto/srcpos.h"

ct_status ct_dtype_from_proto(Caffe__Type t, const char *what, ct_dtype *out, ct_error *err) {
  switch (t) {
    case CAFFE__TYPE__FLOAT: *out = CT_F32; return CT_OK;
    case CAFFE__TYPE__FLOAT16: *out = CT_F16; return CT_OK;
    case CAFFE__TYPE__BFLOAT16: *out = CT_BF16; return CT_OK;
    case CAFFE__TYPE__DOUBLE:
      LOG_INFO("%s DOUBLE: Cortado computes in float32 there", what);
      *out = CT_F32;
      return CT_OK;
    default:
      return ct_error_set(err, CT_ERR_UNSUPPORTED,
                          "%s %d: layers compute in FLOAT, FLOAT16 or BFLOAT16, not in integers",
                          what, (int)t);
  }
}

Caffe__Type ct_dtype_to_proto(ct_dtype t) {
  switch (t) {
    case CT_BF16: return CAFFE__TYPE__BFLOAT16;
    case CT_F16: return CAFFE__TYPE__FLOAT16;
    default: return CAFFE__TYPE__FLOAT;
  }
}

static const char *suffix(ct_dtype t) {
  switch (t) {
    case CT_BF16: return "bf16";
    case CT_F16: return "f16";
    default: return "f32";
  }
}

/* What a blob name holds now: the blob (its current name), its type and
 * its memory order. */
typedef struct {
  char *blob;   /* owned */
  ct_dtype type;
  ct_layout layout;
  int version;  /* changes whenever a layer writes the blob */
} holder;

typedef struct {
  Caffe__NetParameter *net;
  ct_strmap names;  /* blob name -> index in held */
  holder *held;
  char **keys;      /* owned keys of names and casts */
  size_t nheld, nkeys, cap_held, cap_keys;
  ct_strmap casts;  /* "blob\x01version\x01type\x01layout" -> index in held of the cast's top */
  ct_strmap made;   /* names of the casts' tops so far */
  int next_version;
  Caffe__LayerParameter **out;
  size_t nout;
  int ncasts, nhalf, nfloat, nnhwc;
} pass;

static char *keep_key(pass *p, char *key) {
  if (p->nkeys == p->cap_keys) {
    p->cap_keys = p->cap_keys ? 2 * p->cap_keys : 64;
    p->keys = ct_xrealloc(p->keys, p->cap_keys * sizeof *p->keys);
  }
  return p->keys[p->nkeys++] = key;
}

static int add_holder(pass *p, const char *blob, ct_dtype type, ct_layout layout) {
  if (p->nheld == p->cap_held) {
    p->cap_held = p->cap_held ? 2 * p->cap_held : 64;
    p->held = ct_xrealloc(p->held, p->cap_held * sizeof *p->held);
  }
  p->held[p->nheld] = (holder){ct_xstrdup(blob), type, layout, p->next_version++};
  return (int)p->nheld++;
}

/* Name `name` now holds blob (of type, in layout). */
static void set_name(pass *p, const char *name, const char *blob, ct_dtype type,
                     ct_layout layout) {
  int h = add_holder(p, blob, type, layout);
  int old = ct_strmap_get(&p->names, name);
  if (old < 0) ct_strmap_put(&p->names, keep_key(p, ct_xstrdup(name)), h);
  else ct_strmap_put(&p->names, name, h);
}

static char *dup_printf(const char *fmt, const char *a, const char *b) {
  size_t n = strlen(fmt) + strlen(a) + strlen(b) + 1;
  char *s = ct_xcalloc(n, 1);
  snprintf(s, n, fmt, a, b);
  return s;
}

/* base (owned, taken), or base#2, base#3, ... when a name the pass made
 * is base already; the name is recorded as made. */
static char *unique_name(pass *p, char *base) {
  char *name = ct_xstrdup(base);
  for (int k = 2; ct_strmap_get(&p->made, name) >= 0; k++) {
    char n[16];
    snprintf(n, sizeof n, "#%d", k);
    free(name);
    name = dup_printf("%s%s", base, n);
  }
  free(base);
  ct_strmap_put(&p->made, keep_key(p, ct_xstrdup(name)), 1);
  return name;
}

/* The Cast of the blob held by h into type and layout, made (and emitted
 * before the layer being placed) when this version of the blob has none
 * yet.  Its top is "blob@type" (NCHW) or "blob@type.nhwc", with "#2", "#3",
 * ... for later versions of the same blob. */
static const char *cast_of(pass *p, const holder *h, ct_dtype type, ct_layout layout) {
  char key[64];
  snprintf(key, sizeof key, "\x01%d\x01%d\x01%d", h->version, (int)type, (int)layout);
  char *full = dup_printf("%s%s", h->blob, key);
  int c = ct_strmap_get(&p->casts, full);
  if (c >= 0) {
    free(full);
    return p->held[c].blob;
  }
  Caffe__LayerParameter *l = ct_xcalloc(1, sizeof *l);
  caffe__layer_parameter__init(l);
  char *top = unique_name(p, dup_printf(layout == CT_NHWC ? "%s@%s.nhwc" : "%s@%s", h->blob,
                                         suffix(type)));
  l->name = ct_xstrdup(top);
  l->type = ct_xstrdup("Cast");
  l->n_bottom = 1;
  l->bottom = ct_xcalloc(1, sizeof(char *));
  l->bottom[0] = ct_xstrdup(h->blob);
  l->n_top = 1;
  l->top = ct_xcalloc(1, sizeof(char *));
  l->top[0] = top;
  l->has_forward_type = 1;
  l->forward_type = ct_dtype_to_proto(type);
  l->has_cortado_layout = 1;
  l->cortado_layout = layout == CT_NHWC ? CAFFE__LAYOUT__NHWC : CAFFE__LAYOUT__NCHW;
  p->out[p->nout++] = l;
  p->ncasts++;
  c = add_holder(p, top, type, layout);
  ct_strmap_put(&p->casts, keep_key(p, full), c);
  return p->held[c].blob;
}

static void replace_str(char **slot, const char *s) {
  char *n = ct_xstrdup(s);
  free(*slot);
  *slot = n;
}

/* The type layer l runs in, given the type wanted. */
static ct_dtype layer_type(pass *p, const Caffe__LayerParameter *l, int device, ct_dtype wanted) {
  const ct_layer_ops *ops = ct_layer_find(l->type ? l->type : "");
  if (!ops) return CT_F32; /* the build names the unknown type */
  unsigned mask = device == CT_DEVICE_CPU ? ops->dtypes_cpu : ops->dtypes_gpu;
  if (mask & CT_DTYPES_ANY) {
    if (l->n_bottom == 0) return CT_F32;
    int h = ct_strmap_get(&p->names, l->bottom[0]);
    return h >= 0 ? p->held[h].type : CT_F32;
  }
  return wanted != CT_F32 && (mask & CT_DTYPE_BIT(wanted)) ? wanted : CT_F32;
}

/* The memory order layer l runs in, given its type. */
static ct_layout layer_layout(pass *p, const Caffe__LayerParameter *l, int device, ct_dtype type,
                              bool quiet) {
  const ct_layer_ops *ops = ct_layer_find(l->type ? l->type : "");
  if (!ops) return CT_NCHW;
  const unsigned mask = device == CT_DEVICE_CPU ? ops->layouts_cpu : ops->layouts_gpu;
  if (mask & CT_LAYOUTS_ANY) {
    if (l->n_bottom == 0) return CT_NCHW;
    int h = ct_strmap_get(&p->names, l->bottom[0]);
    return h >= 0 ? p->held[h].layout : CT_NCHW;
  }
  const bool nhwc = type != CT_F32 && (mask & CT_LAYOUT_BIT(CT_NHWC));
  if (l->has_cortado_layout && l->cortado_layout == CAFFE__LAYOUT__NCHW) return CT_NCHW;
  if (l->has_cortado_layout && l->cortado_layout == CAFFE__LAYOUT__NHWC && !nhwc && !quiet)
    LOG_INFO("layer '%s' (%s) runs NCHW: its type has no NHWC path in %s on this device",
             l->name ? l->name : "", l->type ? l->type : "", ct_dtype_name(type));
  return nhwc ? CT_NHWC : CT_NCHW;
}

static void pass_free(pass *p) {
  for (size_t i = 0; i < p->nheld; i++) free(p->held[i].blob);
  for (size_t i = 0; i < p->nkeys; i++) free(p->keys[i]);
  free(p->held);
  free(p->keys);
  ct_strmap_free(&p->names);
  ct_strmap_free(&p->casts);
  ct_strmap_free(&p->made);
}

ct_status ct_net_plan_dtypes(Caffe__NetParameter *net, int device, ct_dtype precision,
                             bool precision_given, bool quiet, ct_error *err) {
  ct_dtype dflt = CT_F32;
  if (precision_given) dflt = precision;
  else if (net->has_default_forward_type)
    CT_TRY(ct_dtype_from_proto(net->default_forward_type, "default_forward_type", &dflt, err));
  bool any = dflt != CT_F32;
  for (size_t i = 0; i < net->n_layer && !any; i++)
    any = net->layer[i]->has_forward_type && net->layer[i]->forward_type != CAFFE__TYPE__FLOAT;
  if (!any) return CT_OK; /* all float32: the net as written */

  pass p = {.net = net, .names = CT_STRMAP_INIT, .casts = CT_STRMAP_INIT, .made = CT_STRMAP_INIT};
  p.out = ct_xcalloc(3 * net->n_layer + 1, sizeof *p.out);
  ct_status st = CT_OK;
  for (size_t i = 0; i < net->n_input; i++)
    set_name(&p, net->input[i], net->input[i], CT_F32, CT_NCHW);
  for (size_t i = 0; i < net->n_layer && st == CT_OK; i++) {
    Caffe__LayerParameter *l = net->layer[i];
    ct_dtype wanted = dflt;
    if (l->has_forward_type) {
      st = ct_dtype_from_proto(l->forward_type, "forward_type", &wanted, err);
      if (st != CT_OK) {
        ct_error_prefix(err, "layer '%s'", l->name ? l->name : "");
        st = ct_srcpos_prefix(err, &l->base, "forward_type", 0);
        break;
      }
    }
    const ct_dtype type = layer_type(&p, l, device, wanted);
    const ct_layout layout = layer_layout(&p, l, device, type, quiet);
    if (type != wanted && l->has_forward_type && !quiet)
      LOG_INFO("layer '%s' (%s) computes in %s: its type has no %s path on this device",
               l->name ? l->name : "", l->type ? l->type : "", ct_dtype_name(type),
               ct_dtype_name(wanted));
    /* the names of in-place tops, before bottoms are renamed */
    bool *in_place = ct_xcalloc(l->n_top + 1, sizeof(bool));
    for (size_t k = 0; k < l->n_top && k < l->n_bottom; k++)
      in_place[k] = strcmp(l->top[k], l->bottom[k]) == 0;
    for (size_t j = 0; j < l->n_bottom; j++) {
      int h = ct_strmap_get(&p.names, l->bottom[j]);
      if (h < 0) continue; /* the build names the unknown bottom */
      const holder *hd = &p.held[h];
      const char *blob =
          hd->type == type && hd->layout == layout ? hd->blob : cast_of(&p, hd, type, layout);
      if (strcmp(blob, l->bottom[j]) != 0) replace_str(&l->bottom[j], blob);
    }
    p.out[p.nout++] = l;
    const ct_layer_ops *ops = ct_layer_find(l->type ? l->type : "");
    const bool own_top = ops && (ops->flags & CT_LAYER_OWN_TOP_16) && type != CT_F32 &&
                         layout == CT_NHWC && device != CT_DEVICE_CPU;
    for (size_t k = 0; k < l->n_top; k++) {
      char *name = ct_xstrdup(l->top[k]);
      if (in_place[k] && own_top) {
        /* "blob@layer": readers of the name after it read this */
        free(l->top[k]);
        l->top[k] = unique_name(&p, dup_printf("%s@%s", name, l->name ? l->name : ""));
      } else if (in_place[k] && strcmp(l->top[k], l->bottom[k]) != 0) {
        replace_str(&l->top[k], l->bottom[k]);
      }
      set_name(&p, name, l->top[k], type, layout);
      free(name);
    }
    free(in_place);
    l->has_forward_type = 1;
    l->forward_type = ct_dtype_to_proto(type);
    l->has_cortado_layout = 1;
    l->cortado_layout = layout == CT_NHWC ? CAFFE__LAYOUT__NHWC : CAFFE__LAYOUT__NCHW;
    if (type == CT_F32) p.nfloat++;
    else p.nhalf++;
    if (layout == CT_NHWC) p.nnhwc++;
  }
  if (st == CT_OK) {
    free(net->layer);
    net->layer = p.out;
    net->n_layer = p.nout;
    if (!quiet)
      LOG_INFO("Precision %s: %d layers in %s (%d of them NHWC), %d in float32, %d casts",
               ct_dtype_name(dflt), p.nhalf, ct_dtype_name(dflt), p.nnhwc, p.nfloat, p.ncasts);
  } else {
    for (size_t i = 0; i < p.nout; i++) {
      bool original = false;
      for (size_t k = 0; k < net->n_layer && !original; k++) original = p.out[i] == net->layer[k];
      if (!original) protobuf_c_message_free_unpacked(&p.out[i]->base, NULL);
    }
    free(p.out);
  }
  pass_free(&p);
  return st;
}
