#include "gpu/gpu.h"
#include "layers/hinge_loss.h"
#include "layers/loss_common.h"

/* One thread per item, looping over its scores. */
__global__ static void hinge_fwd(int num, size_t dim, const float *x, const float *label, bool l1,
                                 float *margin, float *loss, float *flag) {
  CT_CUDA_KERNEL_LOOP(n, (size_t)num) {
    int y = 0;
    int role = ct_label_classify(label[n], (int)dim, false, 0, &y);
    float s = 0.0f;
    if (role == 1) {
      for (size_t k = 0; k < dim; k++) {
        size_t i = n * dim + k;
        float t = fmaxf(0.0f, 1.0f + (k == (size_t)y ? -x[i] : x[i]));
        margin[i] = t;
        s += l1 ? t : t * t;
      }
    }
    loss[n] = s;
    flag[n] = (float)role;
  }
}

__global__ static void hinge_bwd(size_t n, size_t dim, const float *margin, const float *label,
                                 bool l1, const float *loss_weight, float inv_num, float *dx) {
  CT_CUDA_KERNEL_LOOP(i, n) {
    size_t k = i % dim;
    int y = (int)label[i / dim];
    float t = margin[i];
    float g = l1 ? (t > 0.0f ? 1.0f : 0.0f) : 2.0f * t;
    dx[i] = (k == (size_t)y ? -g : g) * (loss_weight[0] * inv_num);
  }
}

extern "C" void ct_hinge_forward_gpu(ct_context *ctx, int num, size_t dim, const float *x,
                                     const float *label, bool l1, float *margin, float *loss,
                                     float *flag) {
  if (num <= 0) return;
  hinge_fwd<<<ct_cuda_blocks((size_t)num), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      num, dim, x, label, l1, margin, loss, flag);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_hinge_backward_gpu(ct_context *ctx, int num, size_t dim, const float *margin,
                                      const float *label, bool l1, const float *loss_weight,
                                      float inv_num, float *dx) {
  size_t n = (size_t)num * dim;
  if (!n) return;
  hinge_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, dim, margin, label, l1, loss_weight, inv_num, dx);
  CT_CUDA_LAUNCH_CHECK();
}
