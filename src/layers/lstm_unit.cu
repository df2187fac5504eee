/* The LSTM step kernels: one thread per (stream, cell), the math of
 * lstm_unit.h. */
#include "gpu/gpu.h"
#include "layers/lstm_unit.h"

__global__ static void lstm_step_fwd(ct_lstm_step_fwd a) {
  CT_CUDA_KERNEL_LOOP(k, (size_t)a.N * a.D) ct_lstm_step_forward_cell(&a, k);
}

__global__ static void lstm_step_bwd(ct_lstm_step_bwd a) {
  CT_CUDA_KERNEL_LOOP(k, (size_t)a.N * a.D) ct_lstm_step_backward_cell(&a, k);
}

extern "C" void ct_lstm_step_forward_gpu(ct_context *ctx, const ct_lstm_step_fwd *a) {
  const size_t n = (size_t)a->N * a->D;
  if (!n) return;
  lstm_step_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(*a);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_lstm_step_backward_gpu(ct_context *ctx, const ct_lstm_step_bwd *a) {
  const size_t n = (size_t)a->N * a->D;
  if (!n) return;
  lstm_step_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(*a);
  CT_CUDA_LAUNCH_CHECK();
}
