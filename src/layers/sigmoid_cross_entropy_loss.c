/* SigmoidCrossEntropyLoss: the cross-entropy between sigmoid(bottom 0) and
 * the targets in bottom 1 (probabilities, same count), summed in the stable
 * form  -[x (t - [x >= 0]) - log(1 + exp(x - 2 x [x >= 0]))]  and divided as
 * loss_param says.  As in Caffe, the divisor is the batch size unless
 * normalization (or the legacy normalize) is set; targets equal to
 * ignore_label (after truncation to int) are skipped. */
#include <math.h>
#include <stdlib.h>

#include "layers/layer.h"
#include "layers/loss_common.h"
#include "layers/sigmoid_cross_entropy_loss.h"
#include "math/math.h"

typedef struct {
  ct_loss_norm norm;
  bool has_ignore;
  int ignore_label;
  size_t outer, inner;  /* shape[0] and the rest */
  ct_tensor *sigmoid;   /* like bottom 0: sigmoid(x), for backward */
  double normalizer;    /* of the last forward */
  ct_loss_scratch gpu;  /* GPU path only */
} sigmoid_ce_priv;

static bool ignored(const sigmoid_ce_priv *p, float target) {
  int v;
  return p->has_ignore && ct_label_to_int(target, &v) && v == p->ignore_label;
}

static ct_status sigmoid_ce_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  const Caffe__LossParameter *lp = CT_PARAM_OR_DEFAULT(l, loss_param, CAFFE__LOSS_PARAMETER__INIT);
  sigmoid_ce_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->norm = ct_loss_normalization(lp, CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__BATCH_SIZE);
  p->has_ignore = lp->has_ignore_label;
  p->ignore_label = lp->ignore_label;
  p->sigmoid = ct_tensor_new(l->ctx->device, "sigmoid_ce.sigmoid");
  p->normalizer = 1.0;
  ct_loss_scratch_init(&p->gpu, l->ctx);
  return CT_OK;
}

static ct_status sigmoid_ce_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                    ct_error *err) {
  sigmoid_ce_priv *p = l->priv;
  CT_TRY(ct_loss_reshape(bottom, top, err));
  if (bottom[0]->count != bottom[1]->count)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the predictions and targets must have the same count, got %zu and %zu",
                        bottom[0]->count, bottom[1]->count);
  p->outer = (size_t)bottom[0]->shape[0];
  p->inner = ct_tensor_count_range(bottom[0], 1, bottom[0]->ndim);
  ct_tensor_reshape_like(p->sigmoid, bottom[0]);
  ct_loss_scratch_reshape(&p->gpu, bottom[0]->count);
  return CT_OK;
}

static ct_status sigmoid_ce_forward_cpu(ct_layer *l, ct_tensor *const *bottom,
                                        ct_tensor *const *top, ct_error *err) {
  sigmoid_ce_priv *p = l->priv;
  const float *x = bottom[0]->data, *t = bottom[1]->data;
  float *s = p->sigmoid->data;
  double loss = 0;
  long valid = 0;
  for (size_t i = 0; i < bottom[0]->count; i++) {
    s[i] = 0.5f * tanhf(0.5f * x[i]) + 0.5f; /* Caffe's sigmoid */
    if (ignored(p, t[i])) continue;
    float pos = x[i] >= 0 ? 1.0f : 0.0f;
    loss -= x[i] * (t[i] - pos) - log1pf(expf(x[i] - 2.0f * x[i] * pos));
    valid++;
  }
  p->normalizer = ct_loss_normalizer(p->norm, p->outer, p->inner, valid);
  ct_f32(top[0])[0] = (float)(loss / p->normalizer);
  return CT_OK;
}

static void sigmoid_ce_backward_cpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                    ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  sigmoid_ce_priv *p = l->priv;
  const float *s = p->sigmoid->data, *t = bottom[1]->data;
  float *dx = bottom[0]->diff;
  float scale = (float)(ct_f32_diff(top[0])[0] / p->normalizer);
  for (size_t i = 0; i < bottom[0]->count; i++)
    dx[i] = ignored(p, t[i]) ? 0.0f : scale * (s[i] - t[i]);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status sigmoid_ce_forward_gpu(ct_layer *l, ct_tensor *const *bottom,
                                        ct_tensor *const *top, ct_error *err) {
  sigmoid_ce_priv *p = l->priv;
  size_t n = bottom[0]->count;
  ct_sigmoid_ce_forward_gpu(l->ctx, n, bottom[0]->data, bottom[1]->data, p->has_ignore,
                            p->ignore_label, p->sigmoid->data, p->gpu.value->data,
                            p->gpu.flag->data);
  ct_loss_finish f = {.norm = p->norm, .outer = p->outer, .inner = p->inner, .scale = 1.0};
  ct_loss_finish_gpu(l->ctx, &p->gpu, n, p->gpu.value->data, p->gpu.flag->data, &f, top[0]->data);
  return CT_OK;
}

static void sigmoid_ce_backward_gpu(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                    ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  sigmoid_ce_priv *p = l->priv;
  ct_sigmoid_ce_backward_gpu(l->ctx, bottom[0]->count, p->sigmoid->data, bottom[1]->data,
                             p->has_ignore, p->ignore_label, top[0]->diff, p->gpu.inv_norm->data,
                             bottom[0]->diff);
}
#endif

static void sigmoid_ce_destroy(ct_layer *l) {
  sigmoid_ce_priv *p = l->priv;
  if (!p) return;
  ct_tensor_free(p->sigmoid);
  ct_loss_scratch_free(&p->gpu);
  free(p);
}

const ct_layer_ops ct_sigmoid_cross_entropy_loss_ops = {
    .type = "SigmoidCrossEntropyLoss",
    .min_bottoms = 2, .max_bottoms = 2, .min_tops = 1, .max_tops = 1,
    .flags = CT_LAYER_LOSS | CT_LAYER_AUTO_TOPS,
    .no_force_backward_bottoms = 1u << 1,
    .setup = sigmoid_ce_setup,
    .reshape = sigmoid_ce_reshape,
    .forward_cpu = sigmoid_ce_forward_cpu,
    .backward_cpu = sigmoid_ce_backward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = sigmoid_ce_forward_gpu,
    .backward_gpu = sigmoid_ce_backward_gpu,
#endif
    .destroy = sigmoid_ce_destroy,
};
