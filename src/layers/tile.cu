#include "gpu/gpu.h"
#include "layers/tile.h"

__global__ static void tile_backward_kernel(size_t n, size_t inner, int tiles, const float *dy,
                                            float *dx) {
  CT_CUDA_KERNEL_LOOP(k, n) {
    size_t i = k / inner, j = k % inner;
    const float *src = dy + i * tiles * inner + j;
    float s = 0.0f;
    for (int t = 0; t < tiles; t++) s += src[(size_t)t * inner];
    dx[k] = s;
  }
}

extern "C" void ct_tile_backward_gpu(ct_context *ctx, size_t outer, size_t inner, int tiles,
                                     const float *dy, float *dx) {
  size_t n = outer * inner;
  if (!n) return;
  tile_backward_kernel<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, inner, tiles, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
