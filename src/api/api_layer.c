/* cortado.h: custom layer classes.  Each registered class becomes a layer
 * type (ct_layer_ops, flagged CT_LAYER_HOST_WORK) whose functions call the
 * class's.  The class sees blobs through cortado_blob handles: on the CPU
 * the net's own tensors; on a GPU host tensors (the staging below) that
 * are filled from the device before each call and copied back after it. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "layers/layer.h"

typedef struct api_class {
  ct_layer_ops ops; /* first: a layer's ops point at its class */
  cortado_layer_class cls;
  char type[96];
} api_class;

/* One side of a call: the handles the class sees, and on a GPU the host
 * tensors behind them. */
typedef struct api_side {
  int n;
  cortado_blob *h;   /* (n) handles */
  cortado_blob **hp; /* (n) pointers to them, as the class takes them */
  ct_tensor **host;  /* (n) GPU: host staging tensors, else NULL */
} api_side;

struct cortado_layer {
  ct_layer *l;
  const api_class *k;
  void *state;
  bool in_setup;
  bool tops_reshaped;          /* the last forward's reshape changed a top's shape */
  ct_status failure;           /* of a backward (which cannot return one) */
  ct_error failure_err;
  api_side bottom, top;
  cortado_blob params[CT_LAYER_MAX_PARAMS];
  ct_tensor *host_params[CT_LAYER_MAX_PARAMS]; /* GPU staging */
};

static bool on_gpu(const cortado_layer *cl) { return cl->l->ctx->device != CT_DEVICE_CPU; }

static void side_init(api_side *s, int n, ct_tensor *const *dev, bool gpu) {
  s->n = n;
  s->h = ct_xcalloc((size_t)n + 1, sizeof *s->h);
  s->hp = ct_xcalloc((size_t)n + 1, sizeof *s->hp);
  if (gpu) s->host = ct_xcalloc((size_t)n + 1, sizeof *s->host);
  for (int i = 0; i < n; i++) {
    ct_tensor *t = dev[i];
    if (gpu) t = s->host[i] = ct_tensor_new(CT_DEVICE_CPU, dev[i]->name);
    api_blob_init(&s->h[i], t, NULL);
    s->hp[i] = &s->h[i];
  }
}

static void side_free(api_side *s) {
  for (int i = 0; s->host && i < s->n; i++) ct_tensor_free(s->host[i]);
  free(s->host);
  free(s->hp);
  free(s->h);
}

/* GPU: the host tensor takes the device one's shape (and its values and
 * gradients when asked). */
static void stage_in(ct_tensor *host, const ct_tensor *dev, bool data, bool diff) {
  ct_tensor_reshape_like(host, dev);
  if (data && dev->data) ct_tensor_download(dev, host->data);
  if (diff) {
    ct_tensor_need_diff(host);
    if (dev->diff) ct_tensor_download_diff(dev, host->diff);
    else ct_tensor_zero_diff(host);
  }
}

static void side_in(api_side *s, ct_tensor *const *dev, bool data, bool diff) {
  if (!s->host) return;
  for (int i = 0; i < s->n; i++) stage_in(s->host[i], dev[i], data, diff);
}

/* GPU: the tops take the shapes the class gave their staging tensors. */
static void tops_take_shapes(cortado_layer *cl, ct_tensor *const *top) {
  for (int i = 0; cl->top.host && i < cl->top.n; i++) {
    const ct_tensor *h = cl->top.host[i];
    if (!ct_tensor_same_shape(h, top[i])) ct_tensor_reshape_like(top[i], h);
  }
}

static void params_in(cortado_layer *cl, bool diff) {
  ct_layer *l = cl->l;
  for (int i = 0; i < l->nparams; i++) {
    if (!on_gpu(cl) || cl->in_setup) {
      cl->params[i].t = l->params[i];
      continue;
    }
    if (!cl->host_params[i]) cl->host_params[i] = ct_tensor_new(CT_DEVICE_CPU, NULL);
    stage_in(cl->host_params[i], l->params[i], true, diff);
    cl->params[i].t = cl->host_params[i];
  }
}

static void params_out(cortado_layer *cl, bool diff) {
  ct_layer *l = cl->l;
  if (!on_gpu(cl) || cl->in_setup) return;
  for (int i = 0; i < l->nparams; i++) {
    ct_tensor_upload(l->params[i], cl->host_params[i]->data);
    if (diff) ct_tensor_upload_diff(l->params[i], cl->host_params[i]->diff);
  }
}

/* The class failed: its message (set with cortado_set_error) into err. */
static ct_status class_failed(cortado_status st, ct_error *err) {
  api_last_error((ct_status)st, err);
  return (ct_status)st;
}

/* ------------------------------------------------------------------ the ops */

static ct_status custom_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top, ct_error *err) {
  const api_class *k = (const api_class *)l->ops;
  cortado_layer *cl = ct_xcalloc(1, sizeof *cl);
  cl->l = l;
  cl->k = k;
  l->priv = cl;
  const bool gpu = l->ctx->device != CT_DEVICE_CPU;
  side_init(&cl->bottom, l->nbottom, bottom, gpu);
  side_init(&cl->top, l->ntop, top, gpu);
  size_t size = caffe__layer_parameter__get_packed_size(l->param);
  uint8_t *bytes = ct_xcalloc(size + 1, 1);
  caffe__layer_parameter__pack(l->param, bytes);
  cortado_status st = CORTADO_OK;
  if (k->cls.create) st = k->cls.create(k->cls.user, cl, bytes, size, &cl->state);
  free(bytes);
  if (st != CORTADO_OK) return class_failed(st, err);
  cl->in_setup = true;
  side_in(&cl->bottom, bottom, true, false);
  side_in(&cl->top, top, false, false);
  params_in(cl, false);
  if (k->cls.setup)
    st = k->cls.setup(cl->state, cl, cl->bottom.hp, cl->bottom.n, cl->top.hp, cl->top.n);
  cl->in_setup = false;
  if (st != CORTADO_OK) return class_failed(st, err);
  tops_take_shapes(cl, top);
  return CT_OK;
}

/* Calls the class's reshape on staged bottoms; records whether the tops'
 * shapes changed. */
static ct_status call_reshape(cortado_layer *cl, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  size_t n = (size_t)cl->top.n;
  ct_tensor *saved = ct_xcalloc(n + 1, sizeof *saved);
  for (size_t i = 0; i < n; i++) {
    saved[i].ndim = top[i]->ndim;
    memcpy(saved[i].shape, top[i]->shape, sizeof saved[i].shape);
    saved[i].count = top[i]->count;
  }
  side_in(&cl->top, top, false, false);
  cortado_status st = CORTADO_OK;
  if (cl->k->cls.reshape)
    st = cl->k->cls.reshape(cl->state, cl, cl->bottom.hp, cl->bottom.n, cl->top.hp, cl->top.n);
  if (st == CORTADO_OK) {
    tops_take_shapes(cl, top);
    for (size_t i = 0; i < n; i++)
      if (!ct_tensor_same_shape(&saved[i], top[i])) cl->tops_reshaped = true;
  }
  free(saved);
  return st == CORTADO_OK ? CT_OK : class_failed(st, err);
}

static ct_status custom_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top, ct_error *err) {
  cortado_layer *cl = l->priv;
  side_in(&cl->bottom, bottom, true, false);
  ct_status st = call_reshape(cl, bottom, top, err);
  cl->tops_reshaped = false; /* the net reshapes the layers above itself */
  return st;
}

/* Caffe's Layer::Forward: the class's reshape, then its forward. */
static ct_status custom_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top, ct_error *err) {
  cortado_layer *cl = l->priv;
  if (on_gpu(cl)) ct_context_sync(l->ctx);
  side_in(&cl->bottom, bottom, true, false);
  CT_TRY(call_reshape(cl, bottom, top, err));
  side_in(&cl->top, top, false, false);
  params_in(cl, false);
  cortado_status st = CORTADO_OK;
  if (cl->k->cls.forward)
    st = cl->k->cls.forward(cl->state, cl, cl->bottom.hp, cl->bottom.n, cl->top.hp, cl->top.n);
  if (st != CORTADO_OK) return class_failed(st, err);
  for (int i = 0; cl->top.host && i < cl->top.n; i++) ct_tensor_upload(top[i], cl->top.host[i]->data);
  params_out(cl, false);
  return CT_OK;
}

static void custom_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                            ct_tensor *const *bottom) {
  cortado_layer *cl = l->priv;
  if (!cl->k->cls.backward || cl->failure != CT_OK) return;
  if (on_gpu(cl)) ct_context_sync(l->ctx);
  side_in(&cl->top, top, true, true);
  side_in(&cl->bottom, bottom, true, true);
  params_in(cl, true);
  cortado_status st = cl->k->cls.backward(cl->state, cl, cl->top.hp, cl->top.n, propagate_down,
                                          cl->bottom.hp, cl->bottom.n);
  if (st != CORTADO_OK) {
    cl->failure = class_failed(st, &cl->failure_err);
    ct_error_prefix(&cl->failure_err, "layer '%s' (%s) backward", l->name, l->ops->type);
    return;
  }
  for (int i = 0; cl->bottom.host && i < cl->bottom.n; i++)
    if (propagate_down[i]) ct_tensor_upload_diff(bottom[i], cl->bottom.host[i]->diff);
  params_out(cl, true);
}

static void custom_destroy(ct_layer *l) {
  cortado_layer *cl = l->priv;
  if (!cl) return;
  if (cl->k->cls.destroy && cl->state) cl->k->cls.destroy(cl->state, cl);
  side_free(&cl->bottom);
  side_free(&cl->top);
  for (int i = 0; i < CT_LAYER_MAX_PARAMS; i++) ct_tensor_free(cl->host_params[i]);
  free(cl);
  l->priv = NULL;
}

/* ------------------------------------------------------------------ registry */

cortado_status cortado_layer_class_register(const cortado_layer_class *cls) {
  if (!cls->type || !*cls->type || strlen(cls->type) >= sizeof ((api_class *)0)->type)
    return cortado_set_error(CORTADO_ERR_INVALID, "a layer class needs a type name of 1 to %zu characters",
                             sizeof ((api_class *)0)->type - 1);
  int n;
  const char *const *names = ct_layer_types(&n);
  for (int i = 0; i < n; i++) {
    if (strcmp(names[i], cls->type) != 0) continue;
    const api_class *old = (const api_class *)ct_layer_find(cls->type);
    if (old->ops.setup == custom_setup && memcmp(&old->cls.create, &cls->create,
                                                 sizeof *cls - offsetof(cortado_layer_class, create)) == 0 &&
        old->cls.user == cls->user)
      return CORTADO_OK;
    break;
  }
  api_class *k = ct_xcalloc(1, sizeof *k);
  k->cls = *cls;
  snprintf(k->type, sizeof k->type, "%s", cls->type);
  k->cls.type = k->type;
  k->ops.type = k->type;
  k->ops.min_bottoms = 0;
  k->ops.max_bottoms = -1;
  k->ops.min_tops = 0;
  k->ops.max_tops = -1;
  k->ops.flags = CT_LAYER_HOST_WORK;
  k->ops.setup = custom_setup;
  k->ops.reshape = custom_reshape;
  k->ops.forward_cpu = custom_forward;
  k->ops.forward_gpu = custom_forward;
  if (cls->backward) {
    k->ops.backward_cpu = custom_backward;
    k->ops.backward_gpu = custom_backward;
  }
  k->ops.destroy = custom_destroy;
  ct_error err;
  if (ct_layer_register(&k->ops, &err) != CT_OK) {
    free(k);
    return api_fail(&err);
  }
  return CORTADO_OK;
}

static cortado_layer *custom_of(const ct_layer *l) {
  return l->ops->setup == custom_setup ? (cortado_layer *)l->priv : NULL;
}

bool api_custom_layer(ct_net *net, int i, bool *reshaped) {
  cortado_layer *cl = custom_of(net->layers[i]);
  if (!cl) return false;
  *reshaped = cl->tops_reshaped;
  cl->tops_reshaped = false;
  return true;
}

void *api_custom_state(const ct_net *net, int i) {
  cortado_layer *cl = custom_of(net->layers[i]);
  return cl ? cl->state : NULL;
}

ct_status api_custom_take_failure(ct_net *net, ct_error *err) {
  ct_status st = CT_OK;
  for (int i = net->nlayers - 1; i >= 0; i--) {
    cortado_layer *cl = custom_of(net->layers[i]);
    if (!cl || cl->failure == CT_OK) continue;
    if (st == CT_OK) {
      st = cl->failure;
      if (err) *err = cl->failure_err;
    }
    cl->failure = CT_OK;
  }
  return st;
}

/* ------------------------------------------------------------------ the class's view */

const char *cortado_layer_name(const cortado_layer *cl) { return cl->l->name; }
const char *cortado_layer_type(const cortado_layer *cl) { return cl->l->ops->type; }
cortado_phase cortado_layer_phase(const cortado_layer *cl) { return (cortado_phase)cl->l->phase; }
int cortado_layer_rank(const cortado_layer *cl) { return cl->l->ctx->rank; }
int cortado_layer_world(const cortado_layer *cl) { return cl->l->ctx->world > 0 ? cl->l->ctx->world : 1; }

cortado_blob *cortado_layer_add_param(cortado_layer *cl, int num_axes, const int *shape) {
  if (!cl->in_setup || cl->l->nparams >= CT_LAYER_MAX_PARAMS || num_axes < 0 || num_axes > CT_MAX_AXES)
    return NULL;
  for (int i = 0; i < num_axes; i++)
    if (shape[i] < 0) return NULL;
  int i = cl->l->nparams;
  ct_tensor *t = ct_layer_add_param(cl->l, num_axes, shape);
  api_blob_init(&cl->params[i], t, NULL);
  return &cl->params[i];
}

int cortado_layer_num_params(const cortado_layer *cl) { return cl->l->nparams; }

cortado_blob *cortado_layer_param(cortado_layer *cl, int i) {
  CT_ASSERTF(i >= 0 && i < cl->l->nparams, "param %d of layer '%s'", i, cl->l->name);
  if (!cl->params[i].t) api_blob_init(&cl->params[i], cl->l->params[i], NULL);
  return &cl->params[i];
}
