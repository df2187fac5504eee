/* CPU-only builds: no GPU reducer. */
#ifndef CORTADO_HAVE_CUDA
#include "parallel/dp_gpu.h"

ct_status ct_dp_gpu_create(ct_dp_gpu **out, ct_context *ctx, ct_comm *comm, int nbuckets, bool timing,
                           ct_error *err) {
  *out = NULL;
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "GPU data parallelism needs a build with CUDA");
}
void ct_dp_gpu_free(ct_dp_gpu *g) {}
void ct_dp_gpu_begin(ct_dp_gpu *g) {}
ct_status ct_dp_gpu_launch(ct_dp_gpu *g, int b, float *buf, size_t count, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "GPU data parallelism needs a build with CUDA");
}
void ct_dp_gpu_set_requests(ct_dp_gpu *g, unsigned seq, const float req[CT_DP_GPU_CTL]) {}
void ct_dp_gpu_agreed(const ct_dp_gpu *g, unsigned seq, float sum[CT_DP_GPU_CTL]) {}
ct_status ct_dp_gpu_join(ct_dp_gpu *g, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "GPU data parallelism needs a build with CUDA");
}
ct_status ct_dp_gpu_capture_end(ct_dp_gpu *g, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "GPU data parallelism needs a build with CUDA");
}
ct_status ct_dp_gpu_wait(ct_dp_gpu *g, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "GPU data parallelism needs a build with CUDA");
}
ct_status ct_dp_gpu_wait_iteration(ct_dp_gpu *g, unsigned seq, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "GPU data parallelism needs a build with CUDA");
}
ct_status ct_dp_gpu_broadcast(ct_dp_gpu *g, float *buf, size_t count, int root, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "GPU data parallelism needs a build with CUDA");
}
ct_status ct_dp_gpu_share_conv_algos(ct_comm *comm, bool send, ct_error *err) { return CT_OK; }
bool ct_dp_gpu_times(ct_dp_gpu *g, int nbuckets, ct_dp_bucket_time *t, ct_dp_iter_time *it) {
  return false;
}
#endif
