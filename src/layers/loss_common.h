/* What the loss layers share (Caffe's LossLayer base and the normalisation
 * of SoftmaxWithLoss and friends): the scalar top, the first-axis check, the
 * loss_param normalisation modes, labels stored as floats holding integers,
 * and the scalar top.  Backward passes scale by the loss weight that the net
 * leaves in top[0]'s diff[0] (read on the host on the CPU; GPU kernels read
 * it from device memory, so that no copy waits on the stream).
 *
 * GPU helpers (loss_common.cu) reduce per-position loss values and flags in
 * one deterministic pass. */
#ifndef CT_LAYERS_LOSS_COMMON_H
#define CT_LAYERS_LOSS_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include "caffe.pb-c.h"
#include "core/context.h"
#include "core/status.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef Caffe__LossParameter__NormalizationMode ct_loss_norm;

/* Caffe's kLOG_THRESHOLD: probabilities are clamped to it before log. */
#define CT_LOG_THRESHOLD 1e-20f

/* The LossLayer part of reshape: bottom 0 and bottom 1 have at least one
 * axis and the same first dimension; top[0] becomes a 0-axis scalar.
 * CT_ERR_INVALID naming both shapes otherwise. */
ct_status ct_loss_reshape(ct_tensor *const *bottom, ct_tensor *const *top, ct_error *err);

/* The normalisation mode of lp: `normalization` when set, else the legacy
 * `normalize` (true: VALID, false: BATCH_SIZE) when set, else when_unset
 * (VALID for SoftmaxWithLoss, BATCH_SIZE for SigmoidCrossEntropyLoss, as in
 * Caffe). */
ct_loss_norm ct_loss_normalization(const Caffe__LossParameter *lp, ct_loss_norm when_unset);

/* What the summed loss is divided by: outer*inner (FULL), valid (VALID; a
 * negative valid means every position), outer (BATCH_SIZE) or 1 (NONE), and
 * never less than 1. */
double ct_loss_normalizer(ct_loss_norm mode, size_t outer, size_t inner, long valid);

/* Labels are floats holding integers; Caffe truncates them to int.  Returns
 * false when v has no int value (NaN, infinite, out of int's range). */
static inline bool ct_label_to_int(float v, int *out) {
  if (!(v > -2147483648.0f && v < 2147483648.0f)) return false;
  *out = (int)v;
  return true;
}

/* Checks n labels on the host: each is ignore_label (when has_ignore) or an
 * integer class in [0, nclass).  CT_ERR_INVALID naming the first bad label
 * and its index otherwise. */
ct_status ct_loss_check_labels_host(const float *label, size_t n, int nclass, bool has_ignore,
                                    int ignore_label, ct_error *err);
/* The same for the first n values of a tensor on any device: a GPU tensor is
 * downloaded (for error paths, after the stream has been waited for). */
ct_status ct_loss_check_labels(const ct_tensor *label, size_t n, int nclass, bool has_ignore,
                               int ignore_label, ct_error *err);

/* Writes the scalar value into t's data[0] on t's device. */
void ct_loss_set_scalar(ct_context *ctx, ct_tensor *t, float value);

/* ---------------------------------------------------------------- GPU */
/* Values in the scratch partials: CT_LOSS_PARTIALS floats per call. */
#define CT_LOSS_REDUCE_BLOCKS 128
#define CT_LOSS_PARTIALS (CT_LOSS_REDUCE_BLOCKS * 3 * 2)

/* Sums over n positions, in double and in a fixed order, of value[i] (may be
 * NULL: 0) into *value_sum, and from flag[i] (1 valid, 0 ignored, -1 a bad
 * label) the number of valid positions into *valid and of bad ones into
 * *bad.  partials is device scratch of CT_LOSS_PARTIALS floats.  Waits for
 * ctx's stream. */
void ct_loss_reduce_gpu(ct_context *ctx, size_t n, const float *value, const float *flag,
                        float *partials, double *value_sum, long *valid, long *bad);

#ifdef __cplusplus
}
#endif

#endif
