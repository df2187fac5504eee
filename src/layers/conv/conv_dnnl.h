/* The fast host engine of Convolution and Deconvolution: oneDNN's
 * convolution primitives (JIT kernels for the machine's vector unit, threaded
 * on OpenMP's team) over the blobs' own (image, channel, spatial...) layout.
 *
 * It computes the same three products as the im2col + GEMM reference engine
 * of conv_common.h, for the whole batch at once, in its X / Y view (X the
 * convolution's input, Y its output; Deconvolution swaps which is the
 * bottom):
 *     y_from_x      Y = conv(X, W) (+ bias over Y channels)  oneDNN forward
 *     x_from_y      X = conv^T(Y, W)                         backward data
 *     weight_grad   dW += corr(X, dY) (and dbias += sum dY)  backward weights
 *
 * The primitives are made once per geometry (at reshape), with the layouts
 * oneDNN prefers; the reorders between those and the blobs' layout are made
 * with them.  A reordered input is kept in a slot that remembers the blob it
 * came from, so backward reuses forward's reorder of the same data: the layer
 * says when a slot's blob may have changed (ct_conv_dnnl_forget), as the
 * reference engine does for its column matrix.
 *
 * x and y (and their gradients) are of the element type the plan was made
 * for (act: float32 or bfloat16, oneDNN's bf16 kernels on AVX512_BF16 or
 * AMX), in the blobs' memory order (layout: NCHW, or channels-last for a
 * 16-bit layer, which oneDNN's kernels take without reorders); the weights
 * and bias are always float32 (the solver's master copy,
 * reordered into the computing type as they are read), as are the weight
 * and bias gradients.
 *
 * Without oneDNN (CORTADO_HAVE_DNNL unset) ct_conv_dnnl_create always
 * declines and the layers keep the reference engine. */
#ifndef CT_LAYERS_CONV_DNNL_H
#define CT_LAYERS_CONV_DNNL_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/conv/conv_common.h"
#include "math/math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which reordered input a ct_conv_dnnl_forget call drops. */
typedef enum ct_conv_dnnl_slot {
  CT_CONV_DNNL_SLOT_X = 0, /* X values (Convolution's bottom data, Deconvolution's top diff) */
  CT_CONV_DNNL_SLOT_Y = 1, /* Y values (Convolution's top diff, Deconvolution's bottom data) */
} ct_conv_dnnl_slot;

#ifdef CORTADO_HAVE_DNNL

/* C (M, N) = alpha op(A) op(B) + beta C, row-major, op = transpose when
 * trans_a / trans_b, on OpenMP's threads (oneDNN's sgemm): the host GEMM of
 * the convolution engines and InnerProduct, so that their GEMMs share the
 * one thread team with oneDNN instead of waking OpenBLAS's pool, whose
 * spinning threads slowed the oneDNN primitives around them by half. */
void ct_conv_dnnl_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float *A, const float *B, float beta, float *C);

/* Plans the primitives for c's current geometry (c->num images; the bias
 * joins forward and backward weights when y_bias; x and y of type act in
 * memory order layout).  Returns NULL when oneDNN
 * has no implementation for it, with the reason in why (why_len bytes).
 * The result is owned by the caller: ct_conv_dnnl_free. */
ct_conv_dnnl *ct_conv_dnnl_create(const ct_conv *c, bool y_bias, ct_dtype act, ct_layout layout,
                                  char *why, size_t why_len);
void ct_conv_dnnl_free(ct_conv_dnnl *f);
/* "oneDNN (forward jit:avx2, backward data ..., backward weights ...)" into buf. */
const char *ct_conv_dnnl_describe(const ct_conv_dnnl *f, char *buf, size_t len);

/* Drops the slot's remembered input: call it whenever the values behind the
 * blob it came from may have changed (every forward for forward inputs,
 * every backward for diffs). */
void ct_conv_dnnl_forget(ct_conv_dnnl *f, ct_conv_dnnl_slot slot);
/* y (num, y_channels, y_spatial) = conv(x, w) + bias (bias NULL: none; only
 * when planned with y_bias). */
void ct_conv_dnnl_y_from_x(ct_conv_dnnl *f, const float *w, const float *bias, const void *x,
                           void *y);
/* x (num, x_channels, x_spatial) = the transposed convolution of y; x is
 * overwritten. */
void ct_conv_dnnl_x_from_y(ct_conv_dnnl *f, const float *w, const void *y, void *x);
/* dw += the weight gradient of x and dy; dbias (y_channels, NULL: skip;
 * only when planned with y_bias) += the sum of dy over images and space. */
void ct_conv_dnnl_weight_grad(ct_conv_dnnl *f, const void *x, const void *dy, float *dw,
                              float *dbias);

#else

static inline void ct_conv_dnnl_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                                     const float *A, const float *B, float beta, float *C) {
  ct_cpu_gemm(trans_a, trans_b, M, N, K, alpha, A, B, beta, C);
}

static inline ct_conv_dnnl *ct_conv_dnnl_create(const ct_conv *c, bool y_bias, ct_dtype act,
                                                ct_layout layout, char *why, size_t why_len) {
  (void)c;
  (void)y_bias;
  (void)act;
  (void)layout;
  if (why_len) why[0] = '\0';
  return NULL;
}
static inline void ct_conv_dnnl_free(ct_conv_dnnl *f) { (void)f; }
static inline const char *ct_conv_dnnl_describe(const ct_conv_dnnl *f, char *buf, size_t len) {
  (void)f;
  if (len) buf[0] = '\0';
  return buf;
}
static inline void ct_conv_dnnl_forget(ct_conv_dnnl *f, ct_conv_dnnl_slot slot) {
  (void)f;
  (void)slot;
}
static inline void ct_conv_dnnl_y_from_x(ct_conv_dnnl *f, const float *w, const float *bias,
                                         const void *x, void *y) {
  CT_ASSERT(!"oneDNN is not built in");
}
static inline void ct_conv_dnnl_x_from_y(ct_conv_dnnl *f, const float *w, const void *y,
                                         void *x) {
  CT_ASSERT(!"oneDNN is not built in");
}
static inline void ct_conv_dnnl_weight_grad(ct_conv_dnnl *f, const void *x, const void *dy,
                                            float *dw, float *dbias) {
  CT_ASSERT(!"oneDNN is not built in");
}

#endif

#ifdef __cplusplus
}
#endif

#endif
