/* The CUDA runtime as the rest of Cortado sees it: device discovery and the
 * checked-call macros.  Everything here compiles in a CPU-only build too;
 * there the functions report zero devices or CT_ERR_UNSUPPORTED. */
#ifndef CT_GPU_GPU_H
#define CT_GPU_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices visible to this process; 0 when there is no driver,
 * no device, or the build has no CUDA. */
int ct_gpu_device_count(void);

#ifdef __cplusplus
}
#endif

#endif
