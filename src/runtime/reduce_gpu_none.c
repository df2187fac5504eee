/* CPU-only builds: no GPU reducer (reduce.c asks for one only on a GPU,
 * which such a build never has). */
#ifndef CORTADO_HAVE_CUDA
#include "runtime/reduce_gpu.h"

#define NO_CUDA(err) ct_error_set(err, CT_ERR_UNSUPPORTED, "GPU data parallelism needs a build with CUDA")

ct_status ct_reduce_gpu_create(ct_reduce_gpu **out, const ct_iter_clock *clock, ct_comm *comm,
                               int nbuckets, bool timing, ct_dtype type, size_t max_count,
                               ct_error *err) {
  *out = NULL;
  return NO_CUDA(err);
}
void ct_reduce_gpu_free(ct_reduce_gpu *g) {}
void ct_reduce_gpu_begin(ct_reduce_gpu *g) {}
ct_status ct_reduce_gpu_launch(ct_reduce_gpu *g, int b, float *buf, size_t count, ct_error *err) {
  return NO_CUDA(err);
}
void ct_reduce_gpu_set_requests(ct_reduce_gpu *g, unsigned seq, const float req[CT_REDUCE_GPU_CTL]) {}
void ct_reduce_gpu_agreed(const ct_reduce_gpu *g, unsigned seq, float sum[CT_REDUCE_GPU_CTL]) {}
ct_status ct_reduce_gpu_join(ct_reduce_gpu *g, ct_error *err) { return NO_CUDA(err); }
ct_status ct_reduce_gpu_capture_end(ct_reduce_gpu *g, ct_error *err) { return NO_CUDA(err); }
ct_status ct_reduce_gpu_wait_iteration(ct_reduce_gpu *g, unsigned seq, ct_error *err) {
  return NO_CUDA(err);
}
ct_status ct_reduce_gpu_broadcast(ct_reduce_gpu *g, float *buf, size_t count, int root, ct_error *err) {
  return NO_CUDA(err);
}
bool ct_reduce_gpu_times(ct_reduce_gpu *g, int nbuckets, ct_reduce_bucket_time *t,
                         ct_reduce_iter_time *it) {
  return false;
}
#endif
