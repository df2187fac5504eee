/* BatchReindex helpers shared by batch_reindex.c and its GPU launchers
 * (batch_reindex.cu, on ctx's stream). */
#ifndef CT_LAYERS_BATCH_REINDEX_H
#define CT_LAYERS_BATCH_REINDEX_H

#include <stddef.h>

#include "core/context.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CT_OK when every index[j] (n host values) is in [0, batch); else
 * CT_ERR_INVALID naming the first bad value and its position. */
ct_status ct_batch_reindex_check(const float *index, size_t n, int batch, ct_error *err);

/* y(n, inner) = x[index[j]] row by row (indices already checked). */
void ct_batch_reindex_forward_gpu(ct_context *ctx, size_t n, size_t inner, const float *index,
                                  const float *x, float *y);
/* dx(batch, inner) = sum over j with index[j] == b of dy[j] (written, not added). */
void ct_batch_reindex_backward_gpu(ct_context *ctx, int batch, size_t n, size_t inner,
                                   const float *index, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
