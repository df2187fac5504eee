/* The shared recurrent kernel (recurrent.h): cont-scaled rows. */
#include "gpu/gpu.h"
#include "layers/recurrent.h"

__global__ static void scale_rows(size_t total, int D, const float *cont, const float *x, float *y) {
  CT_CUDA_KERNEL_LOOP(k, total) y[k] = cont[k / (size_t)D] * x[k];
}

extern "C" void ct_scale_rows_gpu(ct_context *ctx, int N, int D, const float *cont, const float *x,
                                  float *y) {
  const size_t n = (size_t)N * D;
  if (!n) return;
  scale_rows<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, D, cont, x, y);
  CT_CUDA_LAUNCH_CHECK();
}
