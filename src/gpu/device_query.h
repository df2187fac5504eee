/* What `cortado device_query` shows about a CUDA device, and the check that
 * a device id names a visible device. */
#ifndef CT_GPU_DEVICE_QUERY_H
#define CT_GPU_DEVICE_QUERY_H

#include <stdio.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CT_OK when `device` is a CUDA device visible to this process.  Otherwise:
 *  - CT_ERR_UNSUPPORTED "no CUDA device (this build has no CUDA)" in a CPU build;
 *  - CT_ERR_NOTFOUND naming the cause when there is none: "no CUDA device:
 *    no NVIDIA driver is installed on this machine", "... the NVIDIA driver
 *    sees no GPU", "... CUDA_VISIBLE_DEVICES=X hides every GPU", or "no
 *    usable CUDA device: the NVIDIA driver supports CUDA 12.2, older than
 *    this build's CUDA runtime 13.0 (update the driver)";
 *  - CT_ERR_INVALID "no CUDA device N (K visible: 0 to K-1)" when out of range. */
ct_status ct_gpu_check_device(int device, ct_error *err);

/* Describes `device`: name, compute capability, memory sizes, per-block and
 * per-multiprocessor limits, clock rates, multiprocessor count, kernel
 * timeout, ECC, PCI location...  One "Label: value" line per property.
 * out == NULL: the lines go through LOG_INFO (glog format, stderr and the log
 * file), as `caffe device_query` prints them; otherwise they are written
 * as they are to out.  Fails as ct_gpu_check_device does, or with
 * CT_ERR_DEVICE (the CUDA call, file:line and CUDA's message) when a query
 * fails. */
ct_status ct_gpu_print_device_info(int device, FILE *out, ct_error *err);

#ifdef __cplusplus
}
#endif

#endif
