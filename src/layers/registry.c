/* The one table of layer types.  Each group's types are listed in
 * list_<group>.inc as CT_LAYER("Type", ops_symbol) lines. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/strutil.h"
#include "layers/layer.h"
#include "proto/catalog.h"

#define CT_LAYER(type_name, ops) extern const ct_layer_ops ops;
#include "layers/list_core.inc"
#include "layers/list_vision.inc"
#include "layers/list_neuron.inc"
#include "layers/list_loss.inc"
#include "layers/list_structure.inc"
#include "layers/list_data.inc"
#include "layers/list_recurrent.inc"
#undef CT_LAYER

typedef struct {
  const char *type;
  const ct_layer_ops *ops;
} ct_layer_entry;

#define CT_LAYER(type_name, ops) {type_name, &ops},
static const ct_layer_entry k_layers[] = {
#include "layers/list_core.inc"
#include "layers/list_vision.inc"
#include "layers/list_neuron.inc"
#include "layers/list_loss.inc"
#include "layers/list_structure.inc"
#include "layers/list_data.inc"
#include "layers/list_recurrent.inc"
    {NULL, NULL}};
#undef CT_LAYER

#define CT_NUM_LAYERS ((int)(sizeof k_layers / sizeof k_layers[0]) - 1)

/* Types registered at run time (ct_layer_register): after the table, in
 * the order they came. */
#define CT_MAX_EXTRA_LAYERS 64
static pthread_mutex_t g_extra_mu = PTHREAD_MUTEX_INITIALIZER;
static const ct_layer_ops *g_extra[CT_MAX_EXTRA_LAYERS];
static int g_nextra;

static const ct_layer_ops *find_table(const char *type) {
  for (int i = 0; i < CT_NUM_LAYERS; i++)
    if (strcmp(k_layers[i].type, type) == 0) return k_layers[i].ops;
  return NULL;
}

const ct_layer_ops *ct_layer_find(const char *type) {
  const ct_layer_ops *ops = find_table(type);
  if (ops) return ops;
  pthread_mutex_lock(&g_extra_mu);
  for (int i = 0; i < g_nextra && !ops; i++)
    if (strcmp(g_extra[i]->type, type) == 0) ops = g_extra[i];
  pthread_mutex_unlock(&g_extra_mu);
  return ops;
}

ct_status ct_layer_register(const ct_layer_ops *ops, ct_error *err) {
  CT_ASSERT(ops && ops->type && ops->setup && ops->reshape && ops->forward_cpu);
  if (find_table(ops->type))
    return ct_error_set(err, CT_ERR_INVALID, "layer type '%s' is built in and cannot be registered again",
                        ops->type);
  ct_status st = CT_OK;
  pthread_mutex_lock(&g_extra_mu);
  int found = -1;
  for (int i = 0; i < g_nextra; i++)
    if (strcmp(g_extra[i]->type, ops->type) == 0) found = i;
  if (found >= 0 && g_extra[found] != ops)
    st = ct_error_set(err, CT_ERR_INVALID, "layer type '%s' is already registered", ops->type);
  else if (found < 0 && g_nextra == CT_MAX_EXTRA_LAYERS)
    st = ct_error_set(err, CT_ERR_INVALID, "layer type '%s': %d types are registered already (the most)",
                      ops->type, CT_MAX_EXTRA_LAYERS);
  else if (found < 0)
    g_extra[g_nextra++] = ops;
  pthread_mutex_unlock(&g_extra_mu);
  return st;
}

const char *const *ct_layer_types(int *n) {
  static const char *names[CT_NUM_LAYERS + CT_MAX_EXTRA_LAYERS + 1];
  pthread_mutex_lock(&g_extra_mu);
  for (int i = 0; i < CT_NUM_LAYERS; i++) names[i] = k_layers[i].type;
  for (int i = 0; i < g_nextra; i++) names[CT_NUM_LAYERS + i] = g_extra[i]->type;
  *n = CT_NUM_LAYERS + g_nextra;
  pthread_mutex_unlock(&g_extra_mu);
  return names;
}

size_t ct_layer_missing_caffe_types(const char **out, size_t cap) {
  size_t n_caffe, n = 0;
  const char *const *caffe = ct_caffe_layer_types(&n_caffe);
  for (size_t i = 0; i < n_caffe && n < cap; i++)
    if (!ct_layer_find(caffe[i])) out[n++] = caffe[i];
  return n;
}

ct_status ct_layer_lookup(const char *type, const ct_layer_ops **out, ct_error *err) {
  *out = ct_layer_find(type);
  if (*out) return CT_OK;
  if (ct_caffe_is_layer_type(type)) {
    const char *why = strcmp(type, "Python") == 0 ? " (its layers are Python classes run inside Caffe)" : "";
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "type '%s' is a Caffe layer type that Cortado does not implement yet%s; "
                        "docs/layers.md lists every Caffe type and its status",
                        type, why);
  }
  const char *fork = ct_caffe_fork_of_layer_type(type);
  if (fork)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "type '%s' is a layer type of %s, not of BVLC Caffe; Cortado does not implement it",
                        type, fork);
  int n;
  const char *const *names = ct_layer_types(&n);
  const char *near = ct_suggest(type, names, (size_t)n);
  if (near)
    return ct_error_set(err, CT_ERR_NOTFOUND, "unknown layer type '%s' (did you mean '%s'?)", type, near);
  char known[2048];
  size_t o = 0;
  known[0] = 0;
  for (int i = 0; i < n && o + 2 < sizeof known; i++)
    o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", i ? ", " : "", names[i]);
  return ct_error_set(err, CT_ERR_NOTFOUND, "unknown layer type '%s'; known types: %s", type, known);
}
