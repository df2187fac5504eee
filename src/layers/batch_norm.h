/* GPU launchers of the BatchNorm layer (batch_norm.cu), on ctx's stream.
 * x, y, dy, dx are (N, C, S); per-channel arrays are (C); factor is (1). */
#ifndef CT_LAYERS_BATCH_NORM_H
#define CT_LAYERS_BATCH_NORM_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = (x - mean) / std with std = sqrt(var + eps); y may alias x.
 * use_global: mean and var are the sums divided by factor (0 when factor is 0).
 * Otherwise they are the batch's, and the sums and factor are updated with
 * moving-average fraction f as in batch_norm.c.  mean and std receive the
 * statistics used. */
void ct_batch_norm_forward_gpu(ct_context *ctx, int N, int C, size_t S, float eps, float f,
                               bool use_global, const float *x, float *y, float *mean, float *std,
                               float *mean_sum, float *var_sum, float *factor);
/* use_global: dx = dy / std; else dx = (dy - mean(dy) - y mean(dy y)) / std with
 * y the forward output.  dx may alias dy. */
void ct_batch_norm_backward_gpu(ct_context *ctx, int N, int C, size_t S, bool use_global,
                                const float *y, const float *std, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
