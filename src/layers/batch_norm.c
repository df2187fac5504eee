/* BatchNorm (Caffe's, without scale and shift: that is the Scale layer).
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
 * divided by the factor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/batch_norm.h"
#include "layers/layer.h"
#include "math/math.h"

typedef struct {
  bool use_global_stats;
  float moving_average_fraction, eps;
  int channels; /* C, fixed at setup */
  int num;      /* N of the current bottom */
  size_t spatial; /* product of the axes after C */
  ct_tensor *mean;   /* (C) statistics of the last forward */
  ct_tensor *std;    /* (C) sqrt(var + eps) of the last forward */
  ct_tensor *x_norm; /* like bottom: y of the last training forward */
} batch_norm_state;

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
  s->x_norm = ct_tensor_new(l->ctx->device, NULL);
  return CT_OK;
}

static ct_status batch_norm_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                    ct_error *err) {
  batch_norm_state *s = l->priv;
  CT_TRY(check_bottom(bottom[0], s->channels, err));
  ct_tensor_reshape_or_die(s->mean, 1, &s->channels);
  ct_tensor_reshape_or_die(s->std, 1, &s->channels);
  ct_tensor_reshape_like(s->x_norm, bottom[0]);
  if (top[0] != bottom[0]) ct_tensor_reshape_like(top[0], bottom[0]);
  s->num = bottom[0]->shape[0];
  s->spatial = ct_tensor_count_range(bottom[0], 2, bottom[0]->ndim);
  return CT_OK;
}

static ct_status batch_norm_forward_cpu(ct_layer *l, ct_tensor *const *bottom,
                                        ct_tensor *const *top, ct_error *err) {
  batch_norm_state *s = l->priv;
  const int C = s->channels;
  const size_t N = (size_t)s->num, S = s->spatial;
  const float *x = bottom[0]->data;
  float *y = top[0]->data, *mean = s->mean->data, *std = s->std->data;
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
    factor[0] = factor[0] * f + 1.0f;
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
      mean_sum[c] = mean[c] + f * mean_sum[c];
      var_sum[c] = correction * var + f * var_sum[c];
    }
  }
  for (size_t n = 0; n < N; n++)
    for (int c = 0; c < C; c++) {
      size_t base = (n * C + c) * S;
      for (size_t i = 0; i < S; i++) y[base + i] = (x[base + i] - mean[c]) / std[c];
    }
  /* Backward needs y, which a later in-place layer may overwrite. */
  if (!s->use_global_stats) memcpy(s->x_norm->data, y, top[0]->count * sizeof(float));
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
  const float *dy = top[0]->diff, *y = s->x_norm->data, *std = s->std->data;
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

static void batch_norm_destroy(ct_layer *l) {
  batch_norm_state *s = l->priv;
  if (!s) return;
  ct_tensor_free(s->mean);
  ct_tensor_free(s->std);
  ct_tensor_free(s->x_norm);
  free(s);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status batch_norm_forward_gpu(ct_layer *l, ct_tensor *const *bottom,
                                        ct_tensor *const *top, ct_error *err) {
  batch_norm_state *s = l->priv;
  ct_batch_norm_forward_gpu(l->ctx, s->num, s->channels, s->spatial, s->eps,
                            s->moving_average_fraction, s->use_global_stats, bottom[0]->data,
                            top[0]->data, s->mean->data, s->std->data, l->params[0]->data,
                            l->params[1]->data, l->params[2]->data);
  if (!s->use_global_stats) ct_gpu_copy(l->ctx, top[0]->count, top[0]->data, s->x_norm->data);
  return CT_OK;
}

static void batch_norm_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                    ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  batch_norm_state *s = l->priv;
  ct_batch_norm_backward_gpu(l->ctx, s->num, s->channels, s->spatial, s->use_global_stats,
                             s->x_norm->data, s->std->data, top[0]->diff, bottom[0]->diff);
}
#endif

const ct_layer_ops ct_batch_norm_ops = {
    .type = "BatchNorm",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = batch_norm_setup,
    .reshape = batch_norm_reshape,
    .forward_cpu = batch_norm_forward_cpu,
    .backward_cpu = batch_norm_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = batch_norm_forward_gpu,
    .backward_gpu = batch_norm_backward_gpu,
#endif
    .destroy = batch_norm_destroy,
};
