/* Convolution and Deconvolution on cuDNN (conv_cudnn.cu), the GPU engine
 * behind convolution_param.engine DEFAULT and CUDNN.
 *
 * In the GEMM view of conv_common.h, X is the convolution's input and Y its
 * output: Convolution runs X -> Y forward (cudnnConvolutionForward) and
 * Deconvolution Y -> X (cudnnConvolutionBackwardData), with the same
 * descriptors; the weights keep Caffe's layout, which is cuDNN's filter
 * layout (y_channels, x_channels / group, kernel...).  1-D convolutions run
 * as 2-D with a unit height; 2-D and 3-D map directly.
 *
 * ct_conv_cudnn_reshape (the layers' reshape_gpu) decides the engine, sets
 * the descriptors, picks the algorithms (ct_cudnn_conv_find: benchmarked
 * once per shape and math mode in the process) and grows the context's
 * workspace; when cuDNN runs the layer it also drops the im2col scratch of
 * the CAFFE engine.  l->gpu_priv is NULL when the CAFFE engine runs. */
#ifndef CT_LAYERS_CONV_CUDNN_H
#define CT_LAYERS_CONV_CUDNN_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* reshape_gpu of Convolution and Deconvolution (l->priv is the ct_conv).
 * Errors only for a device failure; configurations cuDNN cannot run fall
 * back to the CAFFE engine (with a warning when engine is CUDNN). */
ct_status ct_conv_cudnn_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err);
/* Forward / backward of Convolution (reverse false) or Deconvolution on
 * cuDNN; l->gpu_priv must be set.  Asynchronous on the context's stream,
 * no allocation. */
ct_status ct_conv_cudnn_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                ct_error *err);
void ct_conv_cudnn_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                            ct_tensor *const *bottom);
void ct_conv_cudnn_destroy(ct_layer *l);
/* prepare_gpu of Convolution (layers/layer.h): the filter transforms of
 * the directions that run a Winograd configuration (backward data only
 * with bottom_grad), enqueued with side into buffers of the layer's own;
 * l->gpu_priv must be set. */
bool ct_conv_cudnn_prepare(ct_layer *l, ct_context *side, bool bottom_grad);
/* Net fusion (net_fuse.c): makes the forward of Convolution l compute
 * y = max(conv(x) + bias, 0), the ReLU (negative_slope 0) that follows it in
 * place, adding the bias and clamping in one pass (ct_bias_relu_gpu; in 16
 * bits ct_bias_add_gpu_typed) instead of two; the ReLU layer's forward then
 * does nothing.  A 16-bit layer takes the ReLU's backward too where
 * backward_ok (*backward_too): its backward first zeroes the top's
 * gradient where the top is not above 0, in the pass that sums the bias
 * gradient (ct_channel_sums_gpu), and the ReLU does nothing either way;
 * otherwise the ReLU's backward stays as it is.  Returns false, changing nothing,
 * unless cuDNN runs l and l is a Convolution with a bias and one bottom. */
bool ct_conv_cudnn_absorb_relu(ct_layer *l, bool backward_ok, bool *backward_too);
/* Net fusion (net_fuse.c): the forward of Convolution l leaves its bias
 * out, for the MAX Pooling that alone reads its top to add (the maximum
 * of a window plus a constant is the maximum of the window's values plus
 * it, exactly); the top then holds conv(x) without the bias, and the
 * backward is unchanged.  Returns false, changing nothing, unless cuDNN
 * runs l and l is a Convolution with a bias, one bottom and no fused ReLU. */
bool ct_conv_cudnn_defer_bias(ct_layer *l);
/* The chosen algorithms as text, e.g. "fwd IMPLICIT_PRECOMP_GEMM* 1.2M |
 * bwd-data ALGO_1* 0.0M | bwd-filter ALGO_1 4.0M" (a star: TF32 allowed; the
 * workspace in MiB; " (heuristics)" when not benchmarked), or "CAFFE engine"
 * when cuDNN does not run the layer.  Returns buf. */
char *ct_conv_cudnn_describe(const ct_layer *l, char *buf, size_t len);
/* The race against Cortado's kernels (CORTADO_OWN_CONV=1 or force) for
 * direction dir (0 forward, 1 backward data, 2 backward filter): the
 * milliseconds per call of cuDNN's chosen algorithm in *cudnn_ms and of
 * Cortado's fastest configuration in *own_ms.  False, nothing written,
 * when that direction ran no race (the mode is off, the kernels cannot run
 * it, cuDNN does not run the layer, or the choice came from the algorithm
 * table's file).  For benchmarks. */
bool ct_conv_cudnn_race_ms(const ct_layer *l, int dir, float *cudnn_ms, float *own_ms);

#ifdef __cplusplus
}
#endif

#endif
