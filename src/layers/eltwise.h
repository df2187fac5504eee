/* GPU launchers of the Eltwise layer (eltwise.cu), on ctx's stream.  The
 * argmax array holds bottom indices as floats. */
#ifndef CT_LAYERS_ELTWISE_H
#define CT_LAYERS_ELTWISE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "core/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

/* All on n values of the element type t (core/dtype.h), computed in
 * float32 and rounded once per call. */
/* out = a x + b y (y may be NULL: out = a x), then max(out, 0) with relu;
 * out may be x or y. */
void ct_eltwise_axpby_gpu(ct_context *ctx, ct_dtype t, size_t n, float a, const void *x, float b,
                          const void *y, bool relu, void *out);
/* dx = a dy where y > 0, else 0 (a fused ReLU's gradient through SUM). */
void ct_eltwise_relu_grad_gpu(ct_context *ctx, ct_dtype t, size_t n, float a, const void *dy,
                              const void *y, void *dx);
/* Both gradients of a SUM of two bottoms in one pass: dx0 = a g, dx1 = b g
 * with g = dy, or where y (the top, for a fused ReLU; may be NULL) is above
 * 0, else 0. */
void ct_eltwise_sum2_grad_gpu(ct_context *ctx, ct_dtype t, size_t n, float a, float b,
                              const void *dy, const void *y, void *dx0, void *dx1);
/* y = a * b, or a / b with divide; y may be a or b. */
void ct_eltwise_mul_gpu(ct_context *ctx, ct_dtype t, size_t n, const void *a, const void *b,
                        void *y, bool divide);
/* MAX of the first two bottoms: y = max(a, b), argmax 0 where a > b, else 1. */
void ct_eltwise_max_first_gpu(ct_context *ctx, ct_dtype t, size_t n, const void *a, const void *b,
                              void *y, float *argmax);
/* Folds bottom i in: where x > y, y = x and argmax = i. */
void ct_eltwise_max_next_gpu(ct_context *ctx, ct_dtype t, size_t n, const void *x, int i, void *y,
                             float *argmax);
/* dx = argmax == i ? dy : 0. */
void ct_eltwise_max_backward_gpu(ct_context *ctx, ct_dtype t, size_t n, int i, const float *argmax,
                                 const void *dy, void *dx);

#ifndef __CUDACC__
#include "layers/layer.h"
/* Net fusion (net_fuse.c) on a GPU: the SUM Eltwise l computes the ReLU
 * (slope 0) in place on its top as well, relu_top(sum) in forward and the
 * gradient only where the top is above 0 in backward; false, with nothing
 * changed, for other operations or on the host. */
bool ct_eltwise_absorb_relu(ct_layer *l);
/* Net fusion on a GPU: the SUM Eltwise l writes its sum over its last
 * bottom's values (its top views them from its next reshape on), for a
 * bottom that nothing reads afterwards, forward or backward (the net's
 * check).  SUM's backward reads no values, and that bottom's gradient is
 * the last one computed, in place on the top's.  False, with nothing
 * changed, for other operations or on the host. */
bool ct_eltwise_sum_in_place(ct_layer *l);
#endif

#ifdef __cplusplus
}
#endif

#endif
