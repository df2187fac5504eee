/* GPU launchers of the BatchNorm layer (batch_norm.cu), on ctx's stream.
 * x, y, dy, dx are (N, C, S); per-channel arrays are (C); factor is (1). */
#ifndef CT_LAYERS_BATCH_NORM_H
#define CT_LAYERS_BATCH_NORM_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = (x - mean) / std with std = sqrt(var + eps); y may alias x.
 * use_global: mean and var are the sums divided by factor (0 when factor is 0).
 * Otherwise they are the batch's, and when `update` the sums and factor are
 * updated with moving-average fraction f as in batch_norm.c.  mean and std
 * receive the statistics used. */
void ct_batch_norm_forward_gpu(ct_context *ctx, int N, int C, size_t S, float eps, float f,
                               bool use_global, bool update, const float *x, float *y, float *mean,
                               float *std, float *mean_sum, float *var_sum, float *factor);
/* use_global: dx = dy / std; else dx = (dy - mean(dy) - y mean(dy y)) / std with
 * y the forward output.  dx may alias dy. */
void ct_batch_norm_backward_gpu(ct_context *ctx, int N, int C, size_t S, bool use_global,
                                const float *y, const float *std, const float *dy, float *dx);

/* Frozen statistics fused with a Scale (GPU): mean and invstd (1/std) from
 * the sums and factor, and a = gamma invstd, b = beta - mean a, so that the
 * pair is y = a x + b per channel (all (C)). */
void ct_batch_norm_frozen_affine_gpu(ct_context *ctx, int C, float eps, const float *mean_sum,
                                     const float *var_sum, const float *factor, const float *gamma,
                                     const float *beta, float *mean, float *invstd, float *a,
                                     float *b);
/* Their parameter gradients from dot = sum(dy x) and sum = sum(dy) per
 * channel: dgamma += invstd (dot - mean sum), dbeta += sum (either may be
 * NULL). */
void ct_batch_norm_frozen_param_grad_gpu(ct_context *ctx, int C, const float *mean,
                                         const float *invstd, const float *dot, const float *sum,
                                         float *dgamma, float *dbeta);

/* Net-level fusion (net_fuse.c): makes the BatchNorm layer bn also compute
 * the Scale layer that follows it in place on its top (one bottom,
 * bias_term, one (C) scale at axis 1: the caller checks the Scale and the
 * blobs), so that bn's forward gives gamma * (x - mean) / std + beta and its
 * backward dx and accumulates dgamma and dbeta into the Scale's parameter
 * gradients (as far as the Scale's param_propagate_down asks).  Marks scale
 * absorbed; the caller reshapes both afterwards.  With global statistics
 * (frozen, the usual way to fine-tune Caffe's ResNets) only on a GPU: the
 * pair is then one affine pass per channel.  Returns false, changing
 * nothing, on the host with global statistics, or when bn has absorbed a
 * Scale already. */
bool ct_batch_norm_absorb_scale(ct_layer *bn, ct_layer *scale);
/* Fused: whether backward computes dx at all (true until told otherwise;
 * without it a GPU needs workspace for a discarded dx).  Reshape afterwards. */
void ct_batch_norm_fused_need_dx(ct_layer *bn, bool need_dx);
/* Net fusion (net_fuse.c) on a GPU: the BatchNorm bn, which computes its
 * Scale already, computes the ReLU with slope 0 in place after them too
 * (cuDNN's persistent kernels of a 16-bit channels-last training layer; with
 * global statistics, in any type and order);
 * relu is marked absorbed.  False, with nothing changed, where it cannot.
 * The caller reshapes bn afterwards. */
bool ct_batch_norm_absorb_relu(ct_layer *bn, ct_layer *relu);

#ifdef __cplusplus
}
#endif

#endif
