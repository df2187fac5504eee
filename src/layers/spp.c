/* SPP, spatial pyramid pooling (Caffe's SPPLayer): level i pools the
 * (N, C, H, W) bottom into about 2^i x 2^i bins with kernel
 * ceil(H / 2^i) (stride the same, pad half the shortfall, rounded up), each
 * level's output is flattened to (N, C * bins) and the levels are
 * concatenated along axis 1.  With pyramid_height 1 the single level's
 * (N, C, PH, PW) output is the top, unflattened, as in Caffe.  The levels are
 * Pooling layers run on the same context, so this works on any device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "math/math.h"

typedef struct spp_level {
  Caffe__LayerParameter lp;
  Caffe__PoolingParameter pp;
  char name[192];
  ct_layer *pool;
  ct_tensor *out;  /* (N, C, PH, PW) */
  size_t block;    /* C * PH * PW: one image's share of the top row */
  size_t offset;   /* where it starts in a top row */
} spp_level;

typedef struct spp_state {
  int height;        /* pyramid_height */
  int method;        /* Caffe__PoolingParameter__PoolMethod */
  int N, C, H, W;    /* the bottom shape the levels were built for */
  spp_level *lv;     /* (height) */
  ct_tensor *acc;    /* (N, C, H, W) sum of the levels' bottom gradients */
  size_t row;        /* top values per image */
} spp_state;

static ct_status spp_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                           ct_error *err) {
  const Caffe__SPPParameter *p = CT_PARAM_OR_DEFAULT(l, spp_param, CAFFE__SPPPARAMETER__INIT);
  spp_state *s = ct_xcalloc(1, sizeof *s);
  l->priv = s;
  if (p->pyramid_height == 0 || p->pyramid_height > 24)
    return ct_error_set(err, CT_ERR_INVALID, "spp_param.pyramid_height must be 1 to 24 (got %u)",
                        p->pyramid_height);
  s->height = (int)p->pyramid_height;
  s->method = (int)p->pool;  /* the SPP and Pooling enums agree: MAX, AVE, STOCHASTIC */
  s->lv = ct_xcalloc((size_t)s->height, sizeof *s->lv);
  s->acc = ct_tensor_new(l->ctx->device, NULL);
  return CT_OK;
}

/* Caffe's GetPoolingParam: kernel, stride and pad of one level and axis. */
static void level_geometry(int level, int size, uint32_t *kernel, uint32_t *pad) {
  int bins = 1 << level;
  int k = (int)ceil(size / (double)bins);
  *kernel = (uint32_t)k;
  *pad = (uint32_t)((k * bins - size + 1) / 2);
}

/* (Re)builds level i's Pooling layer for the current bottom; when the
 * spatial size is unchanged the existing layer is only reshaped. */
static ct_status build_level(ct_layer *l, spp_level *v, int i, ct_tensor *bottom, bool same_hw,
                             ct_error *err) {
  spp_state *s = l->priv;
  if (v->pool && same_hw) {
    CT_TRY(ct_layer_reshape(v->pool, &bottom, &v->out, err));
    ct_tensor_need_diff(v->out);
    v->block = v->out->count / (size_t)(s->N ? s->N : 1);
    return CT_OK;
  }
  ct_layer_free(v->pool);
  v->pool = NULL;
  Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
  Caffe__PoolingParameter pp = CAFFE__POOLING_PARAMETER__INIT;
  v->lp = lp;
  v->pp = pp;
  snprintf(v->name, sizeof v->name, "%s/level%d", l->name, i);
  v->lp.name = v->name;
  v->lp.type = "Pooling";
  v->lp.pooling_param = &v->pp;
  v->pp.has_pool = 1;
  v->pp.pool = s->method;
  v->pp.has_kernel_h = v->pp.has_kernel_w = v->pp.has_pad_h = v->pp.has_pad_w = 1;
  v->pp.has_stride_h = v->pp.has_stride_w = 1;
  level_geometry(i, s->H, &v->pp.kernel_h, &v->pp.pad_h);
  level_geometry(i, s->W, &v->pp.kernel_w, &v->pp.pad_w);
  v->pp.stride_h = v->pp.kernel_h;
  v->pp.stride_w = v->pp.kernel_w;
  if (!v->out) {
    v->out = ct_tensor_new(l->ctx->device, NULL);
    v->out->has_diff = true;
  }
  CT_TRY(ct_layer_create(&v->lp, l->phase, l->ctx, 1, 1, &v->pool, err));
  CT_TRY(ct_layer_setup(v->pool, &bottom, &v->out, err));
  ct_tensor_need_diff(v->out);
  v->block = v->out->count / (size_t)(s->N ? s->N : 1);
  return CT_OK;
}

static ct_status spp_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  spp_state *s = l->priv;
  const ct_tensor *b = bottom[0];
  char buf[128];
  if (b->ndim != 4)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the bottom must have 4 axes (num, channels, height, width), got %s",
                        ct_tensor_shape_string(b, buf, sizeof buf));
  if (b->shape[2] <= 0 || b->shape[3] <= 0)
    return ct_error_set(err, CT_ERR_INVALID, "the bottom's height and width must be positive");
  const bool same_hw = s->H == b->shape[2] && s->W == b->shape[3];
  s->N = b->shape[0];
  s->C = b->shape[1];
  s->H = b->shape[2];
  s->W = b->shape[3];
  if (s->height == 1) {
    if (build_level(l, &s->lv[0], 0, bottom[0], same_hw, err) != CT_OK)
      return ct_error_prefix(err, "pyramid level 0");
    ct_tensor_reshape_like(top[0], s->lv[0].out);
    return CT_OK;
  }
  s->row = 0;
  for (int i = 0; i < s->height; i++) {
    if (build_level(l, &s->lv[i], i, bottom[0], same_hw, err) != CT_OK)
      return ct_error_prefix(err, "pyramid level %d", i);
    s->lv[i].offset = s->row;
    s->row += s->lv[i].block;
  }
  if (s->row > (size_t)1 << 30)
    return ct_error_set(err, CT_ERR_INVALID, "the pyramid has too many bins (%zu per image)", s->row);
  int shape[2] = {s->N, (int)s->row};
  CT_TRY(ct_tensor_reshape(top[0], 2, shape, err));
  ct_tensor_reshape_like(s->acc, b);
  return CT_OK;
}

static void spp_destroy(ct_layer *l) {
  spp_state *s = l->priv;
  if (!s) return;
  for (int i = 0; i < s->height && s->lv; i++) {
    ct_layer_free(s->lv[i].pool);
    ct_tensor_free(s->lv[i].out);
  }
  free(s->lv);
  ct_tensor_free(s->acc);
  free(s);
  l->priv = NULL;
}

static void dev_copy(ct_context *ctx, size_t n, const float *x, float *y) {
#ifdef CORTADO_HAVE_CUDA
  if (ctx->device != CT_DEVICE_CPU) {
    ct_gpu_copy(ctx, n, x, y);
    return;
  }
#endif
  ct_cpu_copy(n, x, y);
}

static ct_status spp_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  spp_state *s = l->priv;
  if (s->height == 1) return ct_layer_forward(s->lv[0].pool, bottom, top, NULL, err);
  for (int i = 0; i < s->height; i++) {
    spp_level *v = &s->lv[i];
    CT_TRY(ct_layer_forward(v->pool, bottom, &v->out, NULL, err));
    for (int n = 0; n < s->N; n++)
      dev_copy(l->ctx, v->block, ct_f32(v->out) + n * v->block,
               ct_f32(top[0]) + n * s->row + v->offset);
  }
  return CT_OK;
}

/* Each level's backward writes the bottom gradient, so the sum over the
 * levels is gathered in acc and written back at the end. */
static void spp_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                         ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  spp_state *s = l->priv;
  if (s->height == 1) {
    ct_layer_backward(s->lv[0].pool, top, propagate_down, bottom);
    return;
  }
  const size_t count = bottom[0]->count;
  for (int i = 0; i < s->height; i++) {
    spp_level *v = &s->lv[i];
    for (int n = 0; n < s->N; n++)
      dev_copy(l->ctx, v->block, ct_f32_diff(top[0]) + n * s->row + v->offset,
               ct_f32_diff(v->out) + n * v->block);
    ct_layer_backward(v->pool, &v->out, propagate_down, bottom);
    if (i == 0) dev_copy(l->ctx, count, bottom[0]->diff, s->acc->data);
    else ct_dev_axpy(l->ctx, count, 1.0f, bottom[0]->diff, s->acc->data);
  }
  dev_copy(l->ctx, count, s->acc->data, bottom[0]->diff);
}

const ct_layer_ops ct_spp_ops = {
    .type = "SPP",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = spp_setup,
    .reshape = spp_reshape,
    .forward_cpu = spp_forward,
    .backward_cpu = spp_backward,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = spp_forward,
    .backward_gpu = spp_backward,
#endif
    .destroy = spp_destroy,
};
