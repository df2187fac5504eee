/* Softmax: y = exp(x - max) / sum exp(x - max) over softmax_param.axis
 * (default 1), at every position of the other axes.  In-place safe. */
#include <math.h>
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/softmax.h"
#ifdef CORTADO_HAVE_CUDA
#include "layers/softmax_cudnn.h"
#endif

typedef struct {
  int axis;         /* canonical softmax axis */
  size_t outer;     /* product of the axes before it */
  int channels;     /* its size */
  size_t inner;     /* product of the axes after it */
  ct_tensor *scratch; /* (inner) on the host, for the CPU path */
} softmax_priv;

void ct_softmax_cpu(size_t outer, int channels, size_t inner, const float *x, float *y,
                    float *scratch) {
  size_t dim = (size_t)channels * inner;
  for (size_t i = 0; i < outer; i++) {
    const float *xi = x + i * dim;
    float *yi = y + i * dim;
    /* Per position: the max over channels, then exp, then the sum. */
    for (size_t k = 0; k < inner; k++) scratch[k] = xi[k];
    for (int c = 1; c < channels; c++)
      for (size_t k = 0; k < inner; k++) scratch[k] = fmaxf(scratch[k], xi[c * inner + k]);
    for (int c = 0; c < channels; c++)
      for (size_t k = 0; k < inner; k++) yi[c * inner + k] = expf(xi[c * inner + k] - scratch[k]);
    for (size_t k = 0; k < inner; k++) scratch[k] = 0.0f;
    for (int c = 0; c < channels; c++)
      for (size_t k = 0; k < inner; k++) scratch[k] += yi[c * inner + k];
    for (int c = 0; c < channels; c++)
      for (size_t k = 0; k < inner; k++) yi[c * inner + k] /= scratch[k];
  }
}

static ct_status softmax_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  softmax_priv *p = ct_xcalloc(1, sizeof *p);
  if (l->ctx->device == CT_DEVICE_CPU) p->scratch = ct_tensor_new(CT_DEVICE_CPU, "softmax.scratch");
  l->priv = p;
  return CT_OK;
}

static ct_status softmax_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  softmax_priv *p = l->priv;
  const Caffe__SoftmaxParameter *sp =
      CT_PARAM_OR_DEFAULT(l, softmax_param, CAFFE__SOFTMAX_PARAMETER__INIT);
  if (ct_tensor_canonical_axis(bottom[0], sp->axis, &p->axis, err) != CT_OK)
    return ct_error_prefix(err, "softmax_param.axis");
  p->outer = ct_tensor_count_range(bottom[0], 0, p->axis);
  p->channels = bottom[0]->shape[p->axis];
  p->inner = ct_tensor_count_range(bottom[0], p->axis + 1, bottom[0]->ndim);
  if (top[0] != bottom[0]) ct_tensor_reshape_like(top[0], bottom[0]);
  if (p->scratch) ct_tensor_reshape_or_die(p->scratch, 1, (int[]){(int)p->inner});
  return CT_OK;
}

static ct_status softmax_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  softmax_priv *p = l->priv;
  ct_softmax_cpu(p->outer, p->channels, p->inner, bottom[0]->data, top[0]->data, p->scratch->data);
  return CT_OK;
}

static void softmax_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                 ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  softmax_priv *p = l->priv;
  size_t inner = p->inner, dim = (size_t)p->channels * inner;
  float *dot = p->scratch->data;
  for (size_t i = 0; i < p->outer; i++) {
    const float *y = ct_f32(top[0]) + i * dim, *dy = ct_f32_diff(top[0]) + i * dim;
    float *dx = ct_f32_diff(bottom[0]) + i * dim;
    for (size_t k = 0; k < inner; k++) dot[k] = 0.0f;
    for (int c = 0; c < p->channels; c++)
      for (size_t k = 0; k < inner; k++) dot[k] += dy[c * inner + k] * y[c * inner + k];
    for (int c = 0; c < p->channels; c++)
      for (size_t k = 0; k < inner; k++)
        dx[c * inner + k] = y[c * inner + k] * (dy[c * inner + k] - dot[k]);
  }
}

#ifdef CORTADO_HAVE_CUDA
static ct_status softmax_reshape_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  softmax_priv *p = l->priv;
  const Caffe__SoftmaxParameter *sp =
      CT_PARAM_OR_DEFAULT(l, softmax_param, CAFFE__SOFTMAX_PARAMETER__INIT);
  return ct_softmax_cudnn_reshape(l, (int)sp->engine, p->outer, p->channels, p->inner,
                                  top[0] == bottom[0], err);
}

static ct_status softmax_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  if (l->gpu_priv) {
    ct_softmax_cudnn_forward(l, bottom[0]->data, top[0]->data);
    return CT_OK;
  }
  softmax_priv *p = l->priv;
  ct_softmax_forward_gpu(l->ctx, p->outer, p->channels, p->inner, bottom[0]->data, top[0]->data);
  return CT_OK;
}

static void softmax_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                 ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  if (l->gpu_priv) {
    ct_softmax_cudnn_backward(l, top[0]->data, top[0]->diff, bottom[0]->diff);
    return;
  }
  softmax_priv *p = l->priv;
  ct_softmax_backward_gpu(l->ctx, p->outer, p->channels, p->inner, top[0]->data, top[0]->diff,
                          bottom[0]->diff);
}
#endif

static void softmax_destroy(ct_layer *l) {
  softmax_priv *p = l->priv;
  if (!p) return;
  ct_tensor_free(p->scratch);
  free(p);
}

const ct_layer_ops ct_softmax_ops = {
    .type = "Softmax",
    .flags = CT_LAYER_BACKWARD_FROM_BLOBS,
    .min_bottoms = 1, .max_bottoms = 1, .min_tops = 1, .max_tops = 1,
    .setup = softmax_setup,
    .reshape = softmax_reshape,
    .forward_cpu = softmax_forward_cpu,
    .backward_cpu = softmax_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = softmax_forward_gpu,
    .backward_gpu = softmax_backward_gpu,
    .reshape_gpu = softmax_reshape_gpu,
    .destroy_gpu = ct_softmax_cudnn_destroy,
#endif
    .destroy = softmax_destroy,
};
