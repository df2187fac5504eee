/* CPU-only builds: there is no device to check or describe. */
#ifndef CORTADO_HAVE_CUDA
#include "gpu/device_query.h"

ct_status ct_gpu_check_device(int device, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "no CUDA device (this build has no CUDA)");
}

ct_status ct_gpu_print_device_info(int device, FILE *out, ct_error *err) {
  return ct_gpu_check_device(device, err);
}
#endif
