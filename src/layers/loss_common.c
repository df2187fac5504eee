#include "layers/loss_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  return ct_loss_normalizer_value((int)mode, outer, inner, valid);
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
  memset(s, 0, sizeof *s);
  if (ctx->device == CT_DEVICE_CPU) return;
  s->value = ct_tensor_new(ctx->device, "loss.value");
  s->flag = ct_tensor_new(ctx->device, "loss.flag");
  s->partials =
      ct_tensor_new_shape(ctx->device, "loss.partials", 1, (int[]){CT_LOSS_PARTIALS + 2}, false);
  s->inv_norm = ct_tensor_new_shape(ctx->device, "loss.inv_norm", 1, (int[]){1}, false);
}

/* The deferred check's report: the host scan of the labels the last forward
 * read.  With iter_size > 1 the bad label may have been in an earlier pass,
 * whose labels are gone. */
static ct_status report_labels(void *user, ct_error *err) {
  const ct_loss_scratch *s = user;
  if (s->label && s->nlabels <= s->label->count) {
    ct_status st =
        ct_loss_check_labels(s->label, s->nlabels, s->nclass, s->has_ignore, s->ignore_label, err);
    if (st != CT_OK) return st;
  }
  return ct_error_set(err, CT_ERR_INVALID,
                      "a label out of range [0, %d) was read by an earlier forward pass of this "
                      "iteration",
                      s->nclass);
}

void ct_loss_scratch_add_check(ct_loss_scratch *s, ct_context *ctx, const char *name,
                               const char *type) {
  if (ctx->device == CT_DEVICE_CPU) return;
  char prefix[512];
  snprintf(prefix, sizeof prefix, "layer '%s' (%s)", name, type);
  s->ctx = ctx;
  s->check_id = ct_context_add_check(ctx, prefix, report_labels, s);
}

void ct_loss_scratch_reshape(ct_loss_scratch *s, size_t positions) {
  if (!s->value) return;
  int n = (int)positions;
  ct_tensor_reshape_or_die(s->value, 1, &n);
  ct_tensor_reshape_or_die(s->flag, 1, &n);
}

void ct_loss_scratch_free(ct_loss_scratch *s) {
  if (s->check_id) ct_context_remove_check(s->ctx, s->check_id);
  ct_tensor_free(s->value);
  ct_tensor_free(s->flag);
  ct_tensor_free(s->partials);
  ct_tensor_free(s->inv_norm);
  memset(s, 0, sizeof *s);
}

void ct_loss_scratch_record(ct_loss_scratch *s, size_t n, const ct_loss_finish *f) {
  s->label = f->label;
  s->nlabels = n;
  s->nclass = f->nclass;
  s->has_ignore = f->has_ignore;
  s->ignore_label = f->ignore_label;
}
