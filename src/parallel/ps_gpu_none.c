/* CPU-only builds: no GPU worker, so no overlapped pushes (ps_gpu.h). */
#ifndef CORTADO_HAVE_CUDA
#include "parallel/ps_gpu.h"

ct_status ct_ps_gpu_new(ct_ps_gpu **out, ct_context *ctx, int n, const size_t *words, ct_error *err) {
  *out = NULL;
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "GPU pushes in a build without CUDA");
}
void ct_ps_gpu_free(ct_ps_gpu *g) {}
float *ct_ps_gpu_buffer(ct_ps_gpu *g, int k) { return NULL; }
ct_status ct_ps_gpu_copy_out(ct_ps_gpu *g, int k, size_t at, const float *src, size_t count, ct_error *err) {
  return CT_ERR_UNSUPPORTED;
}
ct_status ct_ps_gpu_wait(ct_ps_gpu *g, int k, ct_error *err) { return CT_ERR_UNSUPPORTED; }
#endif
