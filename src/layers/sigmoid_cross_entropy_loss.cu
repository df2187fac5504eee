#include "gpu/gpu.h"
#include "layers/loss_common.h"
#include "layers/sigmoid_cross_entropy_loss.h"

__device__ static bool ignored(float t, bool has_ignore, int ignore_label) {
  int v;
  return has_ignore && ct_label_to_int(t, &v) && v == ignore_label;
}

__global__ static void sigmoid_ce_fwd(size_t n, const float *x, const float *t, bool has_ignore,
                                      int ignore_label, float *sigmoid, float *loss, float *flag) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    float v = x[i];
    sigmoid[i] = 0.5f * tanhf(0.5f * v) + 0.5f;
    if (ignored(t[i], has_ignore, ignore_label)) {
      loss[i] = 0.0f;
      flag[i] = 0.0f;
    } else {
      float pos = v >= 0 ? 1.0f : 0.0f;
      loss[i] = -(v * (t[i] - pos) - log1pf(expf(v - 2.0f * v * pos)));
      flag[i] = 1.0f;
    }
  }
}

__global__ static void sigmoid_ce_bwd(size_t n, const float *sigmoid, const float *t,
                                      bool has_ignore, int ignore_label, const float *loss_weight,
                                      const float *inv_norm, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    dx[i] = ignored(t[i], has_ignore, ignore_label)
                ? 0.0f
                : (sigmoid[i] - t[i]) * (loss_weight[0] * inv_norm[0]);
  }
}

extern "C" void ct_sigmoid_ce_forward_gpu(ct_context *ctx, size_t n, const float *x, const float *t,
                                          bool has_ignore, int ignore_label, float *sigmoid,
                                          float *loss, float *flag) {
  if (!n) return;
  sigmoid_ce_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, x, t, has_ignore, ignore_label, sigmoid, loss, flag);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_sigmoid_ce_backward_gpu(ct_context *ctx, size_t n, const float *sigmoid,
                                           const float *t, bool has_ignore, int ignore_label,
                                           const float *loss_weight, const float *inv_norm,
                                           float *dx) {
  if (!n) return;
  sigmoid_ce_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, sigmoid, t, has_ignore, ignore_label, loss_weight, inv_norm, dx);
  CT_CUDA_LAUNCH_CHECK();
}
