/* LRN, local response normalisation of (N, C, H, W), both of Caffe's regions
 * as one formula:
 *     scale = k' + a' * S(x^2),   y = x * scale^-beta,
 *     dx = dy * scale^-beta - 2 a' beta x * S(dy * y / scale)
 * where S sums over the window around each position:
 *  - ACROSS_CHANNELS: local_size neighbouring channels, k' = k,
 *    a' = alpha / local_size;
 *  - WITHIN_CHANNEL: a local_size x local_size spatial box clipped to the
 *    image, k' = 1, a' = alpha / local_size^2 (what Caffe's split / square /
 *    average pool with pad (local_size-1)/2 / power / product chain computes:
 *    that pool always divides by local_size^2 here, and Caffe ignores k).
 * The windows are symmetric, so the backward sum uses the same S. */
#include "layers/lrn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "layers/layer.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/lrn_cudnn.h"
#endif

typedef struct lrn_state {
  ct_lrn_geom g;
  ct_tensor *scale;  /* (N, C, H, W) from forward, for backward */
  ct_tensor *tmp;    /* (N, C, H, W) squares in forward, ratios in backward */
} lrn_state;

static ct_status lrn_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                           ct_error *err) {
  const Caffe__LRNParameter *p = CT_PARAM_OR_DEFAULT(l, lrn_param, CAFFE__LRNPARAMETER__INIT);
  lrn_state *s = ct_xcalloc(1, sizeof *s);
  l->priv = s;
  s->scale = ct_tensor_new(l->ctx->device, NULL);
  s->tmp = ct_tensor_new(l->ctx->device, NULL);
  if (p->local_size > (1u << 20))
    return ct_error_set(err, CT_ERR_INVALID,
                        "lrn_param.local_size %u is too large (the limit is 2^20 = 1048576)",
                        p->local_size);
  if (p->local_size % 2 != 1)
    return ct_error_set(err, CT_ERR_INVALID, "lrn_param.local_size must be odd (got %u)",
                        p->local_size);
  if (p->norm_region != CAFFE__LRNPARAMETER__NORM_REGION__ACROSS_CHANNELS &&
      p->norm_region != CAFFE__LRNPARAMETER__NORM_REGION__WITHIN_CHANNEL)
    return ct_error_set(err, CT_ERR_INVALID, "lrn_param.norm_region: unknown region %d",
                        (int)p->norm_region);
  ct_lrn_geom *g = &s->g;
  g->within = p->norm_region == CAFFE__LRNPARAMETER__NORM_REGION__WITHIN_CHANNEL;
  g->size = (int)p->local_size;
  g->beta = p->beta;
  g->k = g->within ? 1.0f : p->k;
  g->alpha = g->within ? p->alpha / ((float)g->size * g->size) : p->alpha / g->size;
  return CT_OK;
}

static ct_status lrn_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  lrn_state *s = l->priv;
  char buf[128];
  if (bottom[0]->ndim != 4)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the bottom must have 4 axes (num, channels, height, width), got %s",
                        ct_tensor_shape_string(bottom[0], buf, sizeof buf));
  s->g.N = bottom[0]->shape[0];
  s->g.C = bottom[0]->shape[1];
  s->g.H = bottom[0]->shape[2];
  s->g.W = bottom[0]->shape[3];
  ct_tensor_reshape_like(top[0], bottom[0]);
  ct_tensor_reshape_like(s->scale, bottom[0]);
  ct_tensor_reshape_like(s->tmp, bottom[0]);
  return CT_OK;
}

static void lrn_destroy(ct_layer *l) {
  lrn_state *s = l->priv;
  if (!s) return;
  ct_tensor_free(s->scale);
  ct_tensor_free(s->tmp);
  free(s);
  l->priv = NULL;
}

/* ---------------------------------------------------------------- host */

/* out = base + mult * S(v) over one image (C, H, W). */
static void window_sum(const ct_lrn_geom *g, const float *v, float base, float mult, float *out) {
  const int C = g->C, H = g->H, W = g->W, half = (g->size - 1) / 2;
  const size_t plane = (size_t)H * W;
  if (!g->within) {
    /* Running sum over channels, one plane at a time. */
    for (int c = 0; c < C; c++) {
      float *o = out + c * plane;
      for (size_t i = 0; i < plane; i++) o[i] = 0.0f;
      int c0 = c - half < 0 ? 0 : c - half, c1 = c + half < C - 1 ? c + half : C - 1;
      for (int cc = c0; cc <= c1; cc++) {
        const float *p = v + cc * plane;
        for (size_t i = 0; i < plane; i++) o[i] += p[i];
      }
      for (size_t i = 0; i < plane; i++) o[i] = base + mult * o[i];
    }
    return;
  }
  for (int c = 0; c < C; c++) {
    const float *p = v + c * plane;
    float *o = out + c * plane;
    for (int h = 0; h < H; h++)
      for (int w = 0; w < W; w++) {
        int h0 = h - half < 0 ? 0 : h - half, h1 = h + half < H - 1 ? h + half : H - 1;
        int w0 = w - half < 0 ? 0 : w - half, w1 = w + half < W - 1 ? w + half : W - 1;
        float sum = 0.0f;
        for (int hh = h0; hh <= h1; hh++)
          for (int ww = w0; ww <= w1; ww++) sum += p[hh * W + ww];
        o[h * W + w] = base + mult * sum;
      }
  }
}

/* The host passes, image by image (each image's windows stay inside it),
 * the images spread over the threads. */
typedef struct lrn_job {
  const ct_lrn_geom *g;
  size_t img; /* C * H * W */
  const float *x, *y, *dy, *scale;
  float *out, *scale_out, *tmp;
} lrn_job;

static size_t min_images(size_t img) { return img >= 16384 ? 1 : 16384 / (img + 1); }

static void forward_images(void *arg, size_t begin, size_t end) {
  const lrn_job *j = arg;
  const ct_lrn_geom *g = j->g;
  for (size_t n = begin; n < end; n++) {
    const float *x = j->x + n * j->img;
    float *sq = j->tmp + n * j->img, *scale = j->scale_out + n * j->img, *y = j->out + n * j->img;
    for (size_t i = 0; i < j->img; i++) sq[i] = x[i] * x[i];
    window_sum(g, sq, g->k, g->alpha, scale);
    for (size_t i = 0; i < j->img; i++) y[i] = x[i] * powf(scale[i], -g->beta);
  }
}

static ct_status lrn_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  lrn_state *s = l->priv;
  const ct_lrn_geom *g = &s->g;
  lrn_job j = {.g = g, .img = (size_t)g->C * g->H * g->W, .x = bottom[0]->data,
               .out = top[0]->data, .scale_out = s->scale->data, .tmp = s->tmp->data};
  ct_parallel_for((size_t)g->N, min_images(j.img), forward_images, &j);
  return CT_OK;
}

/* dx = c * S(ratio) first (the window sum writes its output), then scaled
 * by x and plus the direct term. */
static void backward_images(void *arg, size_t begin, size_t end) {
  const lrn_job *j = arg;
  const ct_lrn_geom *g = j->g;
  const float c = -2.0f * g->alpha * g->beta;
  for (size_t n = begin; n < end; n++) {
    const size_t o = n * j->img;
    const float *x = j->x + o, *y = j->y + o, *dy = j->dy + o, *scale = j->scale + o;
    float *ratio = j->tmp + o, *dx = j->out + o;
    for (size_t i = 0; i < j->img; i++) ratio[i] = dy[i] * y[i] / scale[i];
    window_sum(g, ratio, 0.0f, c, dx);
    for (size_t i = 0; i < j->img; i++) dx[i] = dx[i] * x[i] + dy[i] * powf(scale[i], -g->beta);
  }
}

static void lrn_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  lrn_state *s = l->priv;
  const ct_lrn_geom *g = &s->g;
  lrn_job j = {.g = g, .img = (size_t)g->C * g->H * g->W, .x = bottom[0]->data,
               .y = top[0]->data, .dy = top[0]->diff, .scale = s->scale->data,
               .out = bottom[0]->diff, .tmp = s->tmp->data};
  ct_parallel_for((size_t)g->N, min_images(j.img), backward_images, &j);
}

/* ---------------------------------------------------------------- GPU */
#ifdef CORTADO_HAVE_CUDA
/* cuDNN runs the layer when it computes Caffe's formula (l->gpu_priv set);
 * the scratch of the CAFFE engine is then not needed. */
static ct_status lrn_reshape_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  lrn_state *s = l->priv;
  const Caffe__LRNParameter *p = CT_PARAM_OR_DEFAULT(l, lrn_param, CAFFE__LRNPARAMETER__INIT);
  CT_TRY(ct_lrn_cudnn_reshape(l, p, bottom[0], top[0], err));
  if (l->gpu_priv && s->scale->capacity) {
    ct_tensor_free(s->scale);
    ct_tensor_free(s->tmp);
    s->scale = ct_tensor_new(l->ctx->device, NULL);
    s->tmp = ct_tensor_new(l->ctx->device, NULL);
  }
  return CT_OK;
}

static ct_status lrn_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  if (l->gpu_priv) {
    ct_lrn_cudnn_forward(l, bottom[0]->data, top[0]->data);
    return CT_OK;
  }
  lrn_state *s = l->priv;
  ct_lrn_forward_gpu(l->ctx, &s->g, bottom[0]->data, s->scale->data, top[0]->data);
  return CT_OK;
}

static void lrn_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  if (l->gpu_priv) {
    ct_lrn_cudnn_backward(l, bottom[0]->data, top[0]->data, top[0]->diff, bottom[0]->diff);
    return;
  }
  lrn_state *s = l->priv;
  ct_lrn_backward_gpu(l->ctx, &s->g, bottom[0]->data, top[0]->data, top[0]->diff, s->scale->data,
                      s->tmp->data, bottom[0]->diff);
}
#endif

/* The scale of the last forward (cuDNN's LRN keeps none: it reads x and y). */
static int lrn_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  lrn_state *s = l->priv;
  (void)cap;
  if (l->gpu_priv || !s->scale->count) return 0;
  out[0] = (ct_layer_region){s->scale->data, ct_tensor_bytes(s->scale, s->scale->count)};
  return 1;
}

const ct_layer_ops ct_lrn_ops = {
    .type = "LRN",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = lrn_setup,
    .reshape = lrn_reshape,
    .forward_cpu = lrn_forward_cpu,
    .backward_cpu = lrn_backward_cpu,
    .backward_state = lrn_backward_state,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = lrn_forward_gpu,
    .backward_gpu = lrn_backward_gpu,
    .reshape_gpu = lrn_reshape_gpu,
    .destroy_gpu = ct_lrn_cudnn_destroy,
#endif
    .destroy = lrn_destroy,
};
