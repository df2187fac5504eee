/* GPU launchers of the Reduction layer (reduction.cu), on ctx's stream.
 * coeff already holds the 1/dim of MEAN, which otherwise is a SUM. */
#ifndef CT_LAYERS_REDUCTION_H
#define CT_LAYERS_REDUCTION_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What each reduced value contributes: x, |x| or x^2. */
typedef enum ct_reduce_term { CT_REDUCE_SUM = 0, CT_REDUCE_ASUM, CT_REDUCE_SUMSQ } ct_reduce_term;

/* y(num) = coeff * reduce(x(num, dim)) row by row. */
void ct_reduction_forward_gpu(ct_context *ctx, ct_reduce_term op, size_t num, size_t dim, float coeff,
                              const float *x, float *y);
/* dx(num, dim) = coeff * dy(num) * d reduce / dx. */
void ct_reduction_backward_gpu(ct_context *ctx, ct_reduce_term op, size_t num, size_t dim, float coeff,
                               const float *x, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
