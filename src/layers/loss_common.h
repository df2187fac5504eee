/* What the loss layers share (Caffe's LossLayer base and the normalisation
 * of SoftmaxWithLoss and friends): the scalar top, the first-axis check, the
 * loss_param normalisation modes, and labels stored as floats holding
 * integers.  Backward passes scale by the loss weight that the net
 * leaves in top[0]'s diff[0] (read on the host on the CPU; GPU kernels read
 * it from device memory, so that no copy waits on the stream).
 *
 * GPU helpers (loss_common.cu) reduce per-position loss values and flags in
 * one deterministic pass that ends on the device: the loss goes straight
 * into top[0], the divisor into device memory for backward, and a bad label
 * raises the layer's deferred check (core/context.h), so that a GPU forward
 * never waits for the host. */
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

#ifdef __CUDACC__
#define CT_HOST_DEVICE __host__ __device__
#else
#define CT_HOST_DEVICE
#endif

/* ct_loss_normalizer's arithmetic, for host and device code. */
static inline CT_HOST_DEVICE double ct_loss_normalizer_value(int mode, size_t outer, size_t inner,
                                                             long valid) {
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

/* Labels are floats holding integers; Caffe truncates them to int.  Returns
 * false when v has no int value (NaN, infinite, out of int's range). */
static inline CT_HOST_DEVICE bool ct_label_to_int(float v, int *out) {
  if (!(v > -2147483648.0f && v < 2147483648.0f)) return false;
  *out = (int)v;
  return true;
}

/* A label's role: 1 a class in [0, nclass) (into *y), 0 ignored, -1 bad. */
static inline CT_HOST_DEVICE int ct_label_classify(float v, int nclass, bool has_ignore,
                                                   int ignore_label, int *y) {
  int c;
  if (!ct_label_to_int(v, &c)) return -1;
  if (has_ignore && c == ignore_label) return 0;
  if (c < 0 || c >= nclass) return -1;
  *y = c;
  return 1;
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

/* For a GPU forward whose kernel flagged a bad label: the same error as
 * ct_loss_check_labels (after the stream has been waited for). */
ct_status ct_loss_report_bad_labels(const ct_tensor *label, size_t n, int nclass, bool has_ignore,
                                    int ignore_label, ct_error *err);

/* Writes the scalar value into t's data[0] on t's device. */
void ct_loss_set_scalar(ct_context *ctx, ct_tensor *t, float value);

/* ---------------------------------------------------------------- GPU */
/* Device scratch of a loss layer's GPU forward: a value and a flag per
 * position, the partials of the reductions, and the divisor of the last
 * forward for backward.  All NULL on the CPU. */
typedef struct ct_loss_scratch {
  ct_tensor *value;    /* (positions) */
  ct_tensor *flag;     /* (positions) */
  ct_tensor *partials; /* (CT_LOSS_PARTIALS + 2): doubles, then a block counter */
  ct_tensor *inv_norm; /* (1): 1 / normalizer of the last ct_loss_finish_gpu */
  /* The deferred label check (0: none) and what it examines when it fires. */
  ct_context *ctx;
  unsigned check_id;
  const ct_tensor *label;
  size_t nlabels;
  int nclass;
  bool has_ignore;
  int ignore_label;
} ct_loss_scratch;

/* Allocates the scratch when ctx is a GPU; leaves it NULL on the CPU. */
void ct_loss_scratch_init(ct_loss_scratch *s, const ct_context *ctx);
/* Registers the layer's deferred label check with ctx (GPU only); its
 * errors are prefixed "layer '<name>' (<type>)" as the layer's own are.
 * ct_loss_scratch_free removes it. */
void ct_loss_scratch_add_check(ct_loss_scratch *s, ct_context *ctx, const char *name,
                               const char *type);
void ct_loss_scratch_reshape(ct_loss_scratch *s, size_t positions);
void ct_loss_scratch_free(ct_loss_scratch *s);

#define CT_LOSS_REDUCE_BLOCKS 128
#define CT_LOSS_PARTIALS (CT_LOSS_REDUCE_BLOCKS * 3 * 2)

/* How ct_loss_finish_gpu turns the sum into the loss. */
typedef struct ct_loss_finish {
  ct_loss_norm norm;     /* divisor: ct_loss_normalizer(norm, outer, inner, valid) */
  size_t outer, inner;
  double scale;          /* then times scale (1/2 for Euclidean and Contrastive) */
  bool square;           /* sum value[i]^2 rather than value[i] */
  /* The labels the deferred check re-reads on the host when a flag is -1. */
  const ct_tensor *label;
  int nclass;
  bool has_ignore;
  int ignore_label;
} ct_loss_finish;

/* Records in s the labels that f names, n of them, for the deferred label
 * check (ct_loss_finish_gpu does; a layer that finishes its loss in its
 * own kernel calls it directly). */
void ct_loss_scratch_record(ct_loss_scratch *s, size_t n, const ct_loss_finish *f);

/* On ctx's stream, without waiting: sums value (or its squares) over n
 * positions in double in a fixed order, counts flags (1 valid, 0 ignored, -1
 * a bad label; flag may be NULL: all valid), and writes
 *   top[0] = (float)(sum / normalizer * f->scale),
 *   s->inv_norm[0] = (float)(1 / normalizer)
 * on the device.  A flag of -1 raises s's deferred check, whose error is
 * the one ct_loss_check_labels gives for the labels f names. */
void ct_loss_finish_gpu(ct_context *ctx, ct_loss_scratch *s, size_t n, const float *value,
                        const float *flag, const ct_loss_finish *f, float *top);

/* Sums over n positions, in double and in a fixed order, of value[i] into
 * *value_sum, and from flag[i] (1 valid, 0 ignored, -1 a bad label) the
 * number of valid positions into *valid and of bad ones into *bad; value or
 * flag may be NULL (their sums are then 0).  partials is device scratch of
 * CT_LOSS_PARTIALS floats (8-byte aligned).  Waits for ctx's stream (for
 * layers outside the iteration's hot path, e.g. Accuracy). */
void ct_loss_reduce_gpu(ct_context *ctx, size_t n, const float *value, const float *flag,
                        float *partials, double *value_sum, long *valid, long *bad);

/* y(n) = x * loss_weight[0] * scale, with loss_weight in device memory (top
 * 0's diff), on ctx's stream; y may alias x. */
void ct_loss_scale_gpu(ct_context *ctx, size_t n, const float *x, const float *loss_weight,
                       float scale, float *y);

#ifdef __cplusplus
}
#endif

#endif
