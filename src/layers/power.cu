#include "gpu/gpu.h"
#include "layers/power.h"

__global__ static void power_fwd(size_t n, float power, float scale, float shift, const float *x,
                                 float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    float base = scale * x[i] + shift;
    y[i] = power == 1.0f ? base : powf(base, power);
  }
}

__global__ static void power_fill(size_t n, float value, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = value;
}

/* The case split of power_backward_cpu, uniform across threads. */
__global__ static void power_bwd(size_t n, float power, float scale, float shift, const float *x,
                                 const float *y, const float *dy, float *dx) {
  const float diff_scale = power * scale;
  CT_CUDA_KERNEL_LOOP(i, n) {
    float g;
    if (diff_scale == 0.0f || power == 1.0f)
      g = diff_scale;
    else if (power == 2.0f)
      g = diff_scale * scale * x[i] + diff_scale * shift;
    else if (shift == 0.0f)
      g = power * (y[i] / x[i]);
    else
      g = diff_scale * (y[i] / (scale * x[i] + shift));
    dx[i] = dy[i] * g;
  }
}

extern "C" void ct_power_forward_gpu(ct_context *ctx, size_t n, float power, float scale,
                                     float shift, const float *x, float *y) {
  if (!n) return;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  if (power * scale == 0.0f) {
    float value = power == 0.0f ? 1.0f : powf(shift, power);
    power_fill<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, stream>>>(n, value, y);
  } else {
    power_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, stream>>>(n, power, scale, shift, x, y);
  }
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_power_backward_gpu(ct_context *ctx, size_t n, float power, float scale,
                                      float shift, const float *x, const float *y, const float *dy,
                                      float *dx) {
  if (!n) return;
  power_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, power, scale, shift, x, y, dy, dx);
  CT_CUDA_LAUNCH_CHECK();
}
