/* Embed: a lookup table.  Each bottom value is an index in [0, input_dim)
 * (held as a float, truncated like Caffe's cast); the top gets that row of
 * the weights (input_dim, num_output), plus the bias (num_output) when
 * bias_term (default true).  Top shape: the bottom's shape + (num_output).
 * An index out of range is a forward error.  The indices get no gradient. */
#include <stdint.h>
#include <stdlib.h>

#include "layers/embed.h"
#include "layers/filler.h"
#include "layers/layer.h"
#include "layers/shape_util.h"
#include "math/math.h"

typedef struct {
  int K;      /* input_dim: rows of the table */
  int N;      /* num_output: row length */
  bool bias;
  int *scratch; /* GPU: one int for the index check */
} embed_priv;

static ct_status embed_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  const Caffe__EmbedParameter *p = CT_PARAM_OR_DEFAULT(l, embed_param, CAFFE__EMBED_PARAMETER__INIT);
  CT_TRY(ct_layer_check_count("embed_param.num_output", p->num_output, 1, err));
  CT_TRY(ct_layer_check_count("embed_param.input_dim", p->input_dim, 1, err));
  if ((uint64_t)p->num_output * p->input_dim > INT32_MAX)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the table (embed_param.input_dim %u x num_output %u) would have more than "
                        "2^31 - 1 values",
                        p->input_dim, p->num_output);
  embed_priv *e = ct_xcalloc(1, sizeof *e);
  l->priv = e;
  e->K = (int)p->input_dim;
  e->N = (int)p->num_output;
  e->bias = p->bias_term;
  int wshape[2] = {e->K, e->N};
  ct_tensor *w = ct_layer_add_param(l, 2, wshape);
  if (ct_filler_fill(p->weight_filler, w, &l->ctx->rng, err) != CT_OK)
    return ct_error_prefix(err, "embed_param.weight_filler");
  if (e->bias) {
    ct_tensor *b = ct_layer_add_param(l, 1, &e->N);
    if (ct_filler_fill(p->bias_filler, b, &l->ctx->rng, err) != CT_OK)
      return ct_error_prefix(err, "embed_param.bias_filler");
  }
  if (l->ctx->device != CT_DEVICE_CPU) e->scratch = ct_mem_alloc(l->ctx->device, sizeof(int));
  return CT_OK;
}

static ct_status embed_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  const embed_priv *e = l->priv;
  const ct_tensor *b = bottom[0];
  if (b->ndim + 1 > CT_MAX_AXES)
    return ct_error_set(err, CT_ERR_INVALID, "a %d-axis bottom leaves no room for the embedding axis",
                        b->ndim);
  int shape[CT_MAX_AXES];
  for (int k = 0; k < b->ndim; k++) shape[k] = b->shape[k];
  shape[b->ndim] = e->N;
  return ct_tensor_reshape(top[0], b->ndim + 1, shape, err);
}

/* The row of index value v, or -1 when v is out of [0, K) (NaN included). */
static int row_of(float v, int K) { return v > -1.0f && v < (float)K ? (int)v : -1; }

static ct_status index_error(size_t m, float v, int K, ct_error *err) {
  return ct_error_set(err, CT_ERR_INVALID, "index %g at position %zu is out of range [0, %d)",
                      (double)v, m, K);
}

static ct_status embed_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  const embed_priv *e = l->priv;
  const float *idx = bottom[0]->data, *w = l->params[0]->data;
  float *y = top[0]->data;
  size_t M = bottom[0]->count, N = (size_t)e->N;
  for (size_t m = 0; m < M; m++) {
    int row = row_of(idx[m], e->K);
    if (row < 0) return index_error(m, idx[m], e->K, err);
    ct_cpu_copy(N, w + (size_t)row * N, y + m * N);
    if (e->bias) ct_cpu_axpy(N, 1.0f, l->params[1]->data, y + m * N);
  }
  return CT_OK;
}

static void embed_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  const embed_priv *e = l->priv;
  const float *idx = bottom[0]->data, *dy = top[0]->diff;
  size_t M = bottom[0]->count, N = (size_t)e->N;
  if (propagate_down[0]) ct_cpu_set(M, 0.0f, bottom[0]->diff);
  if (l->param_propagate_down[0]) {
    float *dw = l->params[0]->diff;
    for (size_t m = 0; m < M; m++) {
      int row = row_of(idx[m], e->K);
      CT_ASSERT(row >= 0); /* forward checked the indices */
      ct_cpu_axpy(N, 1.0f, dy + m * N, dw + (size_t)row * N);
    }
  }
  if (e->bias && l->param_propagate_down[1])
    for (size_t m = 0; m < M; m++) ct_cpu_axpy(N, 1.0f, dy + m * N, l->params[1]->diff);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status embed_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  const embed_priv *e = l->priv;
  const float *idx = bottom[0]->data;
  size_t M = bottom[0]->count;
  long long bad = ct_embed_check_gpu(l->ctx, M, e->K, idx, e->scratch);
  if (bad >= 0) {
    float v;
    ct_stream_download(l->ctx, &v, idx + bad, sizeof v);
    return index_error((size_t)bad, v, e->K, err);
  }
  ct_embed_forward_gpu(l->ctx, M, e->N, idx, l->params[0]->data,
                       e->bias ? l->params[1]->data : NULL, top[0]->data);
  return CT_OK;
}

static void embed_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  const embed_priv *e = l->priv;
  size_t M = bottom[0]->count;
  if (propagate_down[0]) ct_gpu_set(l->ctx, M, 0.0f, bottom[0]->diff);
  if (l->param_propagate_down[0])
    ct_embed_backward_weight_gpu(l->ctx, M, e->N, bottom[0]->data, top[0]->diff,
                                 l->params[0]->diff);
  if (e->bias && l->param_propagate_down[1])
    ct_embed_backward_bias_gpu(l->ctx, M, e->N, top[0]->diff, l->params[1]->diff);
}
#endif

static void embed_destroy(ct_layer *l) {
  embed_priv *e = l->priv;
  if (!e) return;
  if (e->scratch) ct_mem_free(l->ctx->device, e->scratch);
  free(e);
}

const ct_layer_ops ct_embed_ops = {
    .type = "Embed",
    .flags = CT_LAYER_HOST_WORK | CT_LAYER_BACKWARD_FROM_BLOBS, /* the index check is read back every call */
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .no_force_backward_bottoms = 1u << 0,
    .setup = embed_setup,
    .reshape = embed_reshape,
    .forward_cpu = embed_forward_cpu,
    .backward_cpu = embed_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = embed_forward_gpu,
    .backward_gpu = embed_backward_gpu,
#endif
    .destroy = embed_destroy,
};
