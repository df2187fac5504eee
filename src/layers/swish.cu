#include "gpu/gpu.h"
#include "layers/swish.h"

__global__ static void swish_fwd(size_t n, float beta, const float *x, float *sig, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    float xi = x[i], s = 0.5f * tanhf(0.5f * (beta * xi)) + 0.5f;
    sig[i] = s;
    y[i] = xi * s;
  }
}

__global__ static void swish_bwd(size_t n, float beta, const float *y, const float *sig,
                                 const float *dy, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    float by = beta * y[i];
    dx[i] = dy[i] * (by + sig[i] * (1.0f - by));
  }
}

extern "C" void ct_swish_forward_gpu(ct_context *ctx, size_t n, float beta, const float *x,
                                     float *sig, float *y) {
  if (!n) return;
  swish_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, beta, x, sig,
                                                                                  y);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_swish_backward_gpu(ct_context *ctx, size_t n, float beta, const float *y,
                                      const float *sig, const float *dy, float *dx) {
  if (!n) return;
  swish_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(n, beta, y, sig,
                                                                                  dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
