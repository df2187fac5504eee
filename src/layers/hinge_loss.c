/* HingeLoss: one-vs-all hinge on N x D scores with one integer label per
 * item.  With t_nk = max(0, 1 + s_nk x_nk), s_nk = -1 for the label class
 * and +1 otherwise, the loss is sum t / N (norm L1) or sum t^2 / N (L2). */
#include <math.h>
#include <stdlib.h>

#include "layers/hinge_loss.h"
#include "layers/layer.h"
#include "layers/loss_common.h"
#include "math/math.h"

typedef struct {
  Caffe__HingeLossParameter__Norm norm;
  int num;
  size_t dim;         /* scores per item */
  ct_tensor *margin;  /* like bottom 0: t */
  ct_loss_scratch gpu; /* GPU path only: value and flag per item */
} hinge_priv;

static ct_status hinge_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  const Caffe__HingeLossParameter *hp =
      CT_PARAM_OR_DEFAULT(l, hinge_loss_param, CAFFE__HINGE_LOSS_PARAMETER__INIT);
  if (hp->norm != CAFFE__HINGE_LOSS_PARAMETER__NORM__L1 &&
      hp->norm != CAFFE__HINGE_LOSS_PARAMETER__NORM__L2)
    return ct_error_set(err, CT_ERR_INVALID, "hinge_loss_param.norm %d is neither L1 (1) nor L2 (2)",
                        (int)hp->norm);
  hinge_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->norm = hp->norm;
  p->margin = ct_tensor_new(l->ctx->device, "hinge.margin");
  ct_loss_scratch_init(&p->gpu, l->ctx);
  ct_loss_scratch_add_check(&p->gpu, l->ctx, l->name, l->ops->type);
  return CT_OK;
}

static ct_status hinge_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                               ct_error *err) {
  hinge_priv *p = l->priv;
  CT_TRY(ct_loss_reshape(bottom, top, err));
  p->num = bottom[0]->shape[0];
  if (bottom[1]->count != (size_t)p->num)
    return ct_error_set(err, CT_ERR_INVALID,
                        "number of labels must match the batch size: %d items in bottom 0, %zu "
                        "labels in bottom 1",
                        p->num, bottom[1]->count);
  p->dim = p->num ? bottom[0]->count / (size_t)p->num : 0;
  ct_tensor_reshape_like(p->margin, bottom[0]);
  ct_loss_scratch_reshape(&p->gpu, (size_t)p->num);
  return CT_OK;
}

static ct_status hinge_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  hinge_priv *p = l->priv;
  const float *x = bottom[0]->data, *label = bottom[1]->data;
  CT_TRY(ct_loss_check_labels_host(label, (size_t)p->num, (int)p->dim, false, 0, err));
  float *t = p->margin->data;
  double loss = 0;
  for (int n = 0; n < p->num; n++) {
    size_t y = (size_t)(int)label[n];
    for (size_t k = 0; k < p->dim; k++) {
      size_t i = (size_t)n * p->dim + k;
      t[i] = fmaxf(0.0f, 1.0f + (k == y ? -x[i] : x[i]));
      loss += p->norm == CAFFE__HINGE_LOSS_PARAMETER__NORM__L1 ? t[i] : (double)t[i] * t[i];
    }
  }
  ct_f32(top[0])[0] = (float)(loss / p->num);
  return CT_OK;
}

static void hinge_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  hinge_priv *p = l->priv;
  const float *t = p->margin->data, *label = bottom[1]->data;
  float *dx = bottom[0]->diff;
  float scale = ct_f32_diff(top[0])[0] / (float)p->num;
  bool l1 = p->norm == CAFFE__HINGE_LOSS_PARAMETER__NORM__L1;
  for (int n = 0; n < p->num; n++) {
    size_t y = (size_t)(int)label[n];
    for (size_t k = 0; k < p->dim; k++) {
      size_t i = (size_t)n * p->dim + k;
      float g = l1 ? (t[i] > 0.0f ? 1.0f : 0.0f) : 2.0f * t[i];
      dx[i] = scale * (k == y ? -g : g);
    }
  }
}

#ifdef CORTADO_HAVE_CUDA
static ct_status hinge_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                   ct_error *err) {
  hinge_priv *p = l->priv;
  bool l1 = p->norm == CAFFE__HINGE_LOSS_PARAMETER__NORM__L1;
  ct_hinge_forward_gpu(l->ctx, p->num, p->dim, bottom[0]->data, bottom[1]->data, l1,
                       p->margin->data, p->gpu.value->data, p->gpu.flag->data);
  ct_loss_finish f = {.norm = CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__BATCH_SIZE,
                      .outer = (size_t)p->num, .inner = 1, .scale = 1.0, .label = bottom[1],
                      .nclass = (int)p->dim};
  ct_loss_finish_gpu(l->ctx, &p->gpu, (size_t)p->num, p->gpu.value->data, p->gpu.flag->data, &f,
                     top[0]->data);
  return CT_OK;
}

static void hinge_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                               ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  hinge_priv *p = l->priv;
  ct_hinge_backward_gpu(l->ctx, p->num, p->dim, p->margin->data, bottom[1]->data,
                        p->norm == CAFFE__HINGE_LOSS_PARAMETER__NORM__L1, top[0]->diff,
                        1.0f / (float)p->num, bottom[0]->diff);
}
#endif

static void hinge_destroy(ct_layer *l) {
  hinge_priv *p = l->priv;
  if (!p) return;
  ct_tensor_free(p->margin);
  ct_loss_scratch_free(&p->gpu);
  free(p);
}

const ct_layer_ops ct_hinge_loss_ops = {
    .type = "HingeLoss",
    .min_bottoms = 2, .max_bottoms = 2, .min_tops = 1, .max_tops = 1,
    .flags = CT_LAYER_LOSS | CT_LAYER_AUTO_TOPS,
    .no_force_backward_bottoms = 1u << 1,
    .setup = hinge_setup,
    .reshape = hinge_reshape,
    .forward_cpu = hinge_forward_cpu,
    .backward_cpu = hinge_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = hinge_forward_gpu,
    .backward_gpu = hinge_backward_gpu,
#endif
    .destroy = hinge_destroy,
};
