#include <cfloat>

#include "gpu/gpu.h"
#include "layers/loss_common.h"
#include "layers/softmax_loss.h"

__global__ static void softmax_loss_fwd(size_t positions, int C, size_t inner, const float *prob,
                                        const float *label, bool has_ignore, int ignore_label,
                                        float *loss, float *flag) {
  CT_CUDA_KERNEL_LOOP(p, positions) {
    int y = 0;
    int role = ct_label_classify(label[p], C, has_ignore, ignore_label, &y);
    float l = 0.0f;
    if (role == 1) {
      size_t i = p / inner, k = p % inner;
      l = -logf(fmaxf(prob[(i * C + y) * inner + k], FLT_MIN));
    }
    loss[p] = l;
    flag[p] = (float)role;
  }
}

/* One thread per element of (outer, C, inner). */
__global__ static void softmax_loss_bwd(size_t n, int C, size_t inner, const float *prob,
                                        const float *label, bool has_ignore, int ignore_label,
                                        const float *loss_weight, const float *inv_norm,
                                        float *dx) {
  CT_CUDA_KERNEL_LOOP(j, n) {
    size_t k = j % inner, c = (j / inner) % C, i = j / (inner * C);
    int y = 0;
    int role = ct_label_classify(label[i * inner + k], C, has_ignore, ignore_label, &y);
    float g = 0.0f;
    if (role == 1) g = (prob[j] - ((size_t)y == c ? 1.0f : 0.0f)) * (loss_weight[0] * inv_norm[0]);
    dx[j] = g;
  }
}

extern "C" void ct_softmax_loss_forward_gpu(ct_context *ctx, size_t outer, int C, size_t inner,
                                            const float *prob, const float *label, bool has_ignore,
                                            int ignore_label, float *loss, float *flag) {
  size_t n = outer * inner;
  if (!n) return;
  softmax_loss_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, C, inner, prob, label, has_ignore, ignore_label, loss, flag);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_softmax_loss_backward_gpu(ct_context *ctx, size_t outer, int C, size_t inner,
                                             const float *prob, const float *label,
                                             bool has_ignore, int ignore_label,
                                             const float *loss_weight, const float *inv_norm,
                                        float *dx) {
  size_t n = outer * C * inner;
  if (!n) return;
  softmax_loss_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, C, inner, prob, label, has_ignore, ignore_label, loss_weight, inv_norm, dx);
  CT_CUDA_LAUNCH_CHECK();
}
