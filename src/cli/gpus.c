#include "cli/cli.h"
#include "gpu/device_query.h"
#include "gpu/gpu.h"

ct_status ct_cli_resolve_gpus(const ct_gpu_list *requested, ct_gpu_list *out, ct_error *err) {
  *out = *requested;
  if (!requested->all) {
    for (int i = 0; i < requested->n; i++) CT_TRY(ct_gpu_check_device(requested->ids[i], err));
    return CT_OK;
  }
  int count = ct_gpu_device_count();
  if (count == 0) return ct_gpu_check_device(0, err);
  out->all = false;
  out->n = count < CT_GPU_LIST_MAX ? count : CT_GPU_LIST_MAX;
  for (int i = 0; i < out->n; i++) out->ids[i] = i;
  return CT_OK;
}
