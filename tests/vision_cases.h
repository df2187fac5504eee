/* Parameter builders and case tables shared by the vision layer tests
 * (test_layer_vision_*.c on the host, test_gpu_layer_vision.c on a GPU). */
#ifndef CT_TESTS_VISION_CASES_H
#define CT_TESTS_VISION_CASES_H

#include "layertest.h"
#include "testutil.h"

#define CT_UNUSED __attribute__((unused))

/* ---------------------------------------------------------------- Convolution */
/* A case.  Spatial values are given for 3 axes; a 2-D case uses [1], [2] and
 * a 1-D case [2] (the reference runs everything as 3-D with unit axes). */
typedef struct conv_cfg {
  const char *name;
  const char *shape;  /* bottom shape */
  int axis;           /* channel axis */
  int nsp;            /* spatial axes */
  int k[3], s[3], p[3], d[3];
  int group, nout;
  bool bias, force_nd, hw_fields;
} conv_cfg;

typedef struct conv_param {
  Caffe__LayerParameter lp;
  Caffe__ConvolutionParameter cp;
  Caffe__FillerParameter wf, bf;
  uint32_t k[3], s[3], p[3], d[3];
} conv_param;

/* One value when every spatial axis agrees, else one per axis. */
static inline size_t repeated(const int *v, int nsp, uint32_t *out) {
  bool same = true;
  for (int i = 0; i < nsp; i++) {
    out[i] = (uint32_t)v[3 - nsp + i];
    same = same && v[3 - nsp + i] == v[3 - nsp];
  }
  return same ? 1 : (size_t)nsp;
}

static inline void conv_make_param(conv_param *st, const conv_cfg *c, const char *type) {
  memset(st, 0, sizeof *st);
  Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
  Caffe__ConvolutionParameter cp = CAFFE__CONVOLUTION_PARAMETER__INIT;
  st->lp = lp;
  st->cp = cp;
  caffe__filler_parameter__init(&st->wf);
  caffe__filler_parameter__init(&st->bf);
  st->lp.name = "conv";
  st->lp.type = (char *)type;
  st->lp.convolution_param = &st->cp;
  st->cp.has_num_output = 1;
  st->cp.num_output = (uint32_t)c->nout;
  st->cp.has_bias_term = 1;
  st->cp.bias_term = c->bias;
  st->cp.has_group = 1;
  st->cp.group = (uint32_t)c->group;
  st->cp.has_axis = 1;
  st->cp.axis = c->axis;
  st->cp.has_force_nd_im2col = 1;
  st->cp.force_nd_im2col = c->force_nd;
  st->wf.type = "gaussian";
  st->wf.has_std = 1;
  st->wf.std = 0.5f;
  st->bf.type = "uniform";
  st->bf.min = -1.0f;
  st->bf.max = 1.0f;
  st->cp.weight_filler = &st->wf;
  st->cp.bias_filler = &st->bf;
  if (c->hw_fields) {
    st->cp.has_kernel_h = st->cp.has_kernel_w = 1;
    st->cp.kernel_h = (uint32_t)c->k[1];
    st->cp.kernel_w = (uint32_t)c->k[2];
    st->cp.has_stride_h = st->cp.has_stride_w = 1;
    st->cp.stride_h = (uint32_t)c->s[1];
    st->cp.stride_w = (uint32_t)c->s[2];
    st->cp.has_pad_h = st->cp.has_pad_w = 1;
    st->cp.pad_h = (uint32_t)c->p[1];
    st->cp.pad_w = (uint32_t)c->p[2];
  } else {
    st->cp.n_kernel_size = repeated(c->k, c->nsp, st->k);
    st->cp.kernel_size = st->k;
    st->cp.n_stride = repeated(c->s, c->nsp, st->s);
    st->cp.stride = st->s;
    st->cp.n_pad = repeated(c->p, c->nsp, st->p);
    st->cp.pad = st->p;
  }
  st->cp.n_dilation = repeated(c->d, c->nsp, st->d);
  st->cp.dilation = st->d;
}

static const conv_cfg k_conv_cases[] CT_UNUSED = {
    {"plain 3x3 pad 1", "2,4,6,5", 1, 2, {1, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 1, 3, true},
    {"group 2 stride 2", "2,4,7,6", 1, 2, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}, {1, 1, 1}, 2, 4, true},
    {"dilation 2 no bias", "2,3,7,7", 1, 2, {1, 3, 3}, {1, 1, 1}, {0, 2, 1}, {1, 2, 2}, 1, 2, false},
    {"kernel_h 3 kernel_w 2", "2,4,7,6", 1, 2, {1, 3, 2}, {1, 2, 1}, {0, 1, 0}, {1, 1, 1}, 2, 2, true,
     false, true},
    {"1x1 fast path", "2,4,3,5", 1, 2, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 2, 6, true},
    {"1x1 stride 2", "2,3,5,5", 1, 2, {1, 1, 1}, {1, 2, 2}, {0, 0, 0}, {1, 1, 1}, 1, 2, true},
    {"force_nd", "2,4,7,6", 1, 2, {1, 3, 2}, {1, 2, 1}, {0, 1, 1}, {1, 1, 2}, 2, 4, true, true},
    {"3-d", "2,2,4,5,4", 1, 3, {3, 2, 3}, {1, 2, 1}, {1, 0, 1}, {1, 1, 1}, 1, 2, true},
    {"1-d", "2,3,9", 1, 1, {1, 1, 3}, {1, 1, 2}, {0, 0, 1}, {1, 1, 1}, 1, 2, true},
    {"axis 2", "2,3,2,5,4", 2, 2, {1, 3, 2}, {1, 1, 1}, {0, 1, 0}, {1, 1, 1}, 1, 3, true},
};

/* ---------------------------------------------------------------- Pooling */
enum { MAX = CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX,
       AVE = CAFFE__POOLING_PARAMETER__POOL_METHOD__AVE,
       STO = CAFFE__POOLING_PARAMETER__POOL_METHOD__STOCHASTIC };

typedef struct pool_cfg {
  const char *name, *shape;
  int method;
  int kh, kw, sh, sw, ph, pw; /* kh == kw, sh == sw, ph == pw use the one-value fields */
  bool global, floor_mode;
  int out_h, out_w;           /* expected pooled size, worked out by hand */
} pool_cfg;

typedef struct pool_param {
  Caffe__LayerParameter lp;
  Caffe__PoolingParameter pp;
} pool_param;

static inline void pool_make_param(pool_param *st, const pool_cfg *c) {
  Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
  Caffe__PoolingParameter pp = CAFFE__POOLING_PARAMETER__INIT;
  st->lp = lp;
  st->pp = pp;
  st->lp.name = "pool";
  st->lp.type = "Pooling";
  st->lp.pooling_param = &st->pp;
  Caffe__PoolingParameter *p = &st->pp;
  p->has_pool = 1;
  p->pool = c->method;
  if (c->global) {
    p->has_global_pooling = 1;
    p->global_pooling = 1;
  } else if (c->kh == c->kw) {
    p->has_kernel_size = 1;
    p->kernel_size = (uint32_t)c->kh;
  } else {
    p->has_kernel_h = p->has_kernel_w = 1;
    p->kernel_h = (uint32_t)c->kh;
    p->kernel_w = (uint32_t)c->kw;
  }
  if (c->sh == c->sw) {
    p->has_stride = 1;
    p->stride = (uint32_t)c->sh;
  } else {
    p->has_stride_h = p->has_stride_w = 1;
    p->stride_h = (uint32_t)c->sh;
    p->stride_w = (uint32_t)c->sw;
  }
  if (c->ph == c->pw) {
    p->has_pad = c->ph != 0;
    p->pad = (uint32_t)c->ph;
  } else {
    p->has_pad_h = p->has_pad_w = 1;
    p->pad_h = (uint32_t)c->ph;
    p->pad_w = (uint32_t)c->pw;
  }
  if (c->floor_mode) {
    p->has_round_mode = 1;
    p->round_mode = CAFFE__POOLING_PARAMETER__ROUND_MODE__FLOOR;
  }
}

static const pool_cfg k_pool_cases[] CT_UNUSED = {
    /* ceil((6-3)/2)+1 = 3, ceil((5-3)/2)+1 = 2 */
    {"max 3x3 s2", "2,3,6,5", MAX, 3, 3, 2, 2, 0, 0, false, false, 3, 2},
    /* ceil((6+2-3)/2)+1 = 4 kept since 3*2 < 6+1; ceil((5+2-3)/2)+1 = 3 */
    {"max pad 1", "2,3,6,5", MAX, 3, 3, 2, 2, 1, 1, false, false, 4, 3},
    /* ceil((5+2-2)/2)+1 = 4, but the 4th window starts at 3*2-1 = 5 >= 5: 3 */
    {"max last window in pad", "2,2,5,5", MAX, 2, 2, 2, 2, 1, 1, false, false, 3, 3},
    {"max floor", "2,3,6,5", MAX, 3, 3, 2, 2, 0, 0, false, true, 2, 2},
    /* H: ceil((7+2-3)/2)+1 = 4; W: ceil((6+0-2)/1)+1 = 5 */
    {"max rect", "2,2,7,6", MAX, 3, 2, 2, 1, 1, 0, false, false, 4, 5},
    {"ave 3x3 s2", "2,3,6,5", AVE, 3, 3, 2, 2, 0, 0, false, false, 3, 2},
    {"ave pad 1", "2,3,6,5", AVE, 3, 3, 2, 2, 1, 1, false, false, 4, 3},
    {"ave last window in pad", "2,2,5,5", AVE, 2, 2, 2, 2, 1, 1, false, false, 3, 3},
    {"ave rect pad", "2,2,7,6", AVE, 3, 2, 2, 1, 1, 1, false, false, 4, 7},
    {"ave floor", "2,3,6,5", AVE, 3, 3, 2, 2, 1, 1, false, true, 3, 3},
    {"max global", "2,3,4,5", MAX, 0, 0, 1, 1, 0, 0, true, false, 1, 1},
    {"ave global", "2,3,4,5", AVE, 0, 0, 1, 1, 0, 0, true, false, 1, 1},
};

/* Values 2/n apart in a scrambled order: no two inputs of a window are
 * within a finite-difference step of each other (no ties for the max). */
static inline void distinct_values(ct_tensor *t) {
  size_t n = t->count;
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = (float)((i * 7919) % n) * 2.0f / (float)n - 1.0f;
  tu_set_values(t, v);
  free(v);
}

/* ---------------------------------------------------------------- InnerProduct */
typedef struct ip_cfg {
  const char *shape;
  int axis, nout;
  bool bias, transpose;
  int M, K;  /* expected flattening */
} ip_cfg;

static const ip_cfg k_ip[] CT_UNUSED = {
    {"2,3,4,5", 1, 6, true, false, 2, 60},
    {"2,3,4,5", 1, 6, true, true, 2, 60},
    {"2,3,4,5", 2, 4, false, false, 6, 20},
    {"2,3,4,5", -1, 3, true, true, 24, 5},
    {"5,7", 1, 4, true, false, 5, 7},
};

typedef struct ip_param {
  Caffe__LayerParameter lp;
  Caffe__InnerProductParameter ip;
  Caffe__FillerParameter wf, bf;
} ip_param;

static inline void make_ip(ip_param *st, const ip_cfg *c) {
  Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
  Caffe__InnerProductParameter ip = CAFFE__INNER_PRODUCT_PARAMETER__INIT;
  st->lp = lp;
  st->ip = ip;
  caffe__filler_parameter__init(&st->wf);
  caffe__filler_parameter__init(&st->bf);
  st->lp.name = "ip";
  st->lp.type = "InnerProduct";
  st->lp.inner_product_param = &st->ip;
  st->ip.has_num_output = 1;
  st->ip.num_output = (uint32_t)c->nout;
  st->ip.has_bias_term = 1;
  st->ip.bias_term = c->bias;
  st->ip.has_axis = 1;
  st->ip.axis = c->axis;
  st->ip.has_transpose = 1;
  st->ip.transpose = c->transpose;
  st->wf.type = "uniform";
  st->wf.min = -1;
  st->wf.max = 1;
  st->bf.type = "gaussian";
  st->bf.std = 1;
  st->ip.weight_filler = &st->wf;
  st->ip.bias_filler = &st->bf;
}

/* ---------------------------------------------------------------- LRN */
typedef struct lrn_cfg {
  bool within;
  int size;
  float alpha, beta, k;
} lrn_cfg;

static const lrn_cfg k_lrn[] CT_UNUSED = {
    {false, 5, 1e-4f, 0.75f, 1.0f},  /* Caffe's defaults */
    {false, 3, 0.5f, 0.6f, 2.0f},
    {false, 7, 1.5f, 0.9f, 1.5f},    /* window wider than the channels */
    {true, 3, 0.8f, 0.75f, 5.0f},    /* k is ignored within a channel */
    {true, 5, 2.0f, 0.5f, 1.0f},
};

typedef struct lrn_param {
  Caffe__LayerParameter lp;
  Caffe__LRNParameter rp;
} lrn_param;

static inline void make_lrn(lrn_param *st, const lrn_cfg *c) {
  Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
  Caffe__LRNParameter rp = CAFFE__LRNPARAMETER__INIT;
  st->lp = lp;
  st->rp = rp;
  st->lp.name = "norm";
  st->lp.type = "LRN";
  st->lp.lrn_param = &st->rp;
  st->rp.has_local_size = st->rp.has_alpha = st->rp.has_beta = st->rp.has_k = 1;
  st->rp.local_size = (uint32_t)c->size;
  st->rp.alpha = c->alpha;
  st->rp.beta = c->beta;
  st->rp.k = c->k;
  st->rp.has_norm_region = 1;
  st->rp.norm_region = c->within ? CAFFE__LRNPARAMETER__NORM_REGION__WITHIN_CHANNEL
                                 : CAFFE__LRNPARAMETER__NORM_REGION__ACROSS_CHANNELS;
}

#endif
