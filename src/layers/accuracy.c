/* Accuracy: the fraction of positions whose label (bottom 1) is among the
 * top_k scores of bottom 0 over accuracy_param.axis (ties count against the
 * label, as in Caffe: a score equal to the label's is "better").
 * accuracy_param.ignore_label skips positions.  An optional top 1 receives
 * the accuracy of each class (0 for a class with no positions).  No
 * backward. */
#include <stdlib.h>

#include "layers/accuracy.h"
#include "layers/layer.h"
#include "layers/loss_common.h"
#include "math/math.h"

typedef struct {
  unsigned top_k;
  bool has_ignore;
  int ignore_label;
  int axis;
  size_t outer, inner;
  int nclass;
  ct_tensor *class_count; /* (nclass): positions per class, when top 1 is wanted (CPU) */
  ct_loss_scratch gpu;    /* GPU path only: value holds the hits */
} accuracy_priv;

static ct_status accuracy_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err) {
  const Caffe__AccuracyParameter *ap =
      CT_PARAM_OR_DEFAULT(l, accuracy_param, CAFFE__ACCURACY_PARAMETER__INIT);
  accuracy_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->top_k = ap->top_k;
  p->has_ignore = ap->has_ignore_label;
  p->ignore_label = ap->ignore_label;
  if (l->ntop >= 2 && l->ctx->device == CT_DEVICE_CPU)
    p->class_count = ct_tensor_new(CT_DEVICE_CPU, "accuracy.class_count");
  ct_loss_scratch_init(&p->gpu, l->ctx);
  return CT_OK;
}

static ct_status accuracy_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                  ct_error *err) {
  accuracy_priv *p = l->priv;
  const Caffe__AccuracyParameter *ap =
      CT_PARAM_OR_DEFAULT(l, accuracy_param, CAFFE__ACCURACY_PARAMETER__INIT);
  char s[256];
  if (ct_tensor_canonical_axis(bottom[0], ap->axis, &p->axis, err) != CT_OK)
    return ct_error_prefix(err, "accuracy_param.axis");
  p->outer = ct_tensor_count_range(bottom[0], 0, p->axis);
  p->nclass = bottom[0]->shape[p->axis];
  p->inner = ct_tensor_count_range(bottom[0], p->axis + 1, bottom[0]->ndim);
  if (p->top_k > (unsigned)p->nclass)
    return ct_error_set(err, CT_ERR_INVALID,
                        "accuracy_param.top_k %u must be less than or equal to the number of "
                        "classes (%d)",
                        p->top_k, p->nclass);
  if (p->outer * p->inner != bottom[1]->count)
    return ct_error_set(err, CT_ERR_INVALID,
                        "number of labels must match number of predictions: outer*inner = %zu*%zu = "
                        "%zu positions for prediction shape %s with class axis %d, but the label "
                        "blob has %zu values",
                        p->outer, p->inner, p->outer * p->inner,
                        ct_tensor_shape_string(bottom[0], s, sizeof s), p->axis, bottom[1]->count);
  ct_tensor_reshape_or_die(top[0], 0, NULL);
  ct_loss_scratch_reshape(&p->gpu, p->outer * p->inner);
  if (l->ntop >= 2) {
    ct_tensor_reshape_or_die(top[1], 1, (int[]){p->nclass});
    if (p->class_count) ct_tensor_reshape_or_die(p->class_count, 1, (int[]){p->nclass});
  }
  return CT_OK;
}

static ct_status accuracy_forward_cpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                      ct_error *err) {
  accuracy_priv *p = l->priv;
  const float *x = bottom[0]->data, *label = bottom[1]->data;
  CT_TRY(ct_loss_check_labels_host(label, p->outer * p->inner, p->nclass, p->has_ignore,
                                   p->ignore_label, err));
  size_t inner = p->inner, dim = (size_t)p->nclass * inner;
  float *per_class = l->ntop >= 2 ? top[1]->data : NULL;
  float *class_count = l->ntop >= 2 ? p->class_count->data : NULL;
  if (per_class) {
    ct_cpu_set((size_t)p->nclass, 0.0f, per_class);
    ct_cpu_set((size_t)p->nclass, 0.0f, class_count);
  }
  long correct = 0, valid = 0;
  for (size_t i = 0; i < p->outer; i++) {
    for (size_t k = 0; k < inner; k++) {
      int y = (int)label[i * inner + k];
      if (p->has_ignore && y == p->ignore_label) continue;
      const float *xi = x + i * dim + k;
      float truth = xi[(size_t)y * inner];
      /* Classes scoring at least the label's, the label itself included. */
      unsigned better = 0;
      for (int c = 0; c < p->nclass && better <= p->top_k; c++)
        if (xi[(size_t)c * inner] >= truth) better++;
      bool hit = better <= p->top_k;
      correct += hit;
      valid++;
      if (per_class) {
        class_count[y] += 1.0f;
        if (hit) per_class[y] += 1.0f;
      }
    }
  }
  ct_f32(top[0])[0] = valid ? (float)((double)correct / valid) : 0.0f;
  if (per_class)
    for (int c = 0; c < p->nclass; c++)
      per_class[c] = class_count[c] == 0.0f ? 0.0f : per_class[c] / class_count[c];
  return CT_OK;
}

#ifdef CORTADO_HAVE_CUDA
static ct_status accuracy_forward_gpu(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                      ct_error *err) {
  accuracy_priv *p = l->priv;
  size_t n = p->outer * p->inner;
  ct_accuracy_forward_gpu(l->ctx, p->outer, p->nclass, p->inner, bottom[0]->data, bottom[1]->data,
                          p->top_k, p->has_ignore, p->ignore_label, p->gpu.value->data,
                          p->gpu.flag->data);
  double hits;
  long valid, bad;
  ct_loss_reduce_gpu(l->ctx, n, p->gpu.value->data, p->gpu.flag->data, p->gpu.partials->data,
                     &hits, &valid, &bad);
  if (bad)
    return ct_loss_report_bad_labels(bottom[1], n, p->nclass, p->has_ignore, p->ignore_label, err);
  ct_loss_set_scalar(l->ctx, top[0], valid ? (float)(hits / valid) : 0.0f);
  if (l->ntop >= 2)
    ct_accuracy_per_class_gpu(l->ctx, n, p->nclass, bottom[1]->data, p->gpu.value->data,
                              p->gpu.flag->data, top[1]->data);
  return CT_OK;
}
#endif

static void accuracy_destroy(ct_layer *l) {
  accuracy_priv *p = l->priv;
  if (!p) return;
  ct_tensor_free(p->class_count);
  ct_loss_scratch_free(&p->gpu);
  free(p);
}

const ct_layer_ops ct_accuracy_ops = {
    .type = "Accuracy",
    .min_bottoms = 2, .max_bottoms = 2, .min_tops = 1, .max_tops = 2,
    .flags = CT_LAYER_NO_BACKWARD,
    .no_force_backward_bottoms = (1u << 0) | (1u << 1),
    .setup = accuracy_setup,
    .reshape = accuracy_reshape,
    .forward_cpu = accuracy_forward_cpu,
#ifdef CORTADO_HAVE_CUDA
    .forward_gpu = accuracy_forward_gpu,
#endif
    .destroy = accuracy_destroy,
};
