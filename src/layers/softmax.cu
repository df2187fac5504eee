#include "gpu/gpu.h"
#include "layers/softmax.h"

/* One thread per (outer, inner) position, looping over the channels. */
__global__ static void softmax_fwd(size_t positions, int channels, size_t inner, const float *x,
                                   float *y) {
  CT_CUDA_KERNEL_LOOP(p, positions) {
    size_t base = (p / inner) * channels * inner + p % inner;
    float m = x[base];
    for (int c = 1; c < channels; c++) m = fmaxf(m, x[base + c * inner]);
    float s = 0.0f;
    for (int c = 0; c < channels; c++) {
      float e = expf(x[base + c * inner] - m);
      y[base + c * inner] = e;
      s += e;
    }
    for (int c = 0; c < channels; c++) y[base + c * inner] /= s;
  }
}

__global__ static void softmax_bwd(size_t positions, int channels, size_t inner, const float *y,
                                   const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(p, positions) {
    size_t base = (p / inner) * channels * inner + p % inner;
    float dot = 0.0f;
    for (int c = 0; c < channels; c++) dot += dy[base + c * inner] * y[base + c * inner];
    for (int c = 0; c < channels; c++) {
      size_t j = base + c * inner;
      dx[j] = y[j] * (dy[j] - dot);
    }
  }
}

extern "C" void ct_softmax_forward_gpu(ct_context *ctx, size_t outer, int channels, size_t inner,
                                       const float *x, float *y) {
  size_t n = outer * inner;
  if (!n || !channels) return;
  softmax_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, channels,
                                                                                    inner, x, y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_softmax_backward_gpu(ct_context *ctx, size_t outer, int channels, size_t inner,
                                        const float *y, const float *dy, float *dx) {
  size_t n = outer * inner;
  if (!n || !channels) return;
  softmax_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, channels, inner, y, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
