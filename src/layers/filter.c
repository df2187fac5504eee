/* Filter: keeps the batch items whose selector value is non-zero.  The last
 * bottom is the selector (N, 1, 1, ...); the others (each with batch N) are
 * filtered into the tops, one top per filtered bottom, in order.  The number
 * of items kept depends on the selector's values, so the tops are reshaped
 * in forward too (Caffe reshapes before every forward); the first reshape
 * keeps the whole batch so that later ones never need more storage.
 * Backward copies the kept items' diffs back and zeroes the others; the
 * selector gets no gradient. */
#include <stdlib.h>

#include "layers/filter.h"
#include "layers/layer.h"
#include "layers/shape_util.h"
#include "math/math.h"

typedef struct {
  int *keep;       /* (nkeep) batch items kept, increasing */
  int nkeep;
  int cap;         /* entries allocated in keep and host_sel */
  float *host_sel; /* GPU: host copy of the selector */
  int *keep_dev;   /* GPU: (cap) device copy of keep */
  bool first;      /* the first reshape keeps every item */
} filter_priv;

static ct_status filter_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  if (l->ntop != l->nbottom - 1)
    return ct_error_set(err, CT_ERR_INVALID,
                        "needs one top per filtered bottom: %d bottoms (the last is the selector) "
                        "but %d tops",
                        l->nbottom, l->ntop);
  filter_priv *f = ct_xcalloc(1, sizeof *f);
  f->first = true;
  l->priv = f;
  return CT_OK;
}

/* Reads the selector and lists the items to keep. */
static void select_items(ct_layer *l, const ct_tensor *sel) {
  filter_priv *f = l->priv;
  const float *s = sel->data;
  if (sel->device != CT_DEVICE_CPU) {
    ct_stream_download(l->ctx, f->host_sel, sel->data, (size_t)sel->shape[0] * sizeof(float));
    s = f->host_sel;
  }
  f->nkeep = 0;
  for (int n = 0; n < sel->shape[0]; n++)
    if (s[n] != 0.0f) f->keep[f->nkeep++] = n;
  if (f->keep_dev) ct_stream_upload(l->ctx, f->keep_dev, f->keep, (size_t)f->nkeep * sizeof(int));
}

static ct_status shape_tops(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top, int num,
                            ct_error *err) {
  for (int t = 0; t < l->ntop; t++) {
    int shape[CT_MAX_AXES];
    for (int k = 0; k < bottom[t]->ndim; k++) shape[k] = bottom[t]->shape[k];
    shape[0] = num;
    CT_TRY(ct_tensor_reshape(top[t], bottom[t]->ndim, shape, err));
  }
  return CT_OK;
}

static ct_status filter_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  filter_priv *f = l->priv;
  const ct_tensor *sel = bottom[l->nbottom - 1];
  if (sel->ndim < 1)
    return ct_error_set(err, CT_ERR_INVALID, "the selector (bottom %d) needs a batch axis",
                        l->nbottom - 1);
  for (int k = 1; k < sel->ndim; k++)
    if (sel->shape[k] != 1)
      return ct_error_set(err, CT_ERR_INVALID,
                          "the selector (bottom %d) must be 1 on every axis after the first; axis "
                          "%d is %d",
                          l->nbottom - 1, k, sel->shape[k]);
  for (int i = 0; i < l->nbottom - 1; i++)
    if (bottom[i]->ndim < 1 || bottom[i]->shape[0] != sel->shape[0])
      return ct_error_set(err, CT_ERR_INVALID,
                          "bottom %d must have the selector's batch size %d on its first axis", i,
                          sel->shape[0]);
  if (f->cap < sel->shape[0]) {
    free(f->keep);
    free(f->host_sel);
    f->cap = sel->shape[0];
    f->keep = ct_xcalloc((size_t)f->cap + 1, sizeof *f->keep);
    f->host_sel = ct_xcalloc((size_t)f->cap + 1, sizeof *f->host_sel);
    if (l->ctx->device != CT_DEVICE_CPU) {
      /* Stream-ordered, so that no kernel still reads the old array. */
      ct_context_sync(l->ctx);
      if (f->keep_dev) ct_mem_free(l->ctx->device, f->keep_dev);
      f->keep_dev = ct_mem_alloc(l->ctx->device, ((size_t)f->cap + 1) * sizeof(int));
    }
  }
  if (f->first) {
    f->first = false;
    f->nkeep = 0;
    return shape_tops(l, bottom, top, sel->shape[0], err);
  }
  select_items(l, sel);
  return shape_tops(l, bottom, top, f->nkeep, err);
}

static ct_status filter_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                    ct_error *err) {
  filter_priv *f = l->priv;
  select_items(l, bottom[l->nbottom - 1]);
  CT_TRY(shape_tops(l, bottom, top, f->nkeep, err));
  for (int t = 0; t < l->ntop; t++) {
    size_t dim = ct_tensor_count_range(bottom[t], 1, bottom[t]->ndim);
    for (int j = 0; j < f->nkeep; j++)
      ct_cpu_copy(dim, bottom[t]->data + (size_t)f->keep[j] * dim, top[t]->data + (size_t)j * dim);
  }
  return CT_OK;
}

static void filter_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                ct_tensor *const *bottom) {
  filter_priv *f = l->priv;
  int last = l->nbottom - 1;
  if (propagate_down[last]) ct_cpu_set(bottom[last]->count, 0.0f, bottom[last]->diff);
  for (int t = 0; t < l->ntop; t++) {
    if (!propagate_down[t]) continue;
    size_t dim = ct_tensor_count_range(bottom[t], 1, bottom[t]->ndim);
    ct_cpu_set(bottom[t]->count, 0.0f, bottom[t]->diff);
    for (int j = 0; j < f->nkeep; j++)
      ct_cpu_copy(dim, top[t]->diff + (size_t)j * dim, bottom[t]->diff + (size_t)f->keep[j] * dim);
  }
}

#ifdef CORTADO_HAVE_CUDA
static ct_status filter_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                    ct_error *err) {
  filter_priv *f = l->priv;
  select_items(l, bottom[l->nbottom - 1]);
  CT_TRY(shape_tops(l, bottom, top, f->nkeep, err));
  for (int t = 0; t < l->ntop; t++)
    ct_filter_forward_gpu(l->ctx, f->nkeep, ct_tensor_count_range(bottom[t], 1, bottom[t]->ndim),
                          f->keep_dev, bottom[t]->data, top[t]->data);
  return CT_OK;
}

static void filter_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                ct_tensor *const *bottom) {
  filter_priv *f = l->priv;
  int last = l->nbottom - 1;
  if (propagate_down[last]) ct_gpu_set(l->ctx, bottom[last]->count, 0.0f, bottom[last]->diff);
  for (int t = 0; t < l->ntop; t++) {
    if (!propagate_down[t]) continue;
    ct_gpu_set(l->ctx, bottom[t]->count, 0.0f, bottom[t]->diff);
    ct_filter_backward_gpu(l->ctx, f->nkeep, ct_tensor_count_range(bottom[t], 1, bottom[t]->ndim),
                           f->keep_dev, top[t]->diff, bottom[t]->diff);
  }
}
#endif

static void filter_destroy(ct_layer *l) {
  filter_priv *f = l->priv;
  if (!f) return;
  if (f->keep_dev) ct_mem_free(l->ctx->device, f->keep_dev);
  free(f->keep);
  free(f->host_sel);
  free(f);
}

const ct_layer_ops ct_filter_ops = {
    .type = "Filter",
    .flags = CT_LAYER_HOST_WORK, /* the tops' shapes come from the selector's values */
    .min_bottoms = 2, .max_bottoms = -1, .min_tops = 1, .max_tops = -1,
    .setup = filter_setup,
    .reshape = filter_reshape,
    .forward_cpu = filter_forward_cpu,
    .backward_cpu = filter_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = filter_forward_gpu,
    .backward_gpu = filter_backward_gpu,
#endif
    .destroy = filter_destroy,
};
