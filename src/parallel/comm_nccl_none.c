/* CPU-only builds: no NCCL. */
#ifndef CORTADO_HAVE_CUDA
#include "parallel/comm_nccl.h"

ct_status ct_nccl_unique_id(ct_nccl_id *id, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "NCCL is not available: this build has no CUDA");
}

ct_status ct_comm_nccl_create(ct_comm **out, const ct_nccl_id *id, int rank, int size, int device,
                              const ct_comm_nccl_opts *opts, ct_error *err) {
  *out = NULL;
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "NCCL is not available: this build has no CUDA");
}

void *ct_comm_nccl_stream(const ct_comm *c) { return NULL; }

const char *ct_nccl_version(void) { return "none"; }
#endif
