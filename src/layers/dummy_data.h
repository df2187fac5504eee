/* GPU launcher of the DummyData layer (dummy_data.cu). */
#ifndef CT_LAYERS_DUMMY_DATA_H
#define CT_LAYERS_DUMMY_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x(n) = uniform in [a, b) (gaussian = false) or normal with mean a and
 * standard deviation b (gaussian = true), from a counter-based hash of
 * (seed, index): on the device, without host work or a copy. */
void ct_dummy_fill_gpu(ct_context *ctx, size_t n, float *x, bool gaussian, float a, float b,
                       uint64_t seed);

#ifdef __cplusplus
}
#endif

#endif
