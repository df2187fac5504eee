/* Stream priorities (see streams.h). */
#include <cuda_runtime.h>

#include "core/settings.h"
#include "runtime/streams.h"

extern "C" int ct_stream_priority(ct_stream_role role) {
  int least = 0, greatest = 0;
  if (cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  switch (role) {
    case CT_STREAM_COMM: return greatest;
    case CT_STREAM_GRADIENTS: return least;
    case CT_STREAM_COMPUTE: break;
  }
  if (!ct_setting_bool("CORTADO_STREAM_PRIORITY")) return 0;
  return greatest < least - 1 ? greatest + 1 : greatest;
}
