#include "gpu/gpu.h"
#include "layers/contrastive_loss.h"

__device__ static bool similar_pair(float y) { return y >= 1.0f || y <= -1.0f; }

__global__ static void contrastive_fwd(int num, int channels, const float *diff,
                                       const float *similar, float margin, bool legacy,
                                       float *dist_sq, float *loss) {
  CT_CUDA_KERNEL_LOOP(n, (size_t)num) {
    float d2 = 0.0f;
    for (int c = 0; c < channels; c++) {
      float d = diff[n * channels + c];
      d2 += d * d;
    }
    dist_sq[n] = d2;
    float l;
    if (similar_pair(similar[n])) {
      l = d2;
    } else if (legacy) {
      l = fmaxf(margin - d2, 0.0f);
    } else {
      float m = fmaxf(margin - sqrtf(d2), 0.0f);
      l = m * m;
    }
    loss[n] = l;
  }
}

__global__ static void contrastive_bwd(size_t n, int channels, const float *diff,
                                       const float *dist_sq, const float *similar, float margin,
                                       bool legacy, const float *loss_weight, float sign_over_num,
                                       float *dx) {
  CT_CUDA_KERNEL_LOOP(j, n) {
    size_t pair = j / channels;
    float alpha = loss_weight[0] * sign_over_num, beta;
    if (similar_pair(similar[pair])) {
      beta = alpha;
    } else if (legacy) {
      beta = margin - dist_sq[pair] > 0.0f ? -alpha : 0.0f;
    } else {
      float dist = sqrtf(dist_sq[pair]), m = margin - dist;
      beta = m > 0.0f ? -alpha * m / (dist + 1e-4f) : 0.0f;
    }
    dx[j] = beta * diff[j];
  }
}

extern "C" void ct_contrastive_forward_gpu(ct_context *ctx, int num, int channels,
                                           const float *diff, const float *similar, float margin,
                                           bool legacy, float *dist_sq, float *loss) {
  if (num <= 0) return;
  contrastive_fwd<<<ct_cuda_blocks((size_t)num), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      num, channels, diff, similar, margin, legacy, dist_sq, loss);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_contrastive_backward_gpu(ct_context *ctx, int num, int channels,
                                            const float *diff, const float *dist_sq,
                                            const float *similar, float margin, bool legacy,
                                            const float *loss_weight, float sign_over_num,
                                            float *dx) {
  size_t n = (size_t)num * (size_t)channels;
  if (!n) return;
  contrastive_bwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, channels, diff, dist_sq, similar, margin, legacy, loss_weight, sign_over_num, dx);
  CT_CUDA_LAUNCH_CHECK();
}
