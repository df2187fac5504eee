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

#ifdef __cplusplus
}
#endif

#endif
