#include "layers/loss_common.h"

#include <stdlib.h>

#include "math/math.h"

ct_status ct_loss_reshape(ct_tensor *const *bottom, ct_tensor *const *top, ct_error *err) {
  char a[256], b[256];
  if (bottom[0]->ndim < 1 || bottom[1]->ndim < 1)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the prediction and label blobs need at least one axis, got shapes %s and %s",
                        ct_tensor_shape_string(bottom[0], a, sizeof a),
                        ct_tensor_shape_string(bottom[1], b, sizeof b));
  if (bottom[0]->shape[0] != bottom[1]->shape[0])
    return ct_error_set(err, CT_ERR_INVALID,
                        "the data and label blobs must have the same first dimension, got shapes %s "
                        "and %s",
                        ct_tensor_shape_string(bottom[0], a, sizeof a),
                        ct_tensor_shape_string(bottom[1], b, sizeof b));
  ct_tensor_reshape_or_die(top[0], 0, NULL);
  return CT_OK;
}

ct_loss_norm ct_loss_normalization(const Caffe__LossParameter *lp, ct_loss_norm when_unset) {
  if (lp->has_normalization) return lp->normalization;
  if (lp->has_normalize)
    return lp->normalize ? CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__VALID
                         : CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__BATCH_SIZE;
  return when_unset;
}

double ct_loss_normalizer(ct_loss_norm mode, size_t outer, size_t inner, long valid) {
  double n;
  switch (mode) {
    case CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__FULL: n = (double)outer * inner; break;
    case CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__VALID:
      n = valid < 0 ? (double)outer * inner : (double)valid;
      break;
    case CAFFE__LOSS_PARAMETER__NORMALIZATION_MODE__BATCH_SIZE: n = (double)outer; break;
    default: n = 1.0; break;
  }
  /* A batch whose labels are all ignored would otherwise divide by zero. */
  return n < 1.0 ? 1.0 : n;
}

ct_status ct_loss_check_labels_host(const float *label, size_t n, int nclass, bool has_ignore,
                                    int ignore_label, ct_error *err) {
  for (size_t i = 0; i < n; i++) {
    int v;
    bool is_int = ct_label_to_int(label[i], &v);
    if (is_int && has_ignore && v == ignore_label) continue;
    if (!is_int || v < 0 || v >= nclass)
      return ct_error_set(err, CT_ERR_INVALID, "label %g at index %zu is out of range [0, %d)",
                          (double)label[i], i, nclass);
  }
  return CT_OK;
}

ct_status ct_loss_check_labels(const ct_tensor *label, size_t n, int nclass, bool has_ignore,
                               int ignore_label, ct_error *err) {
  if (label->device == CT_DEVICE_CPU)
    return ct_loss_check_labels_host(label->data, n, nclass, has_ignore, ignore_label, err);
  float *host = ct_xcalloc(label->count, sizeof *host);
  ct_tensor_download(label, host);
  ct_status s = ct_loss_check_labels_host(host, n, nclass, has_ignore, ignore_label, err);
  free(host);
  return s;
}

ct_status ct_loss_report_bad_labels(const ct_tensor *label, size_t n, int nclass, bool has_ignore,
                                    int ignore_label, ct_error *err) {
  ct_status s = ct_loss_check_labels(label, n, nclass, has_ignore, ignore_label, err);
  CT_ASSERTF(s != CT_OK, "a GPU kernel flagged a bad label that the host check does not find");
  return s;
}

void ct_loss_set_scalar(ct_context *ctx, ct_tensor *t, float value) {
  ct_dev_set(ctx, 1, value, t->data);
}

void ct_loss_scratch_init(ct_loss_scratch *s, const ct_context *ctx) {
  s->value = s->flag = s->partials = NULL;
  if (ctx->device == CT_DEVICE_CPU) return;
  s->value = ct_tensor_new(ctx->device, "loss.value");
  s->flag = ct_tensor_new(ctx->device, "loss.flag");
  s->partials = ct_tensor_new_shape(ctx->device, "loss.partials", 1, (int[]){CT_LOSS_PARTIALS}, false);
}

void ct_loss_scratch_reshape(ct_loss_scratch *s, size_t positions) {
  if (!s->value) return;
  int n = (int)positions;
  ct_tensor_reshape_or_die(s->value, 1, &n);
  ct_tensor_reshape_or_die(s->flag, 1, &n);
}

void ct_loss_scratch_free(ct_loss_scratch *s) {
  ct_tensor_free(s->value);
  ct_tensor_free(s->flag);
  ct_tensor_free(s->partials);
  s->value = s->flag = s->partials = NULL;
}
