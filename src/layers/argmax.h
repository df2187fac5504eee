/* GPU launcher of ArgMax (argmax.cu), on ctx's stream. */
#ifndef CT_LAYERS_ARGMAX_H
#define CT_LAYERS_ARGMAX_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* For each of rows selections of dim values spaced axis_dist apart (row r
 * starts at (r / axis_dist) * dim * axis_dist + r % axis_dist), the top_k
 * values, larger index first on ties.  Writes y as the ArgMax layer lays it
 * out: interleaved (indices then values per row) when pairs, else the
 * values (out_max_val) or the indices at the selection's positions. */
void ct_argmax_forward_gpu(ct_context *ctx, size_t rows, size_t dim, size_t axis_dist,
                           unsigned top_k, bool out_max_val, bool pairs, const float *x, float *y);

#ifdef __cplusplus
}
#endif

#endif
