/* BatchNorm on cuDNN (batch_norm_cudnn.cu): Caffe's BatchNorm has no engine
 * field, so cuDNN runs every GPU BatchNorm it can (unless disabled with
 * ct_cudnn_set_enabled).
 *
 * Caffe keeps running *sums* and a factor (batch_norm.c) where cuDNN keeps
 * exponential averages.  Training forward calls
 * cudnnBatchNormalizationForwardTraining with scale 1, bias 0 and average
 * factor 1, so that its "running" outputs are the batch mean and the
 * unbiased batch variance (Caffe's m / (m - 1) correction), and a small
 * kernel folds them into Caffe's three blobs exactly as the CPU does:
 * mean_sum = mean + f mean_sum, var_sum = var + f var_sum, factor = f
 * factor + 1.  With global statistics, forward and backward are elementwise
 * kernels over the stored sums.  Training backward is
 * cudnnBatchNormalizationBackward with the saved batch mean and 1/std.
 *
 * No cuDNN call runs in place: an in-place layer copies its input aside in
 * forward (into xsave, the caller's bottom-sized buffer) and its top
 * gradient into the context's workspace in backward.
 *
 * Fused with a Scale (batch_norm.h), cuDNN's scale and bias are the Scale's
 * gamma and beta, and its parameter gradients go straight into the Scale's
 * (accumulated: beta for the parameter gradients is 1).
 *
 * 16-bit layers (l->dtype, l->layout): the values in the type and order,
 * the statistics and parameters float32.  Channels-last training runs
 * cuDNN's persistent kernels (CUDNN_BATCHNORM_SPATIAL_PERSISTENT through
 * the *Ex calls) where cuDNN has them for the tensors, else the calls
 * above; global statistics run channel_typed.h's affine kernel. */
#ifndef CT_LAYERS_BATCH_NORM_CUDNN_H
#define CT_LAYERS_BATCH_NORM_CUDNN_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For BatchNorm's reshape_gpu: sets l->gpu_priv when cuDNN runs the layer
 * for a bottom of (N, C, S) values, else clears it.  Grows the context's
 * workspace for an in-place training layer.  Never fails on valid input. */
ct_status ct_bn_cudnn_reshape(ct_layer *l, int N, int C, size_t S, float eps, float f,
                              bool use_global, bool in_place, bool discard_dx, bool relu,
                              ct_error *err);
/* Whether cuDNN can compute a ReLU after the layer as it is planned now
 * (the persistent kernels of a 16-bit channels-last training layer): then
 * reshape with relu makes forward write max(y, 0) and backward take the
 * ReLU's gradient from y. */
bool ct_bn_cudnn_can_relu(ct_layer *l);
/* y from x (y is x in place, then xsave receives x); updates the sums and
 * factor (params 0..2) in training.  gamma and beta (C) are the fused
 * Scale's (NULL: 1 and 0; training only). */
void ct_bn_cudnn_forward(ct_layer *l, const void *x, void *y, void *xsave, const float *gamma,
                         const float *beta);
/* dx (overwritten; dx is dy in place; NULL: not wanted, written to the
 * workspace as reshape's discard_dx arranged) from dy and x (xsave in
 * place), with the fused Scale's gamma and beta (NULL: 1 and 0); dgamma and
 * dbeta (C, may be NULL) accumulate the Scale's parameter gradients; y (the
 * forward's output) is read with a fused ReLU. */
void ct_bn_cudnn_backward(ct_layer *l, const void *x, const void *xsave, const void *y,
                          const void *dy, void *dx, const float *gamma, const float *beta,
                          float *dgamma, float *dbeta);
/* For BatchNorm's backward_state: cuDNN's buffers of the last forward (the
 * saved mean and 1/std among them, and the persistent kernels' reserve)
 * into out (at most cap); returns how many (0 when cuDNN does not run it). */
int ct_bn_cudnn_state(ct_layer *l, ct_layer_region *out, int cap);
void ct_bn_cudnn_destroy(ct_layer *l);

#ifdef __cplusplus
}
#endif

#endif
