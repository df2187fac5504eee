#include "gpu/gpu.h"
#include "layers/loss_common.h"
#include "layers/multinomial_logistic_loss.h"

__global__ static void multinomial_fwd(int num, size_t dim, const float *prob, const float *label,
                                       float *loss, float *flag) {
  CT_CUDA_KERNEL_LOOP(n, (size_t)num) {
    int y = 0;
    int role = ct_label_classify(label[n], (int)dim, false, 0, &y);
    loss[n] = role == 1 ? -logf(fmaxf(prob[n * dim + y], CT_LOG_THRESHOLD)) : 0.0f;
    flag[n] = (float)role;
  }
}

__global__ static void multinomial_bwd(size_t n, size_t dim, const float *prob, const float *label,
                                       const float *loss_weight, float inv_num, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    bool at_label = (size_t)(int)label[i / dim] == i % dim;
    dx[i] = at_label ? -loss_weight[0] * inv_num / fmaxf(prob[i], CT_LOG_THRESHOLD) : 0.0f;
  }
}

extern "C" void ct_multinomial_forward_gpu(ct_context *ctx, int num, size_t dim, const float *prob,
                                           const float *label, float *loss, float *flag) {
  if (num <= 0) return;
  multinomial_fwd<<<ct_cuda_blocks((size_t)num), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      num, dim, prob, label, loss, flag);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_multinomial_backward_gpu(ct_context *ctx, int num, size_t dim,
                                            const float *prob, const float *label,
                                            const float *loss_weight, float inv_num, float *dx) {
  size_t n = (size_t)num * dim;
  if (!n) return;
  multinomial_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, dim, prob, label, loss_weight, inv_num, dx);
  CT_CUDA_LAUNCH_CHECK();
}
