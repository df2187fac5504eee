/* InfogainLoss: SoftmaxWithLoss weighted by an L x L "information gain"
 * matrix H: at each position with label y, the loss is
 * -sum_l H[y, l] log(max(p_l, 1e-20)), with p the softmax over
 * infogain_loss_param.axis.  H is bottom 2 when given, else the BlobProto
 * file infogain_loss_param.source.  ignore_label and normalization as in
 * SoftmaxWithLoss (the legacy normalize is refused, as in Caffe); an
 * optional top 1 receives the probabilities. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/infogain_loss.h"
#include "layers/layer.h"
#include "layers/loss_common.h"
#include "layers/softmax.h"
#include "math/math.h"

typedef struct {
  ct_loss_norm norm;
  bool has_ignore;
  int ignore_label;
  int axis;
  size_t outer, inner;
  int nlabels;
  ct_tensor *prob;     /* like bottom 0: the softmax */
  ct_tensor *scratch;  /* (inner) on the host, CPU path only */
  ct_tensor *h;        /* H read from source (NULL when H is bottom 2) */
  float *h_host;       /* the same values on the host */
  ct_tensor *sum_rows; /* (L): row sums of H */
  long valid;          /* positions counted by the last forward */
  ct_loss_scratch gpu; /* GPU path only */
} infogain_priv;

/* Reads the values of a binary BlobProto file into a malloc'd array. */
static ct_status read_blob_file(const char *path, float **out, size_t *count, ct_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return ct_error_set(err, CT_ERR_IO, "%s: %s", path, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = ct_xrealloc(NULL, cap);
  for (;;) {
    if (len == cap) buf = ct_xrealloc(buf, cap *= 2);
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  bool read_error = ferror(f) != 0;
  fclose(f);
  if (read_error) {
    free(buf);
    return ct_error_set(err, CT_ERR_IO, "%s: read error", path);
  }
  Caffe__BlobProto *bp = caffe__blob_proto__unpack(NULL, len, buf);
  free(buf);
  if (!bp) return ct_error_set(err, CT_ERR_PARSE, "%s: not a binary BlobProto", path);
  *count = bp->n_data ? bp->n_data : bp->n_double_data;
  *out = ct_xcalloc(*count ? *count : 1, sizeof **out);
  for (size_t i = 0; i < *count; i++)
    (*out)[i] = bp->n_data ? bp->data[i] : (float)bp->double_data[i];
  caffe__blob_proto__free_unpacked(bp, NULL);
  return CT_OK;
}

static void sum_rows_host(const float *h, int n, float *sums) {
  for (int r = 0; r < n; r++) {
    float s = 0.0f;
    for (int c = 0; c < n; c++) s += h[(size_t)r * n + c];
    sums[r] = s;
  }
}

static ct_status infogain_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  const Caffe__LossParameter *lp = CT_PARAM_OR_DEFAULT(l, loss_param, CAFFE__LOSS_PARAMETER__INIT);
  const Caffe__InfogainLossParameter *ip =
      CT_PARAM_OR_DEFAULT(l, infogain_loss_param, CAFFE__INFOGAIN_LOSS_PARAMETER__INIT);
  if (lp->has_normalize)
    return ct_error_set(err, CT_ERR_INVALID,
                        "loss_param.normalize is deprecated for InfogainLoss; use "
                        "loss_param.normalization");
  if (l->nbottom < 3 && (!ip->source || !*ip->source))
    return ct_error_set(err, CT_ERR_INVALID,
                        "infogain_loss_param.source must name the infogain matrix file when there "
                        "is no third bottom");
  infogain_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->norm = ct_loss_normalization(lp, CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__VALID);
  p->has_ignore = lp->has_ignore_label;
  p->ignore_label = lp->ignore_label;
  p->prob = ct_tensor_new(l->ctx->device, "infogain.prob");
  p->sum_rows = ct_tensor_new(l->ctx->device, "infogain.sum_rows");
  if (l->ctx->device == CT_DEVICE_CPU) p->scratch = ct_tensor_new(CT_DEVICE_CPU, "infogain.scratch");
  ct_loss_scratch_init(&p->gpu, l->ctx);
  ct_loss_scratch_add_check(&p->gpu, l->ctx, l->name, l->ops->type);
  if (l->nbottom < 3) {
    size_t n = 0;
    if (read_blob_file(ip->source, &p->h_host, &n, err) != CT_OK)
      return ct_error_prefix(err, "infogain_loss_param.source");
    p->h = ct_tensor_new_shape(l->ctx->device, "infogain.H", 1, (int[]){(int)n}, false);
    ct_tensor_upload(p->h, p->h_host);
  }
  return CT_OK;
}

static ct_status infogain_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  infogain_priv *p = l->priv;
  const Caffe__InfogainLossParameter *ip =
      CT_PARAM_OR_DEFAULT(l, infogain_loss_param, CAFFE__INFOGAIN_LOSS_PARAMETER__INIT);
  char s[256];
  CT_TRY(ct_loss_reshape(bottom, top, err));
  if (ct_tensor_canonical_axis(bottom[0], ip->axis, &p->axis, err) != CT_OK)
    return ct_error_prefix(err, "infogain_loss_param.axis");
  p->outer = ct_tensor_count_range(bottom[0], 0, p->axis);
  p->nlabels = bottom[0]->shape[p->axis];
  p->inner = ct_tensor_count_range(bottom[0], p->axis + 1, bottom[0]->ndim);
  if (p->outer * p->inner != bottom[1]->count)
    return ct_error_set(err, CT_ERR_INVALID,
                        "number of labels must match number of predictions: outer*inner = %zu*%zu = "
                        "%zu positions for prediction shape %s with class axis %d, but the label "
                        "blob has %zu values",
                        p->outer, p->inner, p->outer * p->inner,
                        ct_tensor_shape_string(bottom[0], s, sizeof s), p->axis, bottom[1]->count);
  const ct_tensor *h = l->nbottom >= 3 ? bottom[2] : p->h;
  size_t want = (size_t)p->nlabels * (size_t)p->nlabels;
  if (h->count != want)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the infogain matrix H must have %d x %d = %zu values for %d classes, got "
                        "shape %s%s",
                        p->nlabels, p->nlabels, want, p->nlabels,
                        ct_tensor_shape_string(h, s, sizeof s),
                        l->nbottom >= 3 ? " in bottom 2" : " from infogain_loss_param.source");
  ct_tensor_reshape_like(p->prob, bottom[0]);
  ct_tensor_reshape_or_die(p->sum_rows, 1, (int[]){p->nlabels});
  if (p->scratch) ct_tensor_reshape_or_die(p->scratch, 1, (int[]){(int)p->inner});
  ct_loss_scratch_reshape(&p->gpu, p->outer * p->inner);
  if (p->h_host) {
    /* A fixed H: its row sums once. */
    float *sums = ct_xcalloc((size_t)p->nlabels, sizeof *sums);
    sum_rows_host(p->h_host, p->nlabels, sums);
    ct_tensor_upload(p->sum_rows, sums);
    free(sums);
  }
  if (l->ntop >= 2) ct_tensor_reshape_like(top[1], bottom[0]);
  return CT_OK;
}

static ct_status infogain_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                      ct_error *err) {
  infogain_priv *p = l->priv;
  const float *label = bottom[1]->data;
  const float *h = l->nbottom >= 3 ? bottom[2]->data : p->h->data;
  CT_TRY(ct_loss_check_labels_host(label, p->outer * p->inner, p->nlabels, p->has_ignore,
                                   p->ignore_label, err));
  ct_softmax_cpu(p->outer, p->nlabels, p->inner, bottom[0]->data, p->prob->data, p->scratch->data);
  const float *prob = p->prob->data;
  size_t inner = p->inner, dim = (size_t)p->nlabels * inner;
  double loss = 0;
  long valid = 0;
  for (size_t i = 0; i < p->outer; i++) {
    for (size_t k = 0; k < inner; k++) {
      int y = (int)label[i * inner + k];
      if (p->has_ignore && y == p->ignore_label) continue;
      const float *hrow = h + (size_t)y * p->nlabels;
      for (int c = 0; c < p->nlabels; c++)
        loss -= hrow[c] * log(fmaxf(prob[i * dim + (size_t)c * inner + k], CT_LOG_THRESHOLD));
      valid++;
    }
  }
  p->valid = valid;
  ct_f32(top[0])[0] = (float)(loss / ct_loss_normalizer(p->norm, p->outer, inner, valid));
  if (l->ntop >= 2) ct_cpu_copy(p->prob->count, prob, top[1]->data);
  return CT_OK;
}

static void infogain_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                  ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  infogain_priv *p = l->priv;
  const float *label = bottom[1]->data, *prob = p->prob->data;
  const float *h = l->nbottom >= 3 ? bottom[2]->data : p->h->data;
  /* H from a bottom may change between iterations: sum its rows each time. */
  if (l->nbottom >= 3) sum_rows_host(h, p->nlabels, p->sum_rows->data);
  const float *sums = p->sum_rows->data;
  float *dx = bottom[0]->diff;
  size_t inner = p->inner, dim = (size_t)p->nlabels * inner;
  float scale =
      (float)(ct_f32_diff(top[0])[0] / ct_loss_normalizer(p->norm, p->outer, inner, p->valid));
  for (size_t i = 0; i < p->outer; i++) {
    for (size_t k = 0; k < inner; k++) {
      int y = (int)label[i * inner + k];
      bool skip = p->has_ignore && y == p->ignore_label;
      CT_ASSERT(skip || (y >= 0 && y < p->nlabels)); /* checked by forward */
      for (int c = 0; c < p->nlabels; c++) {
        size_t j = i * dim + (size_t)c * inner + k;
        dx[j] = skip ? 0.0f : scale * (prob[j] * sums[y] - h[(size_t)y * p->nlabels + c]);
      }
    }
  }
}

#ifdef CORTADO_HAVE_CUDA
static ct_status infogain_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                      ct_error *err) {
  infogain_priv *p = l->priv;
  const float *h = l->nbottom >= 3 ? bottom[2]->data : p->h->data;
  size_t n = p->outer * p->inner;
  ct_softmax_forward_gpu(l->ctx, p->outer, p->nlabels, p->inner, bottom[0]->data, p->prob->data);
  ct_infogain_forward_gpu(l->ctx, p->outer, p->nlabels, p->inner, p->prob->data, bottom[1]->data,
                          h, p->has_ignore, p->ignore_label, p->gpu.value->data,
                          p->gpu.flag->data);
  ct_loss_finish f = {.norm = p->norm, .outer = p->outer, .inner = p->inner, .scale = 1.0,
                      .label = bottom[1], .nclass = p->nlabels, .has_ignore = p->has_ignore,
                      .ignore_label = p->ignore_label};
  ct_loss_finish_gpu(l->ctx, &p->gpu, n, p->gpu.value->data, p->gpu.flag->data, &f, top[0]->data);
  if (l->ntop >= 2) ct_gpu_copy(l->ctx, p->prob->count, p->prob->data, top[1]->data);
  return CT_OK;
}

static void infogain_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                  ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  infogain_priv *p = l->priv;
  const float *h = l->nbottom >= 3 ? bottom[2]->data : p->h->data;
  if (l->nbottom >= 3) ct_infogain_sum_rows_gpu(l->ctx, p->nlabels, h, p->sum_rows->data);
  ct_infogain_backward_gpu(l->ctx, p->outer, p->nlabels, p->inner, p->prob->data, bottom[1]->data,
                           h, p->sum_rows->data, p->has_ignore, p->ignore_label, top[0]->diff,
                           p->gpu.inv_norm->data, bottom[0]->diff);
}
#endif

static void infogain_destroy(ct_layer *l) {
  infogain_priv *p = l->priv;
  if (!p) return;
  ct_tensor_free(p->prob);
  ct_tensor_free(p->scratch);
  ct_tensor_free(p->h);
  ct_tensor_free(p->sum_rows);
  free(p->h_host);
  ct_loss_scratch_free(&p->gpu);
  free(p);
}

const ct_layer_ops ct_infogain_loss_ops = {
    .type = "InfogainLoss",
    .min_bottoms = 2, .max_bottoms = 3, .min_tops = 1, .max_tops = 2,
    .flags = CT_LAYER_LOSS | CT_LAYER_AUTO_TOPS,
    .no_force_backward_bottoms = (1u << 1) | (1u << 2), /* labels and H */
    .setup = infogain_setup,
    .reshape = infogain_reshape,
    .forward_cpu = infogain_forward_cpu,
    .backward_cpu = infogain_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = infogain_forward_gpu,
    .backward_gpu = infogain_backward_gpu,
#endif
    .destroy = infogain_destroy,
};
