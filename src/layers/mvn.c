/* MVN: mean-variance normalisation of each (n, c) plane, or of each sample n
 * when across_channels: y = x - mean, and with normalize_variance
 * y = (x - mean) / (std + eps) (Caffe adds eps to the standard deviation, not
 * to the variance).  Backward, as Caffe:
 *   dx = (dy - mean(dy) - y * mean(dy * y)) / (std + eps)   or dx = dy - mean(dy),
 * the means over each group.  It uses y (the top data), so in place is free. */
#include <math.h>
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/mvn.h"
#include "layers/neuron.h"

typedef struct {
  bool normalize_variance, across_channels;
  float eps;
  size_t groups; /* N, or N * C */
  size_t dim;    /* values per group */
  ct_tensor *std; /* (groups) std + eps of the last forward */
} mvn_state;

static ct_status mvn_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                           ct_error *err) {
  const Caffe__MVNParameter *p = CT_PARAM_OR_DEFAULT(l, mvn_param, CAFFE__MVNPARAMETER__INIT);
  mvn_state *s = ct_xcalloc(1, sizeof *s);
  s->normalize_variance = p->normalize_variance;
  s->across_channels = p->across_channels;
  s->eps = p->eps;
  s->std = ct_tensor_new(l->ctx->device, NULL);
  l->priv = s;
  return CT_OK;
}

static ct_status mvn_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  mvn_state *s = l->priv;
  const ct_tensor *b = bottom[0];
  s->groups = (size_t)ct_tensor_legacy_dim(b, 0);
  if (!s->across_channels) s->groups *= (size_t)ct_tensor_legacy_dim(b, 1);
  s->dim = s->groups ? b->count / s->groups : 0;
  int groups = (int)s->groups;
  ct_tensor_reshape_or_die(s->std, 1, &groups);
  return ct_neuron_reshape(l, bottom, top, err);
}

static ct_status mvn_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  mvn_state *s = l->priv;
  const size_t D = s->dim;
  float *std = s->std->data;
  for (size_t g = 0; g < s->groups; g++) {
    const float *x = ct_f32(bottom[0]) + g * D;
    float *y = ct_f32(top[0]) + g * D;
    double sum = 0;
    for (size_t i = 0; i < D; i++) sum += x[i];
    float mean = (float)(sum / (double)D);
    for (size_t i = 0; i < D; i++) y[i] = x[i] - mean;
    if (!s->normalize_variance) continue;
    double sumsq = 0;
    for (size_t i = 0; i < D; i++) sumsq += (double)y[i] * y[i];
    std[g] = sqrtf((float)(sumsq / (double)D)) + s->eps;
    for (size_t i = 0; i < D; i++) y[i] /= std[g];
  }
  return CT_OK;
}

static void mvn_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  mvn_state *s = l->priv;
  const size_t D = s->dim;
  const float *std = s->std->data;
  for (size_t g = 0; g < s->groups; g++) {
    const float *y = ct_f32(top[0]) + g * D, *dy = ct_f32_diff(top[0]) + g * D;
    float *dx = ct_f32_diff(bottom[0]) + g * D;
    double sum_dy = 0, sum_dy_y = 0;
    for (size_t i = 0; i < D; i++) {
      sum_dy += dy[i];
      sum_dy_y += (double)dy[i] * y[i];
    }
    float a = (float)(sum_dy / (double)D);
    if (!s->normalize_variance) {
      for (size_t i = 0; i < D; i++) dx[i] = dy[i] - a;
      continue;
    }
    float b = (float)(sum_dy_y / (double)D);
    for (size_t i = 0; i < D; i++) dx[i] = (dy[i] - a - y[i] * b) / std[g];
  }
}

static void mvn_destroy(ct_layer *l) {
  mvn_state *s = l->priv;
  if (!s) return;
  ct_tensor_free(s->std);
  free(s);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status mvn_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  mvn_state *s = l->priv;
  ct_mvn_forward_gpu(l->ctx, s->groups, s->dim, s->normalize_variance, s->eps, bottom[0]->data,
                     top[0]->data, s->std->data);
  return CT_OK;
}

static void mvn_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                             ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  mvn_state *s = l->priv;
  ct_mvn_backward_gpu(l->ctx, s->groups, s->dim, s->normalize_variance, top[0]->data, s->std->data,
                      top[0]->diff, bottom[0]->diff);
}
#endif

const ct_layer_ops ct_mvn_ops = {
    .type = "MVN",
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = mvn_setup,
    .reshape = mvn_reshape,
    .forward_cpu = mvn_forward_cpu,
    .backward_cpu = mvn_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = mvn_forward_gpu,
    .backward_gpu = mvn_backward_gpu,
#endif
    .destroy = mvn_destroy,
};
