/* ContrastiveLoss: for pairs (a_n, b_n) of N x C x 1 x 1 features and a
 * similarity y_n (bottom 2, nonzero = similar), with d_n = ||a_n - b_n||:
 *   similar pairs:    d_n^2
 *   dissimilar pairs: max(margin - d_n, 0)^2, or with legacy_version
 *                     max(margin - d_n^2, 0)
 * summed and divided by 2N.  Bottoms 0 and 1 get gradients. */
#include <math.h>
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/contrastive_loss.h"
#include "layers/loss_common.h"
#include "math/math.h"

typedef struct {
  float margin;
  bool legacy;
  int num, channels;
  ct_tensor *diff;    /* (N, C): a - b */
  ct_tensor *dist_sq; /* (N): ||a - b||^2 */
  ct_loss_scratch gpu; /* GPU path only: value holds each pair's term */
} contrastive_priv;

/* Caffe reads the similarity with static_cast<int>: nonzero after truncation. */
static bool similar(float y) { return y >= 1.0f || y <= -1.0f; }

static ct_status contrastive_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  const Caffe__ContrastiveLossParameter *cp = CT_PARAM_OR_DEFAULT(
      l, contrastive_loss_param, CAFFE__CONTRASTIVE_LOSS_PARAMETER__INIT);
  contrastive_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->margin = cp->margin;
  p->legacy = cp->legacy_version;
  p->diff = ct_tensor_new(l->ctx->device, "contrastive.diff");
  p->dist_sq = ct_tensor_new(l->ctx->device, "contrastive.dist_sq");
  ct_loss_scratch_init(&p->gpu, l->ctx);
  return CT_OK;
}

/* Bottoms 0 and 1 in Caffe's legacy 4-d view: N x C x 1 x 1 (1 for missing
 * axes); bottom 1 with bottom 0's C (channels > 0). */
static ct_status check_pair_blob(const ct_tensor *t, int index, int channels, ct_error *err) {
  char s[256];
  bool ok = t->ndim <= 4 && ct_tensor_legacy_dim(t, 2) == 1 && ct_tensor_legacy_dim(t, 3) == 1;
  if (ok && channels > 0 && ct_tensor_legacy_dim(t, 1) != channels) ok = false;
  if (ok) return CT_OK;
  ct_tensor_shape_string(t, s, sizeof s);
  if (channels > 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "bottom %d must be N x %d x 1 x 1 like bottom 0, got shape %s", index,
                        channels, s);
  return ct_error_set(err, CT_ERR_INVALID, "bottom %d must be N x C x 1 x 1, got shape %s", index, s);
}

static ct_status contrastive_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  contrastive_priv *p = l->priv;
  CT_TRY(ct_loss_reshape(bottom, top, err));
  CT_TRY(check_pair_blob(bottom[0], 0, 0, err));
  p->num = bottom[0]->shape[0];
  p->channels = ct_tensor_legacy_dim(bottom[0], 1);
  CT_TRY(check_pair_blob(bottom[1], 1, p->channels, err));
  if (bottom[2]->ndim > 4 || bottom[2]->count != (size_t)p->num ||
      ct_tensor_legacy_dim(bottom[2], 1) != 1) {
    char s[256];
    return ct_error_set(err, CT_ERR_INVALID,
                        "the similarity bottom 2 must be N x 1 x 1 x 1 with N = %d, got shape %s",
                        p->num, ct_tensor_shape_string(bottom[2], s, sizeof s));
  }
  ct_tensor_reshape_or_die(p->diff, 2, (int[]){p->num, p->channels});
  ct_tensor_reshape_or_die(p->dist_sq, 1, (int[]){p->num});
  ct_loss_scratch_reshape(&p->gpu, (size_t)p->num);
  return CT_OK;
}

static ct_status contrastive_forward_cpu(ct_layer *l, ct_tensor *const *bottom,
                                         ct_tensor *const *top, ct_error *err) {
  contrastive_priv *p = l->priv;
  float *diff = p->diff->data, *dist_sq = p->dist_sq->data;
  const float *y = bottom[2]->data;
  ct_cpu_sub(bottom[0]->count, bottom[0]->data, bottom[1]->data, diff);
  double loss = 0;
  for (int n = 0; n < p->num; n++) {
    const float *d = diff + (size_t)n * p->channels;
    dist_sq[n] = (float)ct_cpu_dot((size_t)p->channels, d, d);
    if (similar(y[n])) {
      loss += dist_sq[n];
    } else if (p->legacy) {
      loss += fmaxf(p->margin - dist_sq[n], 0.0f);
    } else {
      float m = fmaxf(p->margin - sqrtf(dist_sq[n]), 0.0f);
      loss += m * m;
    }
  }
  ct_f32(top[0])[0] = (float)(loss / p->num / 2.0);
  return CT_OK;
}

static void contrastive_backward_cpu(ct_layer *l, ct_tensor *const *top,
                                     const bool *propagate_down, ct_tensor *const *bottom) {
  contrastive_priv *p = l->priv;
  const float *y = bottom[2]->data, *dist_sq = p->dist_sq->data;
  for (int i = 0; i < 2; i++) {
    if (!propagate_down[i]) continue;
    float alpha = (i == 0 ? 1.0f : -1.0f) * ct_f32_diff(top[0])[0] / (float)p->num;
    for (int n = 0; n < p->num; n++) {
      const float *d = ct_f32(p->diff) + (size_t)n * p->channels;
      float *dx = ct_f32_diff(bottom[i]) + (size_t)n * p->channels;
      float beta;
      if (similar(y[n])) {
        beta = alpha;
      } else if (p->legacy) {
        beta = p->margin - dist_sq[n] > 0.0f ? -alpha : 0.0f;
      } else {
        float dist = sqrtf(dist_sq[n]), m = p->margin - dist;
        /* Caffe's 1e-4 keeps the gradient finite for coincident points. */
        beta = m > 0.0f ? -alpha * m / (dist + 1e-4f) : 0.0f;
      }
      for (int c = 0; c < p->channels; c++) dx[c] = beta * d[c];
    }
  }
}

#ifdef CORTADO_HAVE_CUDA
static ct_status contrastive_forward_gpu(ct_layer *l, ct_tensor *const *bottom,
                                         ct_tensor *const *top, ct_error *err) {
  contrastive_priv *p = l->priv;
  ct_gpu_sub(l->ctx, bottom[0]->count, bottom[0]->data, bottom[1]->data, p->diff->data);
  ct_contrastive_forward_gpu(l->ctx, p->num, p->channels, p->diff->data, bottom[2]->data,
                             p->margin, p->legacy, p->dist_sq->data, p->gpu.value->data);
  ct_loss_finish f = {.norm = CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__BATCH_SIZE,
                      .outer = (size_t)p->num, .inner = 1, .scale = 0.5};
  ct_loss_finish_gpu(l->ctx, &p->gpu, (size_t)p->num, p->gpu.value->data, NULL, &f, top[0]->data);
  return CT_OK;
}

static void contrastive_backward_gpu(ct_layer *l, ct_tensor *const *top,
                                     const bool *propagate_down, ct_tensor *const *bottom) {
  contrastive_priv *p = l->priv;
  for (int i = 0; i < 2; i++) {
    if (!propagate_down[i]) continue;
    ct_contrastive_backward_gpu(l->ctx, p->num, p->channels, p->diff->data, p->dist_sq->data,
                                bottom[2]->data, p->margin, p->legacy, top[0]->diff,
                                (i == 0 ? 1.0f : -1.0f) / (float)p->num, bottom[i]->diff);
  }
}
#endif

static void contrastive_destroy(ct_layer *l) {
  contrastive_priv *p = l->priv;
  if (!p) return;
  ct_tensor_free(p->diff);
  ct_tensor_free(p->dist_sq);
  ct_loss_scratch_free(&p->gpu);
  free(p);
}

const ct_layer_ops ct_contrastive_loss_ops = {
    .type = "ContrastiveLoss",
    .min_bottoms = 3, .max_bottoms = 3, .min_tops = 1, .max_tops = 1,
    .flags = CT_LAYER_LOSS | CT_LAYER_AUTO_TOPS,
    .no_force_backward_bottoms = 1u << 2, /* the similarity */
    .setup = contrastive_setup,
    .reshape = contrastive_reshape,
    .forward_cpu = contrastive_forward_cpu,
    .backward_cpu = contrastive_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = contrastive_forward_gpu,
    .backward_gpu = contrastive_backward_gpu,
#endif
    .destroy = contrastive_destroy,
};
