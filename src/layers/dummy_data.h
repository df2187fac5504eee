/* GPU launcher of the DummyData layer (dummy_data.cu). */
#ifndef CT_LAYERS_DUMMY_DATA_H
#define CT_LAYERS_DUMMY_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "core/context.h"
#include "caffe.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x(n) = uniform in [a, b) (gaussian = false) or normal with mean a and
 * standard deviation b (gaussian = true), from a counter-based hash of
 * (*seed_dev, index): on the device, without host work or a copy, reading
 * the seed (device memory) when it runs. */
void ct_dummy_fill_gpu(ct_context *ctx, size_t n, float *x, bool gaussian, float a, float b,
                       const uint64_t *seed_dev);
/* Whether a GPU DummyData draws filler fp's values on the device (uniform,
 * dense gaussian): a CUDA graph can capture its refills. */
bool ct_dummy_filler_on_device(const Caffe__FillerParameter *fp);

#ifdef __cplusplus
}
#endif

#endif
