#include "layers/layer.h"
#include "layers/dummy_data.h"

#include <stdlib.h>
#include <string.h>

#include "math/math.h"

static ct_status check_counts(const ct_layer_ops *ops, const Caffe__LayerParameter *p, int nb,
                              int nt, ct_error *err) {
  const char *name = p->name ? p->name : "";
  if (nb < ops->min_bottoms || (ops->max_bottoms >= 0 && nb > ops->max_bottoms)) {
    if (ops->min_bottoms == ops->max_bottoms)
      return ct_error_set(err, CT_ERR_INVALID, "layer '%s' (%s) takes %d bottom blob%s, got %d", name,
                          ops->type, ops->min_bottoms, ops->min_bottoms == 1 ? "" : "s", nb);
    if (ops->max_bottoms < 0)
      return ct_error_set(err, CT_ERR_INVALID, "layer '%s' (%s) takes at least %d bottom blobs, got %d",
                          name, ops->type, ops->min_bottoms, nb);
    return ct_error_set(err, CT_ERR_INVALID, "layer '%s' (%s) takes %d to %d bottom blobs, got %d",
                        name, ops->type, ops->min_bottoms, ops->max_bottoms, nb);
  }
  bool auto_tops = (ops->flags & CT_LAYER_AUTO_TOPS) != 0;
  if ((nt < ops->min_tops && !auto_tops) || (ops->max_tops >= 0 && nt > ops->max_tops)) {
    if (ops->min_tops == ops->max_tops)
      return ct_error_set(err, CT_ERR_INVALID, "layer '%s' (%s) takes %d top blob%s, got %d", name,
                          ops->type, ops->min_tops, ops->min_tops == 1 ? "" : "s", nt);
    if (ops->max_tops < 0)
      return ct_error_set(err, CT_ERR_INVALID, "layer '%s' (%s) takes at least %d top blobs, got %d",
                          name, ops->type, ops->min_tops, nt);
    return ct_error_set(err, CT_ERR_INVALID, "layer '%s' (%s) takes %d to %d top blobs, got %d", name,
                        ops->type, ops->min_tops, ops->max_tops, nt);
  }
  if ((ops->flags & CT_LAYER_EQUAL_BOTTOM_TOP) && nb != nt)
    return ct_error_set(err, CT_ERR_INVALID,
                        "layer '%s' (%s) needs as many top blobs as bottom blobs, got %d and %d", name,
                        ops->type, nt, nb);
  return CT_OK;
}

ct_status ct_layer_create(const Caffe__LayerParameter *param, ct_phase phase, ct_context *ctx,
                          int nbottom, int ntop, ct_layer **out, ct_error *err) {
  *out = NULL;
  const ct_layer_ops *ops;
  if (!param->type || !*param->type)
    return ct_error_set(err, CT_ERR_INVALID, "layer '%s' has no type", param->name ? param->name : "");
  if (ct_layer_lookup(param->type, &ops, err) != CT_OK)
    return ct_error_prefix(err, "layer '%s'", param->name ? param->name : "");
  CT_TRY(check_counts(ops, param, nbottom, ntop, err));
  if (ctx->device != CT_DEVICE_CPU && !ops->forward_gpu)
    return ct_error_set(err, CT_ERR_UNSUPPORTED, "layer '%s': type %s has no GPU implementation yet",
                        param->name ? param->name : "", ops->type);
  ct_layer *l = ct_xcalloc(1, sizeof *l);
  l->ops = ops;
  l->param = param;
  l->name = param->name ? param->name : "";
  l->phase = phase;
  l->ctx = ctx;
  l->nbottom = nbottom;
  l->ntop = ntop;
  l->loss_weight = ct_xcalloc(ntop ? ntop : 1, sizeof *l->loss_weight);
  *out = l;
  return CT_OK;
}

ct_tensor *ct_layer_add_param(ct_layer *l, int ndim, const int *shape) {
  CT_ASSERT(l->nparams < CT_LAYER_MAX_PARAMS);
  ct_tensor *t = ct_tensor_new_shape(CT_DEVICE_CPU, NULL, ndim, shape, true);
  l->param_propagate_down[l->nparams] = true;
  l->params[l->nparams++] = t;
  return t;
}

ct_status ct_layer_check_count(const char *field, uint64_t value, uint64_t lo, ct_error *err) {
  if (value < lo)
    return ct_error_set(err, CT_ERR_INVALID, "%s is %llu (must be at least %llu)", field,
                        (unsigned long long)value, (unsigned long long)lo);
  if (value > CT_LAYER_PARAM_MAX)
    return ct_error_set(err, CT_ERR_INVALID, "%s %llu is too large (the limit is 2^30 = %u)", field,
                        (unsigned long long)value, CT_LAYER_PARAM_MAX);
  return CT_OK;
}

ct_status ct_layer_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                         ct_error *err) {
  ct_status s = l->ops->setup(l, bottom, top, err);
  if (s == CT_OK) s = l->ops->reshape(l, bottom, top, err);
  if (s == CT_OK && l->ctx->device != CT_DEVICE_CPU && l->ops->reshape_gpu)
    s = l->ops->reshape_gpu(l, bottom, top, err);
  if (s != CT_OK) return ct_error_prefix(err, "layer '%s' (%s)", l->name, l->ops->type);
  /* Loss weights: explicit per top, else 1 for a loss layer's first top. */
  const Caffe__LayerParameter *p = l->param;
  if (p->n_loss_weight > 0 && (int)p->n_loss_weight != l->ntop)
    return ct_error_set(err, CT_ERR_INVALID,
                        "layer '%s' (%s): %zu loss_weight values for %d top blobs", l->name,
                        l->ops->type, p->n_loss_weight, l->ntop);
  for (int i = 0; i < l->ntop; i++) {
    if (p->n_loss_weight > 0) l->loss_weight[i] = p->loss_weight[i];
    else l->loss_weight[i] = (i == 0 && (l->ops->flags & CT_LAYER_LOSS)) ? 1.0f : 0.0f;
  }
  return CT_OK;
}

ct_status ct_layer_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                           ct_error *err) {
  ct_status s = l->ops->reshape(l, bottom, top, err);
  if (s == CT_OK && l->ctx->device != CT_DEVICE_CPU && l->ops->reshape_gpu)
    s = l->ops->reshape_gpu(l, bottom, top, err);
  if (s != CT_OK) return ct_error_prefix(err, "layer '%s' (%s)", l->name, l->ops->type);
  return CT_OK;
}

ct_status ct_layer_forward_async(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  ct_status s;
  if (l->absorbed || l->forward_absorbed) return CT_OK;
  if (l->ctx->device == CT_DEVICE_CPU) s = l->ops->forward_cpu(l, bottom, top, err);
  else s = l->ops->forward_gpu(l, bottom, top, err);
  if (s != CT_OK) return ct_error_prefix(err, "layer '%s' (%s)", l->name, l->ops->type);
  return CT_OK;
}

ct_status ct_layer_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                           double *loss, ct_error *err) {
  CT_TRY(ct_layer_forward_async(l, bottom, top, err));
  CT_TRY(ct_context_take_checks(l->ctx, err));
  if (loss) {
    for (int i = 0; i < l->ntop; i++) {
      if (l->loss_weight[i] == 0.0f) continue;
      *loss += ct_dev_dot(l->ctx, top[i]->count, top[i]->data, top[i]->diff);
    }
  }
  return CT_OK;
}

void ct_layer_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                       ct_tensor *const *bottom) {
  if (l->absorbed || l->backward_absorbed) return;
  if (l->ctx->device == CT_DEVICE_CPU) {
    if (l->ops->backward_cpu) l->ops->backward_cpu(l, top, propagate_down, bottom);
  } else if (l->ops->backward_gpu) {
    l->ops->backward_gpu(l, top, propagate_down, bottom);
  }
}

bool ct_layer_prepare_async(ct_layer *l, ct_context *side, bool bottom_grad) {
  if (l->ctx->device == CT_DEVICE_CPU || !l->ops->prepare_gpu || l->absorbed ||
      l->forward_absorbed)
    return false;
  return l->ops->prepare_gpu(l, side, bottom_grad);
}

/* A DummyData whose refills draw on the host (and upload): its forward
 * cannot be captured.  Device-drawn refills (ct_dummy_filler_on_device)
 * can, on a GPU. */
static bool host_drawn_dummy_data(const ct_layer *l) {
  const Caffe__DummyDataParameter *p = l->param->dummy_data_param;
  if (!p) return false;
  for (size_t i = 0; i < p->n_data_filler; i++) {
    const Caffe__FillerParameter *f = p->data_filler[i];
    if (!f->type || strcmp(f->type, "constant") == 0) continue;
    if (l->ctx->device != CT_DEVICE_CPU && ct_dummy_filler_on_device(f)) continue;
    return true;
  }
  return false;
}

static bool stochastic_pooling(const ct_layer *l) {
  const Caffe__PoolingParameter *p = l->param->pooling_param;
  return p && p->has_pool && p->pool == CAFFE__POOLING_PARAMETER__POOL_METHOD__STOCHASTIC &&
         l->phase == CT_PHASE_TRAIN;
}

void ct_layer_backward_reads(const ct_layer *l, bool *bottoms, bool *tops) {
  for (int i = 0; i < l->nbottom; i++) bottoms[i] = true;
  for (int i = 0; i < l->ntop; i++) tops[i] = true;
  if (l->ops->backward_reads && !l->released) l->ops->backward_reads(l, bottoms, tops);
}

void ct_layer_reads_no_values(const ct_layer *l, bool *bottoms, bool *tops) {
  for (int i = 0; i < l->nbottom; i++) bottoms[i] = false;
  for (int i = 0; i < l->ntop; i++) tops[i] = false;
}

bool ct_layer_replayable(const ct_layer *l) {
  /* DummyData is a data layer without a source: on a GPU, with its
   * refills drawn on the device, a replay draws afresh */
  if (strcmp(l->ops->type, "DummyData") == 0) return !host_drawn_dummy_data(l);
  if (l->ops->flags & (CT_LAYER_HOST_WORK | CT_LAYER_DATA)) return false;
  /* Layers that draw (Dropout) are replayable: each takes its draw from the
   * device counter, so a replay draws afresh (see test_gpu_runtime_train:
   * replays give plain launches' bits).  Whether a Pooling layer draws on
   * the host depends on its parameters, not on its type. */
  const char *t = l->ops->type;
  if (strcmp(t, "Pooling") == 0 && stochastic_pooling(l)) return false;
  return true;
}

/* The type's state (GPU side first), at most once. */
static void destroy_state(ct_layer *l) {
  if (l->released) return;
  if (l->ops->destroy_gpu) l->ops->destroy_gpu(l);
  if (l->ops->destroy) l->ops->destroy(l);
  l->priv = l->gpu_priv = NULL;
}

void ct_layer_release(ct_layer *l) {
  destroy_state(l);
  l->released = true;
  for (int i = 0; i < l->nparams; i++) ct_tensor_drop_storage(l->params[i]);
}

void ct_layer_free(ct_layer *l) {
  if (!l) return;
  destroy_state(l);
  for (int i = 0; i < l->nparams; i++) ct_tensor_free(l->params[i]);
  free(l->loss_weight);
  free(l);
}

bool ct_layer_keeps_microbatches(const ct_layer *l) {
  const ct_layer_ops *o = l->ops;
  if (l->absorbed || !o->backward_cpu || (o->flags & (CT_LAYER_NO_BACKWARD | CT_LAYER_BACKWARD_FROM_BLOBS)))
    return true;
  return o->backward_state || o->restored;
}

int ct_layer_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  if (!l->ops->backward_state || l->released) return 0;
  const int n = l->ops->backward_state(l, out, cap);
  CT_ASSERT(n >= 0 && n <= cap);
  return n;
}
