/* BatchNorm (Caffe's, without scale and shift: that is the Scale layer;
 * with NVCaffe's scale_bias, its own).
 * Normalises each channel (axis 1) over the batch and the spatial axes:
 * y = (x - mean_c) / sqrt(var_c + eps).
 *
 * Learnable blobs, in Caffe's order, never learned (param_propagate_down is
 * false, and a ParamSpec may only give them lr_mult 0): running mean sum (C),
 * running variance sum (C), and the moving-average factor (1).  A training
 * forward (use_global_stats false) updates them as Caffe does:
 *   factor = factor * f + 1, mean_sum = mean + f * mean_sum,
 *   var_sum = m / (m - 1) * var + f * var_sum   (m = values per channel),
 * and with use_global_stats (default in TEST) the statistics are the sums
 * divided by the factor.
 *
 * NVCaffe's scale_bias (or a scale_filler or bias_filler, which imply it):
 * two more learnable blobs, as NVCaffe orders them, scale gamma (C) filled
 * by scale_filler (unset: 1) and bias beta (C) by bias_filler (unset: 0),
 * learned with lr_mult and decay_mult 1 unless a ParamSpec says otherwise,
 * and y = gamma (x - mean) / std + beta, computed as a fused BatchNorm +
 * Scale pair (below) whose Scale is the layer itself, with frozen
 * statistics too (dx = gamma dy / std then).
 *
 * Fused with the Scale that follows (ct_batch_norm_absorb_scale, called by
 * net_fuse.c): y = gamma (x - mean) / std + beta in one pass, and dx,
 * dgamma, dbeta in one backward pass, with the Scale's parameters.  The
 * arithmetic is the unfused pair's, operation for operation, so on the CPU
 * the results are the same bits.  On a GPU, global statistics fuse too: the
 * pair (and a ReLU after it) is then y = a x + b per channel, one pass each
 * way (with the Scale's gradients from per-channel sums of dy and dy x). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/batch_norm.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/batch_norm_cudnn.h"
#include "layers/channel_typed.h"
#endif
#include "layers/filler.h"
#include "layers/layer.h"
#include "layers/scale.h"
#include "math/math.h"
#include "math/typed.h"

extern const ct_layer_ops ct_batch_norm_ops;

typedef struct {
  bool use_global_stats;
  float moving_average_fraction, eps;
  int channels; /* C, fixed at setup */
  int num;      /* N of the current bottom */
  size_t spatial; /* product of the axes after C */
  ct_tensor *mean;   /* (C) statistics of the last forward */
  ct_tensor *std;    /* (C) sqrt(var + eps) of the last forward */
  /* Like bottom, only when backward needs it (else empty): the normalised
   * x of the last training forward (unfused; fused on a GPU without cuDNN),
   * or x itself when the layer runs in place (fused on the CPU; cuDNN). */
  ct_tensor *saved;
  /* Whose gamma and beta y = gamma x_hat + beta uses: the absorbed Scale
   * layer (its params 0 and 1), this layer (scale_bias: params 3 and 4), or
   * NULL for none. */
  ct_layer *scale;
  int affine_at;     /* index of gamma in scale->params (beta follows) */
  bool relu;         /* a ReLU after the Scale absorbed too */
  /* GPU, global statistics fused with the Scale: (6 C) mean, invstd, a, b
   * (y = a x + b), dot and sum (backward's per-channel sums), and the sums'
   * scratch */
  ct_tensor *frozen, *frozen_scratch;
  bool need_dx;      /* fused: the bottom gets a gradient */
} batch_norm_state;

/* gamma, beta and whether their gradients are wanted. */
static ct_tensor *bn_gamma(const batch_norm_state *s) { return s->scale->params[s->affine_at]; }
static ct_tensor *bn_beta(const batch_norm_state *s) { return s->scale->params[s->affine_at + 1]; }
static float *bn_dgamma(const batch_norm_state *s) {
  return s->scale->param_propagate_down[s->affine_at] ? bn_gamma(s)->diff : NULL;
}
static float *bn_dbeta(const batch_norm_state *s) {
  return s->scale->param_propagate_down[s->affine_at + 1] ? bn_beta(s)->diff : NULL;
}

/* NVCaffe's scale and bias blobs (params 3 and 4). */
static ct_status add_scale_bias(ct_layer *l, const Caffe__BatchNormParameter *p, ct_error *err) {
  batch_norm_state *s = l->priv;
  Caffe__FillerParameter one = CAFFE__FILLER_PARAMETER__INIT, zero = CAFFE__FILLER_PARAMETER__INIT;
  one.type = "constant";
  one.has_value = 1;
  one.value = 1.0f;
  ct_tensor *gamma = ct_layer_add_param(l, 1, &s->channels);
  CT_TRY(ct_filler_fill(p->scale_filler ? p->scale_filler : &one, gamma, &l->ctx->rng, err));
  ct_tensor *beta = ct_layer_add_param(l, 1, &s->channels);
  CT_TRY(ct_filler_fill(p->bias_filler ? p->bias_filler : &zero, beta, &l->ctx->rng, err));
  s->scale = l;
  s->affine_at = 3;
  s->need_dx = true;
  return CT_OK;
}

static ct_status check_bottom(const ct_tensor *bottom, int channels, ct_error *err) {
  if (bottom->ndim < 2)
    return ct_error_set(err, CT_ERR_INVALID,
                        "BatchNorm needs a bottom with at least 2 axes (N, C, ...), got %d",
                        bottom->ndim);
  if (channels > 0 && bottom->shape[1] != channels)
    return ct_error_set(err, CT_ERR_INVALID,
                        "bottom has %d channels but the layer was set up for %d", bottom->shape[1],
                        channels);
  return CT_OK;
}

static ct_status batch_norm_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  CT_TRY(check_bottom(bottom[0], 0, err));
  const Caffe__LayerParameter *lp = l->param;
  for (size_t i = 0; i < lp->n_param && i < 3; i++)
    if (lp->param[i]->lr_mult != 0.0f)
      return ct_error_set(err, CT_ERR_INVALID,
                          "param[%zu].lr_mult is %g, but batch normalization statistics cannot be "
                          "learned (use lr_mult: 0 or leave the param out)",
                          i, (double)lp->param[i]->lr_mult);
  const Caffe__BatchNormParameter *p =
      CT_PARAM_OR_DEFAULT(l, batch_norm_param, CAFFE__BATCH_NORM_PARAMETER__INIT);
  batch_norm_state *s = ct_xcalloc(1, sizeof *s);
  l->priv = s;
  s->use_global_stats = p->has_use_global_stats ? p->use_global_stats : l->phase == CT_PHASE_TEST;
  s->moving_average_fraction = p->moving_average_fraction;
  s->eps = p->eps;
  s->channels = bottom[0]->shape[1];
  int one = 1;
  ct_layer_add_param(l, 1, &s->channels);
  ct_layer_add_param(l, 1, &s->channels);
  ct_layer_add_param(l, 1, &one);
  for (int i = 0; i < 3; i++) l->param_propagate_down[i] = false;
  s->mean = ct_tensor_new(l->ctx->device, NULL);
  s->std = ct_tensor_new(l->ctx->device, NULL);
  s->saved = ct_tensor_new(l->ctx->device, NULL);
  if (p->scale_bias || p->scale_filler || p->bias_filler) CT_TRY(add_scale_bias(l, p, err));
  return CT_OK;
}

/* Makes saved like bottom when wanted, else frees its storage. */
static void want_saved(ct_layer *l, batch_norm_state *s, const ct_tensor *bottom, bool want) {
  if (want) {
    if (s->saved->dtype != bottom->dtype) ct_tensor_set_dtype(s->saved, bottom->dtype);
    ct_tensor_set_layout(s->saved, bottom->layout);
    ct_tensor_reshape_like(s->saved, bottom);
  } else if (s->saved->capacity) {
    ct_tensor_free(s->saved);
    s->saved = ct_tensor_new(l->ctx->device, NULL);
  }
}

static ct_status batch_norm_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                    ct_error *err) {
  batch_norm_state *s = l->priv;
  CT_TRY(check_bottom(bottom[0], s->channels, err));
  ct_tensor_reshape_or_die(s->mean, 1, &s->channels);
  ct_tensor_reshape_or_die(s->std, 1, &s->channels);
  if (top[0] != bottom[0]) ct_tensor_reshape_like(top[0], bottom[0]);
  s->num = bottom[0]->shape[0];
  s->spatial = ct_tensor_count_range(bottom[0], 2, bottom[0]->ndim);
  /* The CPU's needs (with gamma: x, in place, for dgamma; without: the
   * normalised x of a training forward); a GPU's are settled by
   * reshape_gpu, which follows. */
  if (l->ctx->device == CT_DEVICE_CPU)
    want_saved(l, s, bottom[0], s->scale ? top[0] == bottom[0] : !s->use_global_stats);
  return CT_OK;
}

/* mean and std of x per channel: the batch's (and the running sums and
 * factor updated, unless the forward is a recomputation), or the global
 * ones. */
static void statistics_cpu(ct_layer *l, const float *x) {
  batch_norm_state *s = l->priv;
  const int C = s->channels;
  const size_t N = (size_t)s->num, S = s->spatial;
  float *mean = s->mean->data, *std = s->std->data;
  float *mean_sum = l->params[0]->data, *var_sum = l->params[1]->data;
  float *factor = l->params[2]->data;
  if (s->use_global_stats) {
    float k = factor[0] == 0.0f ? 0.0f : 1.0f / factor[0];
    for (int c = 0; c < C; c++) {
      mean[c] = k * mean_sum[c];
      std[c] = sqrtf(k * var_sum[c] + s->eps);
    }
  } else {
    const double m = (double)N * (double)S;
    const float f = s->moving_average_fraction;
    const float correction = m > 1 ? (float)(m / (m - 1)) : 1.0f;
    const bool update = !l->recomputing;
    if (update) factor[0] = factor[0] * f + 1.0f;
    for (int c = 0; c < C; c++) {
      double sum = 0, sumsq = 0;
      for (size_t n = 0; n < N; n++) {
        const float *p = x + (n * C + c) * S;
        for (size_t i = 0; i < S; i++) sum += p[i];
      }
      double mu = m > 0 ? sum / m : 0;
      for (size_t n = 0; n < N; n++) {
        const float *p = x + (n * C + c) * S;
        for (size_t i = 0; i < S; i++) sumsq += (p[i] - mu) * (p[i] - mu);
      }
      float var = m > 0 ? (float)(sumsq / m) : 0.0f;
      mean[c] = (float)mu;
      std[c] = sqrtf(var + s->eps);
      if (!update) continue;
      mean_sum[c] = mean[c] + f * mean_sum[c];
      var_sum[c] = correction * var + f * var_sum[c];
    }
  }
}

static ct_status batch_norm_forward_cpu(ct_layer *l, ct_tensor *const *bottom,
                                        ct_tensor *const *top, ct_error *err) {
  batch_norm_state *s = l->priv;
  const int C = s->channels;
  const size_t N = (size_t)s->num, S = s->spatial;
  const float *x = bottom[0]->data;
  float *y = top[0]->data;
  if (s->scale && s->saved->capacity) {
    memcpy(s->saved->data, x, bottom[0]->count * sizeof(float));
    x = s->saved->data;
  }
  statistics_cpu(l, x);
  const float *mean = s->mean->data, *std = s->std->data;
  const float *gamma = s->scale ? bn_gamma(s)->data : NULL;
  const float *beta = s->scale ? bn_beta(s)->data : NULL;
  for (size_t n = 0; n < N; n++)
    for (int c = 0; c < C; c++) {
      size_t base = (n * C + c) * S;
      if (gamma)
        for (size_t i = 0; i < S; i++) {
          float x_hat = (x[base + i] - mean[c]) / std[c];
          y[base + i] = x_hat * gamma[c] + beta[c];
        }
      else
        for (size_t i = 0; i < S; i++) y[base + i] = (x[base + i] - mean[c]) / std[c];
    }
  /* Backward needs y, which a later in-place layer may overwrite. */
  if (!s->scale && !s->use_global_stats)
    memcpy(s->saved->data, y, top[0]->count * sizeof(float));
  return CT_OK;
}

/* With batch statistics: dx = (dy - mean(dy) - y * mean(dy * y)) / std, the
 * means per channel over N and the spatial axes.  The per-channel sums are
 * taken before dx is written, so dx may alias dy (in place). */
static void batch_norm_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                    ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  batch_norm_state *s = l->priv;
  const int C = s->channels;
  const size_t N = (size_t)s->num, S = s->spatial;
  const float *dy = top[0]->diff, *y = s->saved->data, *std = s->std->data;
  float *dx = bottom[0]->diff;
  for (int c = 0; c < C; c++) {
    float a = 0, b = 0;
    if (!s->use_global_stats) {
      double sum_dy = 0, sum_dy_y = 0;
      for (size_t n = 0; n < N; n++) {
        size_t base = (n * C + c) * S;
        for (size_t i = 0; i < S; i++) {
          sum_dy += dy[base + i];
          sum_dy_y += (double)dy[base + i] * y[base + i];
        }
      }
      double m = (double)N * (double)S;
      a = (float)(sum_dy / m);
      b = (float)(sum_dy_y / m);
    }
    for (size_t n = 0; n < N; n++) {
      size_t base = (n * C + c) * S;
      if (s->use_global_stats)
        for (size_t i = 0; i < S; i++) dx[base + i] = dy[base + i] / std[c];
      else
        for (size_t i = 0; i < S; i++)
          dx[base + i] = (dy[base + i] - a - y[base + i] * b) / std[c];
    }
  }
}

/* Fused: with z the output and dz its gradient, the Scale's gradients
 * dbeta += sum(dz), dgamma += sum(dz x_hat) and dy = dz gamma, then the
 * BatchNorm's dx from dy (dy / std with frozen statistics), channel by
 * channel (dx may alias dz). */
static void batch_norm_scale_backward_cpu(ct_layer *l, ct_tensor *const *top,
                                          const bool *propagate_down, ct_tensor *const *bottom) {
  batch_norm_state *s = l->priv;
  const int C = s->channels;
  const size_t N = (size_t)s->num, S = s->spatial;
  const double m = (double)N * (double)S;
  const float *dz = top[0]->diff, *mean = s->mean->data, *std = s->std->data;
  const float *x = s->saved->capacity ? s->saved->data : bottom[0]->data;
  const float *gamma = bn_gamma(s)->data;
  float *dgamma = bn_dgamma(s), *dbeta = bn_dbeta(s);
  float *dx = propagate_down[0] && s->need_dx ? bottom[0]->diff : NULL;
  for (int c = 0; c < C; c++) {
    double sum_dz = 0, sum_dz_xhat = 0, sum_dy = 0, sum_dy_xhat = 0;
    for (size_t n = 0; n < N; n++) {
      size_t base = (n * C + c) * S;
      for (size_t i = 0; i < S; i++) {
        float x_hat = (x[base + i] - mean[c]) / std[c], dy = dz[base + i] * gamma[c];
        sum_dz += dz[base + i];
        sum_dz_xhat += (double)dz[base + i] * x_hat;
        sum_dy += dy;
        sum_dy_xhat += (double)dy * x_hat;
      }
    }
    if (dbeta) dbeta[c] = (float)(dbeta[c] + sum_dz);
    if (dgamma) dgamma[c] = (float)(dgamma[c] + sum_dz_xhat);
    if (!dx) continue;
    float a = s->use_global_stats ? 0.0f : (float)(sum_dy / m);
    float b = s->use_global_stats ? 0.0f : (float)(sum_dy_xhat / m);
    for (size_t n = 0; n < N; n++) {
      size_t base = (n * C + c) * S;
      for (size_t i = 0; i < S; i++) {
        float x_hat = (x[base + i] - mean[c]) / std[c], dy = dz[base + i] * gamma[c];
        dx[base + i] = (dy - a - x_hat * b) / std[c];
      }
    }
  }
}

static void batch_norm_backward_any_cpu(ct_layer *l, ct_tensor *const *top,
                                        const bool *propagate_down, ct_tensor *const *bottom) {
  batch_norm_state *s = l->priv;
  if (s->scale) batch_norm_scale_backward_cpu(l, top, propagate_down, bottom);
  else batch_norm_backward_cpu(l, top, propagate_down, bottom);
}

bool ct_batch_norm_absorb_scale(ct_layer *bn, ct_layer *scale) {
  CT_ASSERT(bn->ops == &ct_batch_norm_ops && scale->nparams == 2);
  batch_norm_state *s = bn->priv;
  if ((s->use_global_stats && bn->ctx->device == CT_DEVICE_CPU) || s->scale) return false;
  CT_ASSERT(scale->params[0]->count == (size_t)s->channels &&
            scale->params[1]->count == (size_t)s->channels);
  s->scale = scale;
  s->affine_at = 0;
  s->need_dx = true;
  scale->absorbed = true;
  return true;
}

bool ct_batch_norm_absorb_relu(ct_layer *bn, ct_layer *relu) {
  CT_ASSERT(bn->ops == &ct_batch_norm_ops);
  batch_norm_state *s = bn->priv;
#ifdef CORTADO_HAVE_CUDA
  if (!s->scale || s->relu || bn->ctx->device == CT_DEVICE_CPU ||
      (!s->use_global_stats && !ct_bn_cudnn_can_relu(bn)))
    return false;
  s->relu = true;
  relu->absorbed = true;
  return true;
#else
  (void)s;
  (void)relu;
  return false;
#endif
}

void ct_batch_norm_fused_need_dx(ct_layer *bn, bool need_dx) {
  batch_norm_state *s = bn->priv;
  CT_ASSERT(bn->ops == &ct_batch_norm_ops && s->scale);
  s->need_dx = need_dx;
}

static void batch_norm_destroy(ct_layer *l) {
  batch_norm_state *s = l->priv;
  if (!s) return;
  ct_tensor_free(s->mean);
  ct_tensor_free(s->std);
  ct_tensor_free(s->saved);
  ct_tensor_free(s->frozen);
  ct_tensor_free(s->frozen_scratch);
  free(s);
}

#ifdef CORTADO_HAVE_CUDA
/* cuDNN runs the layer when it can (l->gpu_priv set).  It needs saved only
 * as the copy of the input of an in-place training layer; without cuDNN,
 * training keeps the normalised x, fused or not. */
static ct_status batch_norm_reshape_gpu(ct_layer *l, ct_tensor *const *bottom,
                                        ct_tensor *const *top, ct_error *err) {
  batch_norm_state *s = l->priv;
  const bool in_place = top[0] == bottom[0];
  CT_TRY(ct_bn_cudnn_reshape(l, s->num, s->channels, s->spatial, s->eps,
                             s->moving_average_fraction, s->use_global_stats, in_place,
                             s->scale && !s->need_dx, s->relu, err));
  if (s->use_global_stats && s->scale) {
    /* the fused frozen pair (its own kernels): x kept aside in place when
     * the Scale learns gamma */
    if (!s->frozen) s->frozen = ct_tensor_new(l->ctx->device, NULL);
    if (!s->frozen_scratch) s->frozen_scratch = ct_tensor_new(l->ctx->device, NULL);
    const int six = 6 * s->channels, k = (int)ct_channel_sums_scratch((size_t)s->channels);
    ct_tensor_reshape_or_die(s->frozen, 1, &six);
    ct_tensor_reshape_or_die(s->frozen_scratch, 1, &k);
    want_saved(l, s, bottom[0], in_place && bn_dgamma(s));
    return CT_OK;
  }
  if (!l->gpu_priv && l->dtype != CT_F32)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "%s BatchNorm runs on cuDNN only, which is off or cannot run this one",
                        ct_dtype_name(l->dtype));
  want_saved(l, s, bottom[0], !s->use_global_stats && (!l->gpu_priv || in_place));
  return CT_OK;
}

/* The frozen pair: y = a x + b per channel (then max(y, 0) with the ReLU). */
static void frozen_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top) {
  batch_norm_state *s = l->priv;
  const int C = s->channels;
  float *f = s->frozen->data;
  if (s->saved->capacity)
    ct_dev_convert(l->ctx, bottom[0]->count, bottom[0]->dtype, bottom[0]->data, bottom[0]->dtype,
                   s->saved->data);
  ct_batch_norm_frozen_affine_gpu(l->ctx, C, s->eps, l->params[0]->data, l->params[1]->data,
                                  l->params[2]->data, bn_gamma(s)->data, bn_beta(s)->data, f,
                                  f + C, f + 2 * C, f + 3 * C);
  const ct_channel_geom g = ct_channel_geom_of(l, bottom[0]);
  ct_channel_affine_gpu(l->ctx, &g, bottom[0]->data, f + 2 * C, f + 3 * C, s->relu, NULL,
                        top[0]->data);
}

/* Its backward: the ReLU's gate from y, the Scale's gradients from the
 * per-channel sums of dy and dy x, dx = a dy, in one pass. */
static void frozen_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                ct_tensor *const *bottom) {
  batch_norm_state *s = l->priv;
  const int C = s->channels;
  float *f = s->frozen->data;
  const ct_channel_geom g = ct_channel_geom_of(l, bottom[0]);
  const void *gate = s->relu ? top[0]->data : NULL;
  float *dgamma = bn_dgamma(s), *dbeta = bn_dbeta(s);
  void *dx = propagate_down[0] && s->need_dx ? bottom[0]->diff : NULL;
  const void *x = s->saved->capacity ? s->saved->data : bottom[0]->data;
  /* one pass: the sums and dx = a dy */
  ct_channel_sums_gpu(l->ctx, &g, top[0]->diff, dgamma ? x : NULL, gate, s->frozen_scratch->data,
                      false, dgamma ? f + 4 * C : NULL, dgamma || dbeta ? f + 5 * C : NULL,
                      f + 2 * C, dx);
  if (dgamma || dbeta)
    ct_batch_norm_frozen_param_grad_gpu(l->ctx, C, f, f + C, f + 4 * C, f + 5 * C, dgamma, dbeta);
}

/* (N, C, S) as the Scale's geometry, for the fused path without cuDNN. */
static ct_broadcast_dims channel_dims(const batch_norm_state *s) {
  return (ct_broadcast_dims){.axis = 1, .outer = (size_t)s->num, .dim = (size_t)s->channels,
                             .inner = s->spatial};
}

static ct_status batch_norm_forward_gpu(ct_layer *l, ct_tensor *const *bottom,
                                        ct_tensor *const *top, ct_error *err) {
  batch_norm_state *s = l->priv;
  if (s->use_global_stats && s->scale) {
    frozen_forward_gpu(l, bottom, top);
    return CT_OK;
  }
  const float *gamma = s->scale ? bn_gamma(s)->data : NULL;
  const float *beta = s->scale ? bn_beta(s)->data : NULL;
  if (l->gpu_priv) {
    ct_bn_cudnn_forward(l, bottom[0]->data, top[0]->data, s->saved->data, gamma, beta);
    return CT_OK;
  }
  ct_batch_norm_forward_gpu(l->ctx, s->num, s->channels, s->spatial, s->eps,
                            s->moving_average_fraction, s->use_global_stats, !l->recomputing,
                            bottom[0]->data,
                            top[0]->data, s->mean->data, s->std->data, l->params[0]->data,
                            l->params[1]->data, l->params[2]->data);
  if (!s->use_global_stats) ct_gpu_copy(l->ctx, top[0]->count, top[0]->data, s->saved->data);
  if (s->scale) {
    ct_broadcast_dims g = channel_dims(s);
    ct_scale_forward_gpu(l->ctx, &g, top[0]->data, gamma, top[0]->data);
    ct_bias_forward_gpu(l->ctx, &g, top[0]->data, beta, top[0]->data);
  }
  return CT_OK;
}

/* Fused without cuDNN: the Scale's backward (x_hat in saved), then the
 * BatchNorm's in place on the bottom's diff. */
static void batch_norm_scale_backward_gpu(ct_layer *l, ct_tensor *const *top,
                                          const bool *propagate_down, ct_tensor *const *bottom) {
  batch_norm_state *s = l->priv;
  ct_broadcast_dims g = channel_dims(s);
  const float *dz = top[0]->diff;
  if (bn_dbeta(s)) ct_bias_backward_operand_gpu(l->ctx, &g, dz, true, bn_dbeta(s));
  if (bn_dgamma(s)) ct_scale_backward_operand_gpu(l->ctx, &g, dz, s->saved->data, true, bn_dgamma(s));
  if (!propagate_down[0] || !s->need_dx) return;
  float *dx = bottom[0]->diff;
  ct_scale_forward_gpu(l->ctx, &g, dz, bn_gamma(s)->data, dx);
  ct_batch_norm_backward_gpu(l->ctx, s->num, s->channels, s->spatial, false, s->saved->data,
                             s->std->data, dx, dx);
}

static void batch_norm_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                    ct_tensor *const *bottom) {
  batch_norm_state *s = l->priv;
  if (s->use_global_stats && s->scale) {
    frozen_backward_gpu(l, top, propagate_down, bottom);
    return;
  }
  if (l->gpu_priv && s->scale) {
    ct_bn_cudnn_backward(l, bottom[0]->data, s->saved->data, top[0]->data, top[0]->diff,
                         propagate_down[0] && s->need_dx ? bottom[0]->diff : NULL,
                         bn_gamma(s)->data, bn_beta(s)->data, bn_dgamma(s), bn_dbeta(s));
    return;
  }
  if (s->scale) {
    batch_norm_scale_backward_gpu(l, top, propagate_down, bottom);
    return;
  }
  if (!propagate_down[0]) return;
  if (l->gpu_priv) {
    ct_bn_cudnn_backward(l, bottom[0]->data, s->saved->data, top[0]->data, top[0]->diff,
                         bottom[0]->diff, NULL, NULL, NULL, NULL);
    return;
  }
  ct_batch_norm_backward_gpu(l->ctx, s->num, s->channels, s->spatial, s->use_global_stats,
                             s->saved->data, s->std->data, top[0]->diff, bottom[0]->diff);
}
#endif

/* On a GPU only the fused ReLU's gate reads the top (cuDNN's backward takes
 * x, or the copy of x made in place; the fused pair without cuDNN keeps the
 * normalised x aside); the host's backward reads it. */
/* Backward reads the bottom; the top only on the host, or on a GPU where a
 * fused ReLU's gate is read from it. */
static void batch_norm_backward_reads(const ct_layer *l, bool *bottoms, bool *tops) {
  const batch_norm_state *s = l->priv;
  (void)bottoms;
  tops[0] = l->ctx->device == CT_DEVICE_CPU || !s || s->relu;
}

/* What backward reads of the last forward: its statistics, the saved
 * normalised x (or x, in place), the frozen statistics' fused form, and
 * cuDNN's saved mean and 1/std and reserve. */
static int batch_norm_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  batch_norm_state *s = l->priv;
  int n = 0;
  ct_tensor *const kept[] = {s->mean, s->std, s->saved, s->frozen};
  for (size_t i = 0; i < sizeof kept / sizeof kept[0] && n < cap; i++)
    if (kept[i] && kept[i]->count && kept[i]->data)
      out[n++] = (ct_layer_region){kept[i]->data, ct_tensor_bytes(kept[i], kept[i]->count)};
#ifdef CORTADO_HAVE_CUDA
  n += ct_bn_cudnn_state(l, out + n, cap - n);
#endif
  return n;
}

const ct_layer_ops ct_batch_norm_ops = {
    .type = "BatchNorm",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .flags = CT_LAYER_OWN_TOP_16,
    .backward_reads = batch_norm_backward_reads,
    .backward_state = batch_norm_backward_state,
    .setup = batch_norm_setup,
    .reshape = batch_norm_reshape,
    .forward_cpu = batch_norm_forward_cpu,
    .backward_cpu = batch_norm_backward_any_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = batch_norm_forward_gpu,
    .backward_gpu = batch_norm_backward_gpu,
    .reshape_gpu = batch_norm_reshape_gpu,
    .destroy_gpu = ct_bn_cudnn_destroy,
#endif
    .destroy = batch_norm_destroy,
    .dtypes_gpu = CT_DTYPE_BIT(CT_BF16) | CT_DTYPE_BIT(CT_F16),
    .layouts_gpu = CT_LAYOUT_BIT(CT_NHWC),
};
