/* GPU launcher of the Tile layer's backward (tile.cu), on ctx's stream. */
#ifndef CT_LAYERS_TILE_H
#define CT_LAYERS_TILE_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dx(outer, inner) = sum over t < tiles of dy(outer, tiles, inner)[., t, .]. */
void ct_tile_backward_gpu(ct_context *ctx, size_t outer, size_t inner, int tiles, const float *dy,
                          float *dx);

#ifdef __cplusplus
}
#endif

#endif
