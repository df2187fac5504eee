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
/* out = a x + b y (y may be NULL: out = a x); out may be x or y. */
void ct_eltwise_axpby_gpu(ct_context *ctx, ct_dtype t, size_t n, float a, const void *x, float b,
                          const void *y, void *out);
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

#ifdef __cplusplus
}
#endif

#endif
