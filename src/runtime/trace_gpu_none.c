/* CPU-only builds: no device timelines (program.c asks for one only on a
 * GPU, which such a build never has). */
#ifndef CORTADO_HAVE_CUDA
#include "runtime/trace_gpu.h"

ct_status ct_trace_gpu_new(ct_trace_gpu **out, ct_context *ctx, int nsteps, ct_error *err) {
  *out = NULL;
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "traces of GPU runs need a build with CUDA");
}
void ct_trace_gpu_free(ct_trace_gpu *t) {}
int ct_trace_gpu_steps(const ct_trace_gpu *t) { return 0; }
void ct_trace_gpu_use(ct_trace_gpu *t, int set) {}
void ct_trace_gpu_start(ct_trace_gpu *t) {}
void ct_trace_gpu_enter(ct_trace_gpu *t, int step) {}
void ct_trace_gpu_leave(ct_trace_gpu *t, int step, bool mark) {}
void ct_trace_gpu_side(ct_context *ctx, ct_trace_gpu_stream which, bool end, void *stream) {}
ct_status ct_trace_gpu_collect(ct_trace_gpu *t, int set, const ct_program_step *steps,
                               int nsteps, long long iter, ct_error *err) {
  return CT_OK;
}
#endif
