/* SoftmaxWithLoss: the softmax of bottom 0 over softmax_param.axis, then the
 * mean negative log-probability of the labels in bottom 1 (one integer class
 * per outer*inner position).  loss_param.ignore_label skips positions and
 * loss_param.normalization (or the legacy normalize) picks the divisor.  An
 * optional top 1 receives the probabilities.
 *
 * On a GPU, a small blob (ct_softmax_loss_fused_fits: a classifier's
 * outputs) takes one kernel for the whole forward; larger ones take three
 * (softmax, per-position loss, the deterministic reduction of
 * ct_loss_finish_gpu) and a copy for top 1.  Backward is one kernel. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "layers/loss_common.h"
#include "layers/softmax.h"
#include "layers/softmax_loss.h"
#include "math/math.h"

typedef struct {
  ct_loss_norm norm;
  bool has_ignore;
  int ignore_label;
  int axis;
  size_t outer, inner;
  int channels;
  ct_tensor *prob;    /* like bottom 0: the softmax */
  ct_tensor *scratch; /* (inner) on the host, CPU path only */
  long valid;         /* positions counted by the last forward */
  ct_loss_scratch gpu; /* GPU path only */
} softmax_loss_priv;

static ct_status softmax_loss_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                    ct_error *err) {
  const Caffe__LossParameter *lp = CT_PARAM_OR_DEFAULT(l, loss_param, CAFFE__LOSS_PARAMETER__INIT);
  softmax_loss_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->norm = ct_loss_normalization(lp, CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__VALID);
  p->has_ignore = lp->has_ignore_label;
  p->ignore_label = lp->ignore_label;
  p->prob = ct_tensor_new(l->ctx->device, "softmax_loss.prob");
  if (l->ctx->device == CT_DEVICE_CPU) p->scratch = ct_tensor_new(CT_DEVICE_CPU, "softmax_loss.scratch");
  ct_loss_scratch_init(&p->gpu, l->ctx);
  ct_loss_scratch_add_check(&p->gpu, l->ctx, l->name, l->ops->type);
  return CT_OK;
}

static ct_status softmax_loss_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                      ct_error *err) {
  softmax_loss_priv *p = l->priv;
  CT_TRY(ct_loss_reshape(bottom, top, err));
  const Caffe__SoftmaxParameter *sp =
      CT_PARAM_OR_DEFAULT(l, softmax_param, CAFFE__SOFTMAX_PARAMETER__INIT);
  if (ct_tensor_canonical_axis(bottom[0], sp->axis, &p->axis, err) != CT_OK)
    return ct_error_prefix(err, "softmax_param.axis");
  p->outer = ct_tensor_count_range(bottom[0], 0, p->axis);
  p->channels = bottom[0]->shape[p->axis];
  p->inner = ct_tensor_count_range(bottom[0], p->axis + 1, bottom[0]->ndim);
  if (p->outer * p->inner != bottom[1]->count) {
    char s[256];
    return ct_error_set(err, CT_ERR_INVALID,
                        "number of labels must match number of predictions: outer*inner = %zu*%zu = "
                        "%zu positions for prediction shape %s with class axis %d, but the label "
                        "blob has %zu values",
                        p->outer, p->inner, p->outer * p->inner,
                        ct_tensor_shape_string(bottom[0], s, sizeof s), p->axis, bottom[1]->count);
  }
  ct_tensor_reshape_like(p->prob, bottom[0]);
  if (p->scratch) ct_tensor_reshape_or_die(p->scratch, 1, (int[]){(int)p->inner});
  ct_loss_scratch_reshape(&p->gpu, p->outer * p->inner);
  if (l->ntop >= 2) ct_tensor_reshape_like(top[1], bottom[0]);
  return CT_OK;
}

static ct_status softmax_loss_forward_cpu(ct_layer *l, ct_tensor *const *bottom,
                                          ct_tensor *const *top, ct_error *err) {
  softmax_loss_priv *p = l->priv;
  const float *label = bottom[1]->data;
  CT_TRY(ct_loss_check_labels_host(label, p->outer * p->inner, p->channels, p->has_ignore,
                                   p->ignore_label, err));
  ct_softmax_cpu(p->outer, p->channels, p->inner, bottom[0]->data, p->prob->data, p->scratch->data);
  const float *prob = p->prob->data;
  size_t dim = (size_t)p->channels * p->inner;
  double loss = 0;
  long valid = 0;
  for (size_t i = 0; i < p->outer; i++) {
    for (size_t k = 0; k < p->inner; k++) {
      int y = (int)label[i * p->inner + k];
      if (p->has_ignore && y == p->ignore_label) continue;
      loss -= log(fmaxf(prob[i * dim + (size_t)y * p->inner + k], FLT_MIN));
      valid++;
    }
  }
  p->valid = valid;
  ct_f32(top[0])[0] = (float)(loss / ct_loss_normalizer(p->norm, p->outer, p->inner, valid));
  if (l->ntop >= 2) ct_cpu_copy(p->prob->count, prob, top[1]->data);
  return CT_OK;
}

static void softmax_loss_backward_cpu(ct_layer *l, ct_tensor *const *top,
                                      const bool *propagate_down, ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  softmax_loss_priv *p = l->priv;
  const float *label = bottom[1]->data;
  float *dx = bottom[0]->diff;
  size_t inner = p->inner, dim = (size_t)p->channels * inner;
  ct_cpu_copy(p->prob->count, p->prob->data, dx);
  for (size_t i = 0; i < p->outer; i++) {
    for (size_t k = 0; k < inner; k++) {
      int y = (int)label[i * inner + k];
      if (p->has_ignore && y == p->ignore_label) {
        for (int c = 0; c < p->channels; c++) dx[i * dim + (size_t)c * inner + k] = 0.0f;
      } else {
        CT_ASSERT(y >= 0 && y < p->channels); /* checked by forward */
        dx[i * dim + (size_t)y * inner + k] -= 1.0f;
      }
    }
  }
  double scale = ct_f32_diff(top[0])[0] / ct_loss_normalizer(p->norm, p->outer, p->inner, p->valid);
  ct_cpu_scal(p->prob->count, (float)scale, dx);
}

#ifdef CORTADO_HAVE_CUDA
static ct_status softmax_loss_forward_gpu(ct_layer *l, ct_tensor *const *bottom,
                                          ct_tensor *const *top, ct_error *err) {
  softmax_loss_priv *p = l->priv;
  size_t n = p->outer * p->inner;
  float *prob_top = l->ntop >= 2 ? top[1]->data : NULL;
  const ct_loss_finish f = {.norm = p->norm, .outer = p->outer, .inner = p->inner, .scale = 1.0,
                            .label = bottom[1], .nclass = p->channels,
                            .has_ignore = p->has_ignore, .ignore_label = p->ignore_label};
  if (ct_softmax_loss_fused_fits(p->outer, p->channels, p->inner)) {
    ct_loss_scratch_record(&p->gpu, n, &f);
    ct_softmax_loss_fused_forward_gpu(l->ctx, p->outer, p->channels, p->inner, bottom[0]->data,
                                      bottom[1]->data, p->has_ignore, p->ignore_label,
                                      (int)p->norm, p->prob->data, prob_top, top[0]->data,
                                      p->gpu.inv_norm->data, p->gpu.check_id);
    return CT_OK;
  }
  ct_softmax_forward_gpu(l->ctx, p->outer, p->channels, p->inner, bottom[0]->data, p->prob->data);
  ct_softmax_loss_forward_gpu(l->ctx, p->outer, p->channels, p->inner, p->prob->data,
                              bottom[1]->data, p->has_ignore, p->ignore_label, p->gpu.value->data,
                              p->gpu.flag->data);
  ct_loss_finish_gpu(l->ctx, &p->gpu, n, p->gpu.value->data, p->gpu.flag->data, &f, top[0]->data);
  if (prob_top) ct_gpu_copy(l->ctx, p->prob->count, p->prob->data, prob_top);
  return CT_OK;
}

static void softmax_loss_backward_gpu(ct_layer *l, ct_tensor *const *top,
                                      const bool *propagate_down, ct_tensor *const *bottom) {
  if (!propagate_down[0]) return;
  softmax_loss_priv *p = l->priv;
  ct_softmax_loss_backward_gpu(l->ctx, p->outer, p->channels, p->inner, p->prob->data,
                               bottom[1]->data, p->has_ignore, p->ignore_label, top[0]->diff,
                               p->gpu.inv_norm->data, bottom[0]->diff);
}
#endif

static void softmax_loss_destroy(ct_layer *l) {
  softmax_loss_priv *p = l->priv;
  if (!p) return;
  ct_tensor_free(p->prob);
  ct_tensor_free(p->scratch);
  ct_loss_scratch_free(&p->gpu);
  free(p);
}

/* The probabilities and the normaliser's count (on a GPU its inverse) of
 * the last forward. */
static int softmax_loss_backward_state(ct_layer *l, ct_layer_region *out, int cap) {
  softmax_loss_priv *p = l->priv;
  int n = 0;
  if (p->prob->count) out[n++] = (ct_layer_region){p->prob->data, ct_tensor_bytes(p->prob, p->prob->count)};
  if (l->ctx->device == CT_DEVICE_CPU) out[n++] = (ct_layer_region){&p->valid, sizeof p->valid};
  else if (p->gpu.inv_norm && p->gpu.inv_norm->count)
    out[n++] = (ct_layer_region){p->gpu.inv_norm->data,
                                 ct_tensor_bytes(p->gpu.inv_norm, p->gpu.inv_norm->count)};
  CT_ASSERT(n <= cap);
  return n;
}

const ct_layer_ops ct_softmax_loss_ops = {
    .type = "SoftmaxWithLoss",
    .min_bottoms = 2, .max_bottoms = 2, .min_tops = 1, .max_tops = 2,
    .flags = CT_LAYER_LOSS | CT_LAYER_AUTO_TOPS,
    .no_force_backward_bottoms = 1u << 1,
    .setup = softmax_loss_setup,
    .reshape = softmax_loss_reshape,
    .forward_cpu = softmax_loss_forward_cpu,
    .backward_cpu = softmax_loss_backward_cpu,
    .backward_state = softmax_loss_backward_state,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = softmax_loss_forward_gpu,
    .backward_gpu = softmax_loss_backward_gpu,
#endif
    .destroy = softmax_loss_destroy,
};
