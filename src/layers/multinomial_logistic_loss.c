/* MultinomialLogisticLoss: bottom 0 holds N x D probabilities (e.g. a
 * Softmax output), bottom 1 one integer label per item; the loss is
 * -sum log(max(p[label], 1e-20)) / N. */
#include <math.h>
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/loss_common.h"
#include "layers/multinomial_logistic_loss.h"
#include "math/math.h"

typedef struct {
  int num;
  size_t dim; /* probabilities per item */
  ct_loss_scratch gpu; /* GPU path only: value and flag per item */
} multinomial_priv;

static ct_status multinomial_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  multinomial_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  ct_loss_scratch_init(&p->gpu, l->ctx);
  ct_loss_scratch_add_check(&p->gpu, l->ctx, l->name, l->ops->type);
  return CT_OK;
}

static ct_status multinomial_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                     ct_error *err) {
  multinomial_priv *p = l->priv;
  CT_TRY(ct_loss_reshape(bottom, top, err));
  const ct_tensor *label = bottom[1];
  if (label->ndim > 4 || ct_tensor_legacy_dim(label, 1) != 1 || ct_tensor_legacy_dim(label, 2) != 1 ||
      ct_tensor_legacy_dim(label, 3) != 1) {
    char s[256];
    return ct_error_set(err, CT_ERR_INVALID, "the label blob must be N x 1 x 1 x 1, got shape %s",
                        ct_tensor_shape_string(label, s, sizeof s));
  }
  p->num = bottom[0]->shape[0];
  p->dim = p->num ? bottom[0]->count / (size_t)p->num : 0;
  ct_loss_scratch_reshape(&p->gpu, (size_t)p->num);
  return CT_OK;
}

static ct_status multinomial_forward_cpu(ct_layer *l, ct_tensor *const *bottom,
                                         ct_tensor *const *top, ct_error *err) {
  multinomial_priv *p = l->priv;
  const float *prob = bottom[0]->data, *label = bottom[1]->data;
  CT_TRY(ct_loss_check_labels_host(label, (size_t)p->num, (int)p->dim, false, 0, err));
  double loss = 0;
  for (int n = 0; n < p->num; n++) {
    size_t y = (size_t)(int)label[n];
    loss -= log(fmaxf(prob[(size_t)n * p->dim + y], CT_LOG_THRESHOLD));
  }
  ct_f32(top[0])[0] = (float)(loss / p->num);
  return CT_OK;
}

static void multinomial_backward_cpu(ct_layer *l, ct_tensor *const *top,
                                     const bool *propagate_down, ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  multinomial_priv *p = l->priv;
  const float *prob = bottom[0]->data, *label = bottom[1]->data;
  float *dx = bottom[0]->diff;
  ct_cpu_set(bottom[0]->count, 0.0f, dx);
  float scale = -ct_f32_diff(top[0])[0] / (float)p->num;
  for (int n = 0; n < p->num; n++) {
    size_t i = (size_t)n * p->dim + (size_t)(int)label[n];
    dx[i] = scale / fmaxf(prob[i], CT_LOG_THRESHOLD);
  }
}

#ifdef CORTADO_HAVE_CUDA
static ct_status multinomial_forward_gpu(ct_layer *l, ct_tensor *const *bottom,
                                         ct_tensor *const *top, ct_error *err) {
  multinomial_priv *p = l->priv;
  ct_multinomial_forward_gpu(l->ctx, p->num, p->dim, bottom[0]->data, bottom[1]->data,
                             p->gpu.value->data, p->gpu.flag->data);
  ct_loss_finish f = {.norm = CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__BATCH_SIZE,
                      .outer = (size_t)p->num, .inner = 1, .scale = 1.0, .label = bottom[1],
                      .nclass = (int)p->dim};
  ct_loss_finish_gpu(l->ctx, &p->gpu, (size_t)p->num, p->gpu.value->data, p->gpu.flag->data, &f,
                     top[0]->data);
  return CT_OK;
}

static void multinomial_backward_gpu(ct_layer *l, ct_tensor *const *top,
                                     const bool *propagate_down, ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  multinomial_priv *p = l->priv;
  ct_multinomial_backward_gpu(l->ctx, p->num, p->dim, bottom[0]->data, bottom[1]->data,
                              top[0]->diff, 1.0f / (float)p->num, bottom[0]->diff);
}
#endif

static void multinomial_destroy(ct_layer *l) {
  multinomial_priv *p = l->priv;
  if (!p) return;
  ct_loss_scratch_free(&p->gpu);
  free(p);
}

const ct_layer_ops ct_multinomial_logistic_loss_ops = {
    .type = "MultinomialLogisticLoss",
    .min_bottoms = 2, .max_bottoms = 2, .min_tops = 1, .max_tops = 1,
    .flags = CT_LAYER_LOSS | CT_LAYER_AUTO_TOPS,
    .no_force_backward_bottoms = 1u << 1,
    .setup = multinomial_setup,
    .reshape = multinomial_reshape,
    .forward_cpu = multinomial_forward_cpu,
    .backward_cpu = multinomial_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = multinomial_forward_gpu,
    .backward_gpu = multinomial_backward_gpu,
#endif
    .destroy = multinomial_destroy,
};
