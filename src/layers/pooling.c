/* Pooling over 2-D windows of (N, C, H, W): MAX (with the argmax kept as a
 * scratch or given out as a second top, Caffe's mask), AVE (Caffe's divisor:
 * the window clipped to the padded input, so padded positions count) and
 * STOCHASTIC (train: pick a value with probability proportional to it; test:
 * the average weighted by the values).  Output size as Caffe: CEIL rounding by
 * default, and with padding the last window must start inside the input.
 * The host's MAX and AVE kernels (threaded, vectorised; float32 and
 * bfloat16) are in pooling_cpu.c; STOCHASTIC runs here, serially, in float32
 * only (a 16-bit STOCHASTIC or mask-top layer is refused at reshape). */
#include "layers/pooling.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/pooling_cudnn.h"
#endif
#include "layers/pooling_cpu.h"

typedef Caffe__PoolingParameter pool_param;

extern const ct_layer_ops ct_pooling_ops;

static ct_status parse(ct_layer *l, const pool_param *p, ct_pool_geom *g, ct_error *err) {
  g->method = (int)p->pool;
  if (p->pool != CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX &&
      p->pool != CAFFE__POOLING_PARAMETER__POOL_METHOD__AVE &&
      p->pool != CAFFE__POOLING_PARAMETER__POOL_METHOD__STOCHASTIC)
    return ct_error_set(err, CT_ERR_INVALID, "pooling_param.pool: unknown method %d", (int)p->pool);
  if (p->round_mode != CAFFE__POOLING_PARAMETER__ROUND_MODE__CEIL &&
      p->round_mode != CAFFE__POOLING_PARAMETER__ROUND_MODE__FLOOR)
    return ct_error_set(err, CT_ERR_INVALID, "pooling_param.round_mode: unknown mode %d",
                        (int)p->round_mode);
  g->global = p->global_pooling;
  if (g->global) {
    if (p->has_kernel_size || p->has_kernel_h || p->has_kernel_w)
      return ct_error_set(err, CT_ERR_INVALID,
                          "pooling_param: kernel_size, kernel_h and kernel_w cannot be given "
                          "with global_pooling");
  } else if (p->has_kernel_size && (p->has_kernel_h || p->has_kernel_w)) {
    return ct_error_set(err, CT_ERR_INVALID,
                        "pooling_param: give either kernel_size or kernel_h and kernel_w, not both");
  } else if (!p->has_kernel_size && !(p->has_kernel_h && p->has_kernel_w)) {
    return ct_error_set(err, CT_ERR_INVALID,
                        "pooling_param.kernel_size must be given (or both kernel_h and kernel_w)");
  }
  if (p->has_pad_h != p->has_pad_w || (p->has_pad && p->has_pad_h))
    return ct_error_set(err, CT_ERR_INVALID,
                        "pooling_param: give either pad or both pad_h and pad_w");
  if (p->has_stride_h != p->has_stride_w || (p->has_stride && p->has_stride_h))
    return ct_error_set(err, CT_ERR_INVALID,
                        "pooling_param: give either stride or both stride_h and stride_w");
  /* as written, before they become ints: 2^31 is not negative */
  if (!g->global) {
    CT_TRY(ct_layer_check_count(p->has_kernel_size ? "pooling_param.kernel_size" : "pooling_param.kernel_h",
                                p->has_kernel_size ? p->kernel_size : p->kernel_h, 1, err));
    if (!p->has_kernel_size) CT_TRY(ct_layer_check_count("pooling_param.kernel_w", p->kernel_w, 1, err));
  }
  CT_TRY(ct_layer_check_count(p->has_stride_h ? "pooling_param.stride_h" : "pooling_param.stride",
                              p->has_stride_h ? p->stride_h : p->stride, 1, err));
  if (p->has_stride_h) CT_TRY(ct_layer_check_count("pooling_param.stride_w", p->stride_w, 1, err));
  CT_TRY(ct_layer_check_count(p->has_pad_h ? "pooling_param.pad_h" : "pooling_param.pad",
                              p->has_pad_h ? p->pad_h : p->pad, 0, err));
  if (p->has_pad_h) CT_TRY(ct_layer_check_count("pooling_param.pad_w", p->pad_w, 0, err));
  if (!g->global) {
    g->kh = (int)(p->has_kernel_size ? p->kernel_size : p->kernel_h);
    g->kw = (int)(p->has_kernel_size ? p->kernel_size : p->kernel_w);
  }
  g->ph = (int)(p->has_pad_h ? p->pad_h : p->pad);
  g->pw = (int)(p->has_pad_h ? p->pad_w : p->pad);
  g->sh = (int)(p->has_stride_h ? p->stride_h : p->stride);
  g->sw = (int)(p->has_stride_h ? p->stride_w : p->stride);
  if (!g->global && (g->kh <= 0 || g->kw <= 0))
    return ct_error_set(err, CT_ERR_INVALID, "pooling_param: kernel size must be positive (got %dx%d)",
                        g->kh, g->kw);
  if (g->sh <= 0 || g->sw <= 0)
    return ct_error_set(err, CT_ERR_INVALID, "pooling_param: stride must be positive (got %dx%d)",
                        g->sh, g->sw);
  if (g->ph < 0 || g->pw < 0)
    return ct_error_set(err, CT_ERR_INVALID, "pooling_param: pad is too large");
  if (g->global && (g->ph || g->pw || g->sh != 1 || g->sw != 1))
    return ct_error_set(err, CT_ERR_INVALID,
                        "pooling_param: global_pooling takes only pad 0 and stride 1");
  if (g->ph || g->pw) {
    if (g->method == CAFFE__POOLING_PARAMETER__POOL_METHOD__STOCHASTIC)
      return ct_error_set(err, CT_ERR_INVALID,
                          "pooling_param: padding is implemented only for MAX and AVE pooling");
    if (!g->global && (g->ph >= g->kh || g->pw >= g->kw))
      return ct_error_set(err, CT_ERR_INVALID,
                          "pooling_param: pad (%d, %d) must be smaller than the kernel (%d, %d)",
                          g->ph, g->pw, g->kh, g->kw);
  }
  if (l->ntop > 1 && g->method != CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX)
    return ct_error_set(err, CT_ERR_INVALID,
                        "pooling_param: only MAX pooling has a second top (the argmax mask)");
  return CT_OK;
}

typedef struct pool_state {
  ct_pool_geom g;
  bool floor_mode;
  ct_tensor *mask;   /* (N, C, PH, PW) argmax within the plane (MAX with one top) */
  ct_tensor *rand;   /* (N, C, PH, PW) STOCHASTIC: the draws, then the chosen index */
  float *host_draws; /* (N*C*PH*PW) on the host, for the GPU path */
  const ct_tensor *bias; /* (C): the Convolution's before (ct_pool_take_bias), or NULL */
  size_t host_cap;
  /* Host windows per output row and column: [lo, hi) clipped to the input,
   * ext the extent clipped to the padded input (the AVE divisor is
   * hext * wext). */
  int *hlo, *hhi, *hext, *wlo, *whi, *wext;
} pool_state;

static ct_status pool_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  const pool_param *p = CT_PARAM_OR_DEFAULT(l, pooling_param, CAFFE__POOLING_PARAMETER__INIT);
  pool_state *s = ct_xcalloc(1, sizeof *s);
  l->priv = s;
  s->mask = ct_tensor_new(l->ctx->device, NULL);
  s->rand = ct_tensor_new(l->ctx->device, NULL);
  s->floor_mode = p->round_mode == CAFFE__POOLING_PARAMETER__ROUND_MODE__FLOOR;
  return parse(l, p, &s->g, err);
}

/* Caffe's pooled size: rounded (in float, as Caffe) up or down, then with
 * padding the last window must start inside the input. */
static int pooled_size(int in, int k, int pad, int stride, bool floor_mode) {
  float q = (float)(in + 2 * pad - k) / (float)stride;
  int out = (int)(floor_mode ? floorf(q) : ceilf(q)) + 1;
  if (pad && (out - 1) * stride >= in + pad) out--;
  return out;
}

static void axis_windows(int nout, int k, int stride, int pad, int in, int *lo, int *hi,
                         int *ext) {
  for (int o = 0; o < nout; o++) {
    int a = o * stride - pad, b = a + k;
    ext[o] = (b < in + pad ? b : in + pad) - a;
    lo[o] = a > 0 ? a : 0;
    hi[o] = b < in ? b : in;
  }
}

static ct_status pool_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  pool_state *s = l->priv;
  ct_pool_geom *g = &s->g;
  char buf[128];
  if (l->dtype != CT_F32 &&
      (g->method == CAFFE__POOLING_PARAMETER__POOL_METHOD__STOCHASTIC || l->ntop > 1))
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "%s pooling has no %s path (give the layer forward_type: FLOAT)",
                        l->ntop > 1 ? "MAX with a mask top" : "STOCHASTIC", ct_dtype_name(l->dtype));
  if (bottom[0]->ndim != 4)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the bottom must have 4 axes (num, channels, height, width), got %s",
                        ct_tensor_shape_string(bottom[0], buf, sizeof buf));
  g->N = bottom[0]->shape[0];
  g->C = bottom[0]->shape[1];
  g->H = bottom[0]->shape[2];
  g->W = bottom[0]->shape[3];
  if (g->global) {
    g->kh = g->H;
    g->kw = g->W;
  }
  g->PH = pooled_size(g->H, g->kh, g->ph, g->sh, s->floor_mode);
  g->PW = pooled_size(g->W, g->kw, g->pw, g->sw, s->floor_mode);
  if (g->PH <= 0 || g->PW <= 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the %dx%d kernel does not fit the %dx%d input with pad (%d, %d)", g->kh,
                        g->kw, g->H, g->W, g->ph, g->pw);
  if ((long)g->H * g->W > (1L << 24))
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "pooling planes of more than 2^24 values (%dx%d) are not supported", g->H,
                        g->W);
  free(s->hlo);
  s->hlo = ct_xcalloc(3 * ((size_t)g->PH + g->PW), sizeof *s->hlo);
  s->hhi = s->hlo + g->PH;
  s->hext = s->hhi + g->PH;
  s->wlo = s->hext + g->PH;
  s->whi = s->wlo + g->PW;
  s->wext = s->whi + g->PW;
  axis_windows(g->PH, g->kh, g->sh, g->ph, g->H, s->hlo, s->hhi, s->hext);
  axis_windows(g->PW, g->kw, g->sw, g->pw, g->W, s->wlo, s->whi, s->wext);
  ct_tensor_reshape4(top[0], g->N, g->C, g->PH, g->PW);
  if (l->ntop > 1) ct_tensor_reshape_like(top[1], top[0]);
  if (g->method == CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX && l->ntop == 1) {
    if ((l->ctx->device != CT_DEVICE_CPU && l->dtype != CT_F32) || l->layout == CT_NHWC) {
      /* the typed and channels-last kernels' argmax: bytes per output (pooling.h), in floats */
      const int words = (int)((top[0]->count * ct_pool_typed_arg_bytes(g) + 3) / 4);
      ct_tensor_reshape_or_die(s->mask, 1, &words);
    } else {
      ct_tensor_reshape_like(s->mask, top[0]);
    }
  }
  if (g->method == CAFFE__POOLING_PARAMETER__POOL_METHOD__STOCHASTIC) {
    ct_tensor_reshape_like(s->rand, top[0]);
    if (l->ctx->device != CT_DEVICE_CPU && top[0]->count > s->host_cap) {
      free(s->host_draws);
      s->host_draws = ct_xcalloc(top[0]->count, sizeof(float));
      s->host_cap = top[0]->count;
    }
  }
  return CT_OK;
}

static void pool_destroy(ct_layer *l) {
  pool_state *s = l->priv;
  if (!s) return;
  ct_tensor_free(s->mask);
  ct_tensor_free(s->rand);
  free(s->host_draws);
  free(s->hlo);
  free(s);
  l->priv = NULL;
}

/* ---------------------------------------------------------------- host */

/* The window of output (ph, pw) from the tables; *size is Caffe's AVE
 * divisor. */
#define WINDOW(s, ph, pw)                                                   \
  const int h0 = (s)->hlo[ph], h1 = (s)->hhi[ph], w0 = (s)->wlo[pw], w1 = (s)->whi[pw]; \
  const int size = (s)->hext[ph] * (s)->wext[pw];                           \
  (void)size

/* MAX and AVE on the host: pooling_cpu.c. */
static ct_pool_windows windows_of(const pool_state *s) {
  return (ct_pool_windows){s->hlo, s->hhi, s->hext, s->wext, s->wlo, s->whi};
}

/* Train: rand holds a uniform draw per output on entry and the chosen index
 * within the plane on return.  Test: the value-weighted average. */
static void sto_forward(const pool_state *s, bool train, const float *x, float *y, float *rand) {
  const ct_pool_geom *g = &s->g;
  for (int nc = 0; nc < g->N * g->C; nc++) {
    const float *xp = x + (size_t)nc * g->H * g->W;
    for (int ph = 0; ph < g->PH; ph++)
      for (int pw = 0; pw < g->PW; pw++) {
        WINDOW(s, ph, pw);
        size_t o = ((size_t)nc * g->PH + ph) * g->PW + pw;
        if (train) {
          float total = 0.0f;
          for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++) total += xp[h * g->W + w];
          float thresh = rand[o] * total, cum = 0.0f;
          int pick = h0 * g->W + w0;
          for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++) {
              cum += xp[h * g->W + w];
              if (cum >= thresh) {
                pick = h * g->W + w;
                goto done;
              }
            }
        done:
          rand[o] = (float)pick;
          y[o] = xp[pick];
        } else {
          float sum = FLT_MIN, sumsq = 0.0f;
          for (int h = h0; h < h1; h++)
            for (int w = w0; w < w1; w++) {
              float v = xp[h * g->W + w];
              sum += v;
              sumsq += v * v;
            }
          y[o] = sumsq / sum;
        }
      }
  }
}

static ct_status pool_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  pool_state *s = l->priv;
  const ct_pool_geom *g = &s->g;
  const ct_pool_windows w = windows_of(s);
  const bool nhwc = l->layout == CT_NHWC; /* 16-bit only: one top, MAX or AVE */
  switch (g->method) {
    case CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX:
      if (nhwc)
        ct_pool_max_forward_nhwc_cpu(g, &w, l->dtype, bottom[0]->data, top[0]->data, s->mask->data);
      else
        ct_pool_max_forward_cpu(g, &w, l->dtype, bottom[0]->data, top[0]->data,
                                l->ntop > 1 ? top[1]->data : s->mask->data);
      break;
    case CAFFE__POOLING_PARAMETER__POOL_METHOD__AVE:
      if (nhwc) ct_pool_ave_forward_nhwc_cpu(g, &w, l->dtype, bottom[0]->data, top[0]->data);
      else ct_pool_ave_forward_cpu(g, &w, l->dtype, bottom[0]->data, top[0]->data);
      break;
    default: {
      bool train = l->phase == CT_PHASE_TRAIN;
      if (train) ct_rng_fill_uniform(&l->ctx->rng, s->rand->data, s->rand->count, 0.0f, 1.0f);
      sto_forward(s, train, bottom[0]->data, top[0]->data, s->rand->data);
    }
  }
  return CT_OK;
}

/* Test-phase STOCHASTIC: y = S2 / S1 with S1 = sum x, S2 = sum x^2, so
 * dy/dx = (2 x S1 - S2) / S1^2. */
static void sto_test_backward(const pool_state *s, const float *x, const float *dy, float *dx) {
  const ct_pool_geom *g = &s->g;
  for (int nc = 0; nc < g->N * g->C; nc++) {
    const float *xp = x + (size_t)nc * g->H * g->W;
    float *dxp = dx + (size_t)nc * g->H * g->W;
    for (int ph = 0; ph < g->PH; ph++)
      for (int pw = 0; pw < g->PW; pw++) {
        WINDOW(s, ph, pw);
        float s1 = FLT_MIN, s2 = 0.0f;
        for (int h = h0; h < h1; h++)
          for (int w = w0; w < w1; w++) {
            s1 += xp[h * g->W + w];
            s2 += xp[h * g->W + w] * xp[h * g->W + w];
          }
        float d = dy[((size_t)nc * g->PH + ph) * g->PW + pw];
        for (int h = h0; h < h1; h++)
          for (int w = w0; w < w1; w++)
            dxp[h * g->W + w] += d * (2.0f * xp[h * g->W + w] * s1 - s2) / (s1 * s1);
      }
  }
}

static void pool_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  pool_state *s = l->priv;
  const ct_pool_geom *g = &s->g;
  const ct_pool_windows w = windows_of(s);
  void *dx = bottom[0]->diff;
  const bool nhwc = l->layout == CT_NHWC;
  switch (g->method) {
    case CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX:
      if (nhwc)
        ct_pool_scatter_backward_nhwc_cpu(g, l->dtype, top[0]->diff, s->mask->data, dx);
      else
        ct_pool_scatter_backward_cpu(g, l->dtype, top[0]->diff,
                                     l->ntop > 1 ? top[1]->data : s->mask->data, dx);
      break;
    case CAFFE__POOLING_PARAMETER__POOL_METHOD__AVE:
      if (nhwc) ct_pool_ave_backward_nhwc_cpu(g, &w, l->dtype, top[0]->diff, dx);
      else ct_pool_ave_backward_cpu(g, &w, l->dtype, top[0]->diff, dx);
      break;
    default:
      if (l->phase == CT_PHASE_TRAIN) {
        ct_pool_scatter_backward_cpu(g, CT_F32, top[0]->diff, s->rand->data, dx);
      } else {
        memset(dx, 0, bottom[0]->count * sizeof(float));
        sto_test_backward(s, bottom[0]->data, top[0]->diff, dx);
      }
  }
}

/* ---------------------------------------------------------------- GPU */
#ifdef CORTADO_HAVE_CUDA
/* cuDNN runs the layer when it pools exactly as Caffe (l->gpu_priv set)
 * and no ReLU is fused; the argmax scratch is then not needed. */
static ct_status pool_reshape_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  pool_state *s = l->priv;
  const pool_param *p = CT_PARAM_OR_DEFAULT(l, pooling_param, CAFFE__POOLING_PARAMETER__INIT);
  if (l->dtype != CT_F32) {
    /* Cortado's typed kernels (pooling_typed.cu), in the layer's order */
    ct_pool_cudnn_destroy(l);
    if (s->g.method == CAFFE__POOLING_PARAMETER__POOL_METHOD__STOCHASTIC || l->ntop > 1)
      return ct_error_set(err, CT_ERR_UNSUPPORTED,
                          "%s pooling has no %s path (give the layer forward_type: FLOAT)",
                          l->ntop > 1 ? "MAX with a mask top" : "STOCHASTIC",
                          ct_dtype_name(l->dtype));
    return CT_OK;
  }
  if (s->g.relu_top || s->g.relu_bottom || s->bias) {
    ct_pool_cudnn_destroy(l);
    return CT_OK;
  }
  CT_TRY(ct_pool_cudnn_reshape(l, &s->g, (int)p->engine, err));
  if (l->gpu_priv && s->mask->capacity) {
    ct_tensor_free(s->mask);
    s->mask = ct_tensor_new(l->ctx->device, NULL);
  }
  return CT_OK;
}

static ct_status pool_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  if (l->dtype != CT_F32) {
    pool_state *s = l->priv;
    ct_pool_forward_gpu_typed(l->ctx, &s->g, l->dtype, l->layout == CT_NHWC, bottom[0]->data,
                              top[0]->data, s->mask->data);
    return CT_OK;
  }
  if (l->gpu_priv) {
    ct_pool_cudnn_forward(l, bottom[0]->data, top[0]->data);
    return CT_OK;
  }
  pool_state *s = l->priv;
  const ct_pool_geom *g = &s->g;
  float *mask = g->method == CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX
                    ? (l->ntop > 1 ? top[1]->data : s->mask->data)
                    : s->rand->data;
  bool train = l->phase == CT_PHASE_TRAIN;
  if (g->method == CAFFE__POOLING_PARAMETER__POOL_METHOD__STOCHASTIC && train) {
    /* Same draws as the host path, from the context's generator. */
    ct_rng_fill_uniform(&l->ctx->rng, s->host_draws, s->rand->count, 0.0f, 1.0f);
    ct_tensor_upload(s->rand, s->host_draws);
  }
  ct_pool_geom with_bias = *g;
  with_bias.bias = s->bias ? s->bias->data : NULL;
  ct_pool_forward_gpu(l->ctx, &with_bias, train, bottom[0]->data, top[0]->data, mask);
  return CT_OK;
}

static void pool_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                              ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  if (l->dtype != CT_F32) {
    pool_state *s = l->priv;
    ct_pool_backward_gpu_typed(l->ctx, &s->g, l->dtype, l->layout == CT_NHWC, bottom[0]->data,
                               top[0]->data, top[0]->diff, s->mask->data, bottom[0]->diff);
    return;
  }
  if (l->gpu_priv) {
    ct_pool_cudnn_backward(l, bottom[0]->data, top[0]->data, top[0]->diff, bottom[0]->diff);
    return;
  }
  pool_state *s = l->priv;
  const ct_pool_geom *g = &s->g;
  const float *mask = g->method == CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX
                          ? (l->ntop > 1 ? top[1]->data : s->mask->data)
                          : s->rand->data;
  ct_pool_backward_gpu(l->ctx, g, l->phase == CT_PHASE_TRAIN, bottom[0]->data, top[0]->data,
                       top[0]->diff, mask, bottom[0]->diff);
}
#endif

/* The fusions need the layer's own GPU kernels: MAX or AVE, one top, on
 * a GPU context. */
static bool fusable(const ct_layer *l) {
  if (l->ops != &ct_pooling_ops || l->ctx->device == CT_DEVICE_CPU || l->ntop != 1) return false;
  const pool_state *s = l->priv;
  return s->g.method == CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX ||
         s->g.method == CAFFE__POOLING_PARAMETER__POOL_METHOD__AVE;
}

bool ct_pool_absorb_relu_top(ct_layer *pool) {
  if (!fusable(pool)) return false;
  ((pool_state *)pool->priv)->g.relu_top = true;
  return true;
}

bool ct_pool_absorb_relu_bottom(ct_layer *pool) {
  if (!fusable(pool)) return false;
  ((pool_state *)pool->priv)->g.relu_bottom = true;
  return true;
}

bool ct_pool_take_bias(ct_layer *pool, const ct_tensor *bias) {
  if (!fusable(pool)) return false;
  pool_state *s = pool->priv;
  if (bias && (s->g.method != CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX ||
               bias->count != (size_t)s->g.C))
    return false;
  s->bias = bias;
  return true;
}

/* On the host: MAX reads its argmax (its second top when it has one), AVE
 * nothing, STOCHASTIC its draws (and in TEST its bottom).  The GPU paths
 * (cuDNN's, fused ReLUs) may read both. */
static void pool_backward_reads(const ct_layer *l, bool *bottoms, bool *tops) {
  const pool_state *s = l->priv;
  if (!s || l->ctx->device != CT_DEVICE_CPU) return;
  ct_layer_reads_no_values(l, bottoms, tops);
  if (s->g.method == CAFFE__POOLING_PARAMETER__POOL_METHOD__MAX && l->ntop > 1) tops[1] = true;
  if (s->g.method == CAFFE__POOLING_PARAMETER__POOL_METHOD__STOCHASTIC && l->phase != CT_PHASE_TRAIN)
    bottoms[0] = true;
}

/* What backward reads of the last forward beyond the blobs: MAX's argmax
 * (one top), STOCHASTIC's choices (layer.h). */
static int pool_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  pool_state *s = l->priv;
  int n = 0;
  ct_tensor *const kept[2] = {s->mask, s->rand};
  for (int i = 0; i < 2 && n < cap; i++)
    if (kept[i]->count && kept[i]->data)
      out[n++] = (ct_layer_region){kept[i]->data, ct_tensor_bytes(kept[i], kept[i]->count)};
  return n;
}

const ct_layer_ops ct_pooling_ops = {
    .type = "Pooling",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 2,
    .setup = pool_setup,
    .reshape = pool_reshape,
    .backward_reads = pool_backward_reads,
    .backward_state = pool_backward_state,
    .forward_cpu = pool_forward_cpu,
    .backward_cpu = pool_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = pool_forward_gpu,
    .backward_gpu = pool_backward_gpu,
    .reshape_gpu = pool_reshape_gpu,
    .destroy_gpu = ct_pool_cudnn_destroy,
#endif
    .destroy = pool_destroy,
    .dtypes_cpu = CT_DTYPE_BIT(CT_BF16),
    .dtypes_gpu = CT_DTYPE_BIT(CT_BF16) | CT_DTYPE_BIT(CT_F16),
    .layouts_cpu = CT_LAYOUT_BIT(CT_NHWC),
    .layouts_gpu = CT_LAYOUT_BIT(CT_NHWC),
};
