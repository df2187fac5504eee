/* MemoryData: batches from arrays a program hands over with
 * ct_memory_data_set (Caffe's MemoryDataLayer::Reset). */
#ifndef CT_LAYERS_MEMORY_DATA_LAYER_H
#define CT_LAYERS_MEMORY_DATA_LAYER_H

#include <stddef.h>

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Gives a MemoryData layer n samples: data (n, channels, height, width) and
 * labels (n), both host arrays that are borrowed (not copied) and must stay
 * valid while the layer uses them.  Each forward copies the next batch_size
 * samples into the tops, wrapping to the start after the last; the position
 * restarts at 0.  Errors (CT_ERR_INVALID):
 *   "layer NAME (TYPE) is not a MemoryData layer"
 *   "n (10) must be a positive multiple of batch_size (4)"
 *   "data must not be NULL" (labels may be NULL when the layer has one top). */
ct_status ct_memory_data_set(ct_layer *l, const float *data, const float *labels, size_t n,
                             ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
