#include <cfloat>

#include "gpu/gpu.h"
#include "layers/block_reduce.cuh"
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

/* ---------------------------------------------------------------- one kernel
 * One block of up to FUSED_THREADS threads.  Positions are handed to groups
 * of G lanes (G a power of two up to 32, so a group lies inside one warp):
 * group g takes positions g, g + groups, g + 2 * groups, ...; its lanes split
 * the classes (lane j: classes j, j + G, ...) and combine their max and sum
 * with shuffles inside the group.  Every thread runs the same number of
 * rounds, so whole warps reach each shuffle.  Each thread keeps its own
 * running loss (in double) and counts over the positions it saw; one
 * block-wide tree adds them up: a fixed order, no atomics in the sums. */
#define FUSED_THREADS 1024

static size_t g_fused_max = CT_SOFTMAX_LOSS_FUSED_MAX;

extern "C" void ct_softmax_loss_set_fused_max(size_t values) { g_fused_max = values; }

extern "C" bool ct_softmax_loss_fused_fits(size_t outer, int C, size_t inner) {
  const size_t positions = outer * inner;
  return positions > 0 && C > 0 && positions * (size_t)C <= g_fused_max &&
         positions * (size_t)C <= 0x7fffffffu;
}

static __device__ __forceinline__ float group_max(float v, int G) {
  for (int o = G / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

static __device__ __forceinline__ float group_sum(float v, int G) {
  for (int o = G / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__global__ static void __launch_bounds__(FUSED_THREADS)
    softmax_loss_fused(unsigned positions, int C, unsigned inner, int G, const float *x,
                       const float *label, bool has_ignore, int ignore_label, int norm,
                       size_t outer, float *prob, float *prob_top, float *loss_top,
                       float *inv_norm, unsigned *check_word, unsigned check_id) {
  const int lane = (int)threadIdx.x & (G - 1);
  const unsigned group = threadIdx.x / (unsigned)G, groups = blockDim.x / (unsigned)G;
  const unsigned rounds = (positions + groups - 1) / groups;
  double loss = 0.0;
  unsigned valid = 0, bad = 0;
  for (unsigned r = 0; r < rounds; r++) {
    const unsigned p = r * groups + group;
    const bool active = p < positions;
    /* position p = (i, k) of the (outer, inner) grid; class c of it sits at
     * base + c * inner in the (outer, C, inner) arrays */
    const size_t base = active ? (size_t)(p / inner) * C * inner + p % inner : 0;
    float m = -INFINITY;
    if (active)
      for (int c = lane; c < C; c += G) m = fmaxf(m, x[base + (size_t)c * inner]);
    m = group_max(m, G);
    float sum = 0.0f;
    if (active)
      for (int c = lane; c < C; c += G) sum += expf(x[base + (size_t)c * inner] - m);
    sum = group_sum(sum, G);
    if (!active) continue; /* no shuffles below */
    int y = -1;
    const int role = ct_label_classify(label[p], C, has_ignore, ignore_label, &y);
    for (int c = lane; c < C; c += G) {
      const size_t j = base + (size_t)c * inner;
      const float q = expf(x[j] - m) / sum;
      prob[j] = q;
      if (prob_top) prob_top[j] = q;
      if (role == 1 && c == y) loss -= logf(fmaxf(q, FLT_MIN));
    }
    if (lane == 0) {
      valid += role == 1;
      bad += role == -1;
    }
  }
  const double total = ct_block_sum(loss);
  const double nvalid = ct_block_sum((double)valid);
  const double nbad = ct_block_sum((double)bad);
  if (threadIdx.x != 0) return;
  const double normalizer = ct_loss_normalizer_value(norm, outer, (size_t)inner, (long)nvalid);
  loss_top[0] = (float)(total / normalizer);
  inv_norm[0] = (float)(1.0 / normalizer);
  if (nbad > 0 && check_id) atomicCAS(check_word, 0u, check_id);
}

extern "C" void ct_softmax_loss_fused_forward_gpu(ct_context *ctx, size_t outer, int C,
                                                  size_t inner, const float *x,
                                                  const float *label, bool has_ignore,
                                                  int ignore_label, int norm, float *prob,
                                                  float *prob_top, float *loss_top,
                                                  float *inv_norm, unsigned check_id) {
  CT_ASSERTF(ct_softmax_loss_fused_fits(outer, C, inner),
             "the one-kernel softmax loss cannot take %zu x %d x %zu values", outer, C, inner);
  const size_t positions = outer * inner;
  /* lanes per position: as many as fill the block, at most 32 and no more
   * than the classes need */
  int G = 1;
  while (G < 32 && G < C && (size_t)(2 * G) * positions <= FUSED_THREADS) G *= 2;
  size_t threads = (positions * (size_t)G + 31) / 32 * 32;
  if (threads > FUSED_THREADS) threads = FUSED_THREADS;
  softmax_loss_fused<<<1, (unsigned)threads, 0, (cudaStream_t)ctx->stream>>>(
      (unsigned)positions, C, (unsigned)inner, G, x, label, has_ignore, ignore_label, norm, outer,
      prob, prob_top, loss_top, inv_norm, ctx->check_word, check_id);
  CT_CUDA_LAUNCH_CHECK();
}
