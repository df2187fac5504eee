/* CPU-only builds: the GPU entry points report that there is no GPU. */
#ifndef CORTADO_HAVE_CUDA
#include "gpu/gpu.h"

int ct_gpu_device_count(void) { return 0; }
#endif
