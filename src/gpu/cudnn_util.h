/* cuDNN as the layers see it: the engine choice, the workspace limit, and
 * (for .cu files) the checked-call macro and tensor descriptors.  The
 * process-wide table of benchmarked convolution algorithms is the
 * convolution engines' (layers/conv/conv_algos.h).
 *
 * Engine choice (Caffe's `engine` field of convolution_param, pooling_param,
 * lrn_param, softmax_param, relu_param, sigmoid_param, tanh_param): DEFAULT
 * and CUDNN run the layer on cuDNN when cuDNN computes exactly what Caffe
 * does for its settings, CAFFE runs Cortado's own kernels.  A CUDNN request
 * that cuDNN cannot serve falls back to the own kernels with a warning.
 *
 * Math: convolutions read ctx->tf32 when they are reshaped.  TF32 lets cuDNN
 * use tensor cores (its default for FP32 on Ampere and later); strict FP32
 * (`--math=fp32`) sets CUDNN_FMA_MATH on every convolution descriptor and
 * refuses algorithms that report tensor-op math.  A change of ctx->tf32
 * takes effect at the next reshape of each layer.
 *
 * Workspace: a convolution's algorithms are chosen within a byte limit,
 * CORTADO_CUDNN_WORKSPACE_MB (MiB) when set, else the smaller of 1 GiB and a
 * quarter of the free memory of the first device that asks.  The
 * workspace itself is the context's (ct_context_workspace), grown at
 * reshape to what the chosen algorithms need; forward and backward only
 * read ctx->workspace. */
#ifndef CT_GPU_CUDNN_UTIL_H
#define CT_GPU_CUDNN_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "core/status.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The values of every Caffe Engine enum (they agree across the messages). */
enum { CT_ENGINE_DEFAULT = 0, CT_ENGINE_CAFFE = 1, CT_ENGINE_CUDNN = 2 };

/* Whether layer `name` runs on cuDNN: engine is the layer's Engine field and
 * unsupported is NULL when cuDNN can compute this configuration exactly, or
 * the reason it cannot ("a second top", ...).  Logs a warning, naming the
 * layer and the reason, when engine is CUDNN but the reason is not NULL.
 * False whenever ct_cudnn_set_enabled(false) is in force. */
bool ct_cudnn_wanted(const char *name, int engine, const char *unsupported);

/* Hidden knob for tests and benchmarks: false makes every layer reshaped
 * afterwards use the CAFFE engine whatever its engine field says (true, the
 * default, restores the field's choice).  Not thread-safe: set it before
 * building layers.  Exists in CPU-only builds too (where it changes
 * nothing). */
void ct_cudnn_set_enabled(bool enabled);

/* The workspace limit in bytes on device (see above); fixed at the first
 * call.  GPU builds only. */
size_t ct_cudnn_workspace_limit(int device);
#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <cudnn.h>

#include "gpu/gpu.h"

/* Checked cuDNN call in forward and backward: a failure there is a bug or a
 * device fault (the configuration was accepted at reshape), fatal through
 * ct_abort with the call, file and line. */
#define CT_CUDNN_CHECK(call)                                                           \
  do {                                                                                 \
    cudnnStatus_t ct_s_ = (call);                                                      \
    if (ct_s_ != CUDNN_STATUS_SUCCESS)                                                 \
      ct_abort(__FILE__, __LINE__, "cuDNN error %s (in %s)", cudnnGetErrorString(ct_s_), \
               #call);                                                                 \
  } while (0)

/* Checked cuDNN call at reshape: returns CT_ERR_DEVICE from the enclosing
 * function with the call named. */
#define CT_CUDNN_TRY(err, call)                                                       \
  do {                                                                                \
    cudnnStatus_t ct_s_ = (call);                                                     \
    if (ct_s_ != CUDNN_STATUS_SUCCESS)                                                \
      return ct_error_set((err), CT_ERR_DEVICE, "cuDNN error %s (in %s at %s:%d)",    \
                          cudnnGetErrorString(ct_s_), #call, __FILE__, __LINE__);     \
  } while (0)

/* Sets a fully packed float tensor descriptor of ndim (4 or 5) dims.
 * Returns the cuDNN status (BAD_PARAM for a dimension out of range). */
cudnnStatus_t ct_cudnn_set_tensor(cudnnTensorDescriptor_t desc, int ndim, const int *dims);
/* The same for values of type t. */
cudnnStatus_t ct_cudnn_set_tensor_typed(cudnnTensorDescriptor_t desc, ct_dtype t, int ndim,
                                        const int *dims);
/* The same in a memory order: dims are always (N, C, spatial...); NHWC
 * tensors are packed with the channels last. */
cudnnStatus_t ct_cudnn_set_tensor_layout(cudnnTensorDescriptor_t desc, ct_dtype t, ct_layout layout,
                                         int ndim, const int *dims);
/* cuDNN's name of an element type. */
cudnnDataType_t ct_cudnn_type(ct_dtype t);
/* count packed values as (1, 1, 1, count), for elementwise operations
 * (whose shape does not matter; cuDNN runs them fastest as one packed row).
 * BAD_PARAM when count is 0 or over 2^31 - 1. */
cudnnStatus_t ct_cudnn_set_flat(cudnnTensorDescriptor_t desc, size_t count);

#endif

#endif
