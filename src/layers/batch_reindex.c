/* BatchReindex: picks items of bottom 0's batch in the order bottom 1 (a
 * 1-axis blob of indices held as floats) gives, with repeats allowed:
 * top[j] = bottom0[index[j]].  Top shape: (len(index), bottom 0's other
 * axes).  An index outside the batch is a forward error.  Backward adds each
 * top item's diff into the item it came from; the indices get no gradient. */
#include <stdlib.h>

#include "layers/batch_reindex.h"
#include "layers/layer.h"
#include "layers/shape_util.h"
#include "math/math.h"

typedef struct {
  float *host_index; /* GPU: (len) host copy of the indices for checking */
  size_t host_cap;
} reindex_priv;

static ct_status reindex_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  l->priv = ct_xcalloc(1, sizeof(reindex_priv));
  return CT_OK;
}

static ct_status reindex_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  const ct_tensor *b = bottom[0], *idx = bottom[1];
  if (idx->ndim != 1)
    return ct_error_set(err, CT_ERR_INVALID, "bottom 1 (the indices) must have 1 axis, got %d",
                        idx->ndim);
  if (b->ndim < 1)
    return ct_error_set(err, CT_ERR_INVALID, "bottom 0 needs a batch axis, got a 0-axis blob");
  int shape[CT_MAX_AXES];
  shape[0] = idx->shape[0];
  for (int k = 1; k < b->ndim; k++) shape[k] = b->shape[k];
  CT_TRY(ct_tensor_reshape(top[0], b->ndim, shape, err));
  reindex_priv *r = l->priv;
  if (l->ctx->device != CT_DEVICE_CPU && r->host_cap < idx->count) {
    free(r->host_index);
    r->host_index = ct_xcalloc(idx->count, sizeof *r->host_index);
    r->host_cap = idx->count;
  }
  return CT_OK;
}

ct_status ct_batch_reindex_check(const float *index, size_t n, int batch, ct_error *err) {
  for (size_t j = 0; j < n; j++)
    if (!(index[j] >= 0.0f && index[j] < (float)batch))
      return ct_error_set(err, CT_ERR_INVALID,
                          "bottom 1 value %g at position %zu is not an index into a batch of %d",
                          (double)index[j], j, batch);
  return CT_OK;
}

static ct_status reindex_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  const ct_tensor *b = bottom[0], *idx = bottom[1];
  CT_TRY(ct_batch_reindex_check(idx->data, idx->count, b->shape[0], err));
  size_t inner = ct_tensor_count_range(b, 1, b->ndim);
  for (size_t j = 0; j < idx->count; j++)
    ct_cpu_copy(inner, ct_f32(b) + (size_t)ct_f32(idx)[j] * inner, ct_f32(top[0]) + j * inner);
  return CT_OK;
}

static void reindex_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                 ct_tensor *const *bottom) {
  const ct_tensor *idx = bottom[1];
  if (propagate_down[1]) ct_cpu_set(idx->count, 0.0f, idx->diff);
  if (!propagate_down[0]) return;
  ct_tensor *b = bottom[0];
  size_t inner = ct_tensor_count_range(b, 1, b->ndim);
  ct_cpu_set(b->count, 0.0f, b->diff);
  for (size_t j = 0; j < idx->count; j++)
    ct_cpu_axpy(inner, 1.0f, ct_f32_diff(top[0]) + j * inner, ct_f32_diff(b) + (size_t)ct_f32(idx)[j] * inner);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status reindex_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  reindex_priv *r = l->priv;
  const ct_tensor *b = bottom[0], *idx = bottom[1];
  ct_stream_download(l->ctx, r->host_index, idx->data, idx->count * sizeof(float));
  CT_TRY(ct_batch_reindex_check(r->host_index, idx->count, b->shape[0], err));
  ct_batch_reindex_forward_gpu(l->ctx, idx->count, ct_tensor_count_range(b, 1, b->ndim), idx->data,
                               b->data, top[0]->data);
  return CT_OK;
}

static void reindex_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                 ct_tensor *const *bottom) {
  const ct_tensor *idx = bottom[1];
  if (propagate_down[1]) ct_gpu_set(l->ctx, idx->count, 0.0f, idx->diff);
  if (!propagate_down[0]) return;
  ct_tensor *b = bottom[0];
  ct_batch_reindex_backward_gpu(l->ctx, b->shape[0], idx->count,
                                ct_tensor_count_range(b, 1, b->ndim), idx->data, top[0]->diff,
                                b->diff);
}
#endif

static void reindex_destroy(ct_layer *l) {
  reindex_priv *r = l->priv;
  if (!r) return;
  free(r->host_index);
  free(r);
}

const ct_layer_ops ct_batch_reindex_ops = {
    .type = "BatchReindex",
    .min_bottoms = 2, .max_bottoms = 2, .min_tops = 1, .max_tops = 1,
    .no_force_backward_bottoms = 1u << 1,
    .setup = reindex_setup,
    .reshape = reindex_reshape,
    .forward_cpu = reindex_forward_cpu,
    .backward_cpu = reindex_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = reindex_forward_gpu,
    .backward_gpu = reindex_backward_gpu,
#endif
    .destroy = reindex_destroy,
};
