/* EuclideanLoss: sum of (a - b)^2 over both bottoms, divided by 2N (N the
 * first dimension).  Both bottoms get gradients: +-(a - b) * weight / N. */
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/loss_common.h"
#include "math/math.h"

typedef struct {
  ct_tensor *diff;     /* like bottom 0: a - b */
  ct_loss_scratch gpu; /* GPU path only: the reduction's partials */
} euclidean_priv;

static ct_status euclidean_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err) {
  euclidean_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->diff = ct_tensor_new(l->ctx->device, "euclidean.diff");
  ct_loss_scratch_init(&p->gpu, l->ctx);
  return CT_OK;
}

static ct_status euclidean_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  euclidean_priv *p = l->priv;
  CT_TRY(ct_loss_reshape(bottom, top, err));
  size_t a = ct_tensor_count_range(bottom[0], 1, bottom[0]->ndim);
  size_t b = ct_tensor_count_range(bottom[1], 1, bottom[1]->ndim);
  if (a != b)
    return ct_error_set(err, CT_ERR_INVALID,
                        "inputs must have the same dimension: %zu values per item in bottom 0, %zu "
                        "in bottom 1",
                        a, b);
  ct_tensor_reshape_like(p->diff, bottom[0]);
  return CT_OK;
}

static ct_status euclidean_forward_cpu(ct_layer *l, ct_tensor *const *bottom,
                                       ct_tensor *const *top, ct_error *err) {
  euclidean_priv *p = l->priv;
  size_t n = bottom[0]->count;
  ct_cpu_sub(n, bottom[0]->data, bottom[1]->data, p->diff->data);
  double sumsq = ct_cpu_dot(n, p->diff->data, p->diff->data);
  ct_f32(top[0])[0] = (float)(sumsq / bottom[0]->shape[0] / 2.0);
  return CT_OK;
}

static void euclidean_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                   ct_tensor *const *bottom) {
  euclidean_priv *p = l->priv;
  for (int i = 0; i < 2; i++) {
    if (!propagate_down[i]) continue;
    float alpha = (i == 0 ? 1.0f : -1.0f) * ct_f32_diff(top[0])[0] / (float)bottom[i]->shape[0];
    const float *d = p->diff->data;
    float *dx = bottom[i]->diff;
    for (size_t k = 0; k < bottom[i]->count; k++) dx[k] = alpha * d[k];
  }
}

#ifdef CORTADO_HAVE_CUDA
static ct_status euclidean_forward_gpu(ct_layer *l, ct_tensor *const *bottom,
                                       ct_tensor *const *top, ct_error *err) {
  euclidean_priv *p = l->priv;
  size_t n = bottom[0]->count;
  ct_gpu_sub(l->ctx, n, bottom[0]->data, bottom[1]->data, p->diff->data);
  ct_loss_finish f = {.norm = CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__BATCH_SIZE,
                      .outer = (size_t)bottom[0]->shape[0], .inner = 1, .scale = 0.5,
                      .square = true};
  ct_loss_finish_gpu(l->ctx, &p->gpu, n, p->diff->data, NULL, &f, top[0]->data);
  return CT_OK;
}

static void euclidean_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                   ct_tensor *const *bottom) {
  euclidean_priv *p = l->priv;
  for (int i = 0; i < 2; i++) {
    if (!propagate_down[i]) continue;
    float sign_over_num = (i == 0 ? 1.0f : -1.0f) / (float)bottom[i]->shape[0];
    ct_loss_scale_gpu(l->ctx, bottom[i]->count, p->diff->data, top[0]->diff, sign_over_num,
                      bottom[i]->diff);
  }
}
#endif

static void euclidean_destroy(ct_layer *l) {
  euclidean_priv *p = l->priv;
  if (!p) return;
  ct_tensor_free(p->diff);
  ct_loss_scratch_free(&p->gpu);
  free(p);
}

const ct_layer_ops ct_euclidean_loss_ops = {
    .type = "EuclideanLoss",
    .min_bottoms = 2, .max_bottoms = 2, .min_tops = 1, .max_tops = 1,
    .flags = CT_LAYER_LOSS | CT_LAYER_AUTO_TOPS,
    .no_force_backward_bottoms = 0, /* both bottoms can take a gradient */
    .setup = euclidean_setup,
    .reshape = euclidean_reshape,
    .forward_cpu = euclidean_forward_cpu,
    .backward_cpu = euclidean_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = euclidean_forward_gpu,
    .backward_gpu = euclidean_backward_gpu,
#endif
    .destroy = euclidean_destroy,
};
