#include "gpu/gpu.h"
#include "layers/infogain_loss.h"
#include "layers/loss_common.h"

__global__ static void infogain_fwd(size_t positions, int L, size_t inner, const float *prob,
                                    const float *label, const float *h, bool has_ignore,
                                    int ignore_label, float *loss, float *flag) {
  CT_CUDA_KERNEL_LOOP(p, positions) {
    int y = 0;
    int role = ct_label_classify(label[p], L, has_ignore, ignore_label, &y);
    float s = 0.0f;
    if (role == 1) {
      size_t base = (p / inner) * L * inner + p % inner;
      for (int c = 0; c < L; c++)
        s -= h[(size_t)y * L + c] * logf(fmaxf(prob[base + c * inner], CT_LOG_THRESHOLD));
    }
    loss[p] = s;
    flag[p] = (float)role;
  }
}

__global__ static void infogain_rows(int L, const float *h, float *sums) {
  CT_CUDA_KERNEL_LOOP(r, (size_t)L) {
    float s = 0.0f;
    for (int c = 0; c < L; c++) s += h[r * L + c];
    sums[r] = s;
  }
}

__global__ static void infogain_bwd(size_t n, int L, size_t inner, const float *prob,
                                    const float *label, const float *h, const float *sums,
                                    bool has_ignore, int ignore_label, const float *loss_weight,
                                    const float *inv_norm, float *dx) {
  CT_CUDA_KERNEL_LOOP(j, n) {
    size_t k = j % inner, c = (j / inner) % L, i = j / (inner * L);
    int y = 0;
    int role = ct_label_classify(label[i * inner + k], L, has_ignore, ignore_label, &y);
    float g = 0.0f;
    if (role == 1) g = (prob[j] * sums[y] - h[(size_t)y * L + c]) * (loss_weight[0] * inv_norm[0]);
    dx[j] = g;
  }
}

extern "C" void ct_infogain_forward_gpu(ct_context *ctx, size_t outer, int L, size_t inner,
                                        const float *prob, const float *label, const float *h,
                                        bool has_ignore, int ignore_label, float *loss,
                                        float *flag) {
  size_t n = outer * inner;
  if (!n) return;
  infogain_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, L, inner, prob, label, h, has_ignore, ignore_label, loss, flag);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_infogain_sum_rows_gpu(ct_context *ctx, int L, const float *h, float *sums) {
  if (L <= 0) return;
  infogain_rows<<<ct_cuda_blocks((size_t)L), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      L, h, sums);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_infogain_backward_gpu(ct_context *ctx, size_t outer, int L, size_t inner,
                                         const float *prob, const float *label, const float *h,
                                         const float *sums, bool has_ignore, int ignore_label,
                                         const float *loss_weight, const float *inv_norm,
                                         float *dx) {
  size_t n = outer * L * inner;
  if (!n) return;
  infogain_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, L, inner, prob, label, h, sums, has_ignore, ignore_label, loss_weight, inv_norm, dx);
  CT_CUDA_LAUNCH_CHECK();
}
