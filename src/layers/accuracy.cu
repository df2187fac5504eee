#include "gpu/gpu.h"
#include "layers/accuracy.h"
#include "layers/loss_common.h"

__global__ static void accuracy_fwd(size_t positions, int C, size_t inner, const float *x,
                                    const float *label, unsigned top_k, bool has_ignore,
                                    int ignore_label, float *hit, float *flag) {
  CT_CUDA_KERNEL_LOOP(p, positions) {
    int y = 0;
    int role = ct_label_classify(label[p], C, has_ignore, ignore_label, &y);
    float h = 0.0f;
    if (role == 1) {
      size_t base = (p / inner) * C * inner + p % inner;
      float truth = x[base + (size_t)y * inner];
      unsigned better = 0;
      for (int c = 0; c < C && better <= top_k; c++) better += x[base + (size_t)c * inner] >= truth;
      h = better <= top_k ? 1.0f : 0.0f;
    }
    hit[p] = h;
    flag[p] = (float)role;
  }
}

/* One block per class: its valid positions and hits, by a tree reduction. */
__global__ static void accuracy_classes(size_t positions, const float *label, const float *hit,
                                        const float *flag, float *per_class) {
  __shared__ float s_all[CT_CUDA_THREADS], s_hit[CT_CUDA_THREADS];
  int cls = blockIdx.x;
  float all = 0.0f, hits = 0.0f;
  for (size_t p = threadIdx.x; p < positions; p += blockDim.x) {
    if (flag[p] == 1.0f && (int)label[p] == cls) {
      all += 1.0f;
      hits += hit[p];
    }
  }
  s_all[threadIdx.x] = all;
  s_hit[threadIdx.x] = hits;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) {
      s_all[threadIdx.x] += s_all[threadIdx.x + w];
      s_hit[threadIdx.x] += s_hit[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) per_class[cls] = s_all[0] == 0.0f ? 0.0f : s_hit[0] / s_all[0];
}

extern "C" void ct_accuracy_forward_gpu(ct_context *ctx, size_t outer, int C, size_t inner,
                                        const float *x, const float *label, unsigned top_k,
                                        bool has_ignore, int ignore_label, float *hit,
                                        float *flag) {
  size_t n = outer * inner;
  if (!n) return;
  accuracy_fwd<<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      n, C, inner, x, label, top_k, has_ignore, ignore_label, hit, flag);
  CT_CUDA_LAUNCH_CHECK();
}

extern "C" void ct_accuracy_per_class_gpu(ct_context *ctx, size_t positions, int C,
                                          const float *label, const float *hit, const float *flag,
                                          float *per_class) {
  if (C <= 0) return;
  accuracy_classes<<<(unsigned)C, CT_CUDA_THREADS, 0, (cudaStream_t)ctx->stream>>>(
      positions, label, hit, flag, per_class);
  CT_CUDA_LAUNCH_CHECK();
}
