/* Per-channel work on typed tensors: see channel_typed.h. */
#include "gpu/gpu.h"
#include "layers/channel_typed.h"
#include "math/typed.cuh"

/* Row splits of the sums: each writes its partial sums of every channel.
 * At least SPLITS, more for fewer channels (so that a layer of 64 channels
 * over a large batch still fills the GPU: it had 128 blocks): about
 * SPLIT_CELLS / C, at most MAX_SPLITS. */
#define SPLITS 64
#define SPLIT_CELLS 131072
#define MAX_SPLITS 4096
#define COLS 32
#define ROWS 8

/* I: the index type, unsigned when the tensor has fewer than 2^31 values
 * (64-bit division and remainder cost a GPU dozens of instructions). */
template <typename T, typename I>
__global__ static void affine_k(I n, ct_channel_geom g, const T *x, const float *a,
                                const float *b, bool relu, const T *gate, T *y) {
  const I C = (I)g.C, S = (I)g.S;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (I)blockDim.x * gridDim.x) {
    const I c = g.nhwc ? i % C : i / S % C;
    float v = ct_ld(x[i]) * a[c];
    if (b) v += b[c];
    if (relu) v = fmaxf(v, 0.0f);
    if (gate && !(ct_ld(gate[i]) > 0.0f)) v = 0.0f;
    y[i] = ct_st<T>(v);
  }
}

/* NCHW: block (c, split) sums the split's share of channel c's N S values
 * (consecutive threads read consecutive values of a plane), reduced in
 * shared memory into partial[2][SPLITS][C] as sums_k does. */
template <typename T>
__global__ static void sums_nchw_k(ct_channel_geom g, const T *dy, const T *x, const T *gate,
                                   bool want_dot, float *partial) {
  __shared__ float sd[256], ss[256];
  const unsigned c = blockIdx.x, S = (unsigned)g.S;
  const size_t rows = g.N * g.S;
  const size_t per = (rows + gridDim.y - 1) / gridDim.y;
  const size_t r0 = blockIdx.y * per, r1 = min(rows, r0 + per);
  float d = 0.0f, s = 0.0f;
  for (size_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
    const unsigned n = (unsigned)(r / S), k = (unsigned)(r - (size_t)n * S);
    const size_t i = ((size_t)n * g.C + c) * S + k;
    const float v = gate && !(ct_ld(gate[i]) > 0.0f) ? 0.0f : ct_ld(dy[i]);
    s += v;
    if (want_dot) d += v * ct_ld(x[i]);
  }
  sd[threadIdx.x] = d;
  ss[threadIdx.x] = s;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) {
      sd[threadIdx.x] += sd[threadIdx.x + w];
      ss[threadIdx.x] += ss[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[(size_t)blockIdx.y * g.C + c] = sd[0];
    partial[((size_t)gridDim.y + blockIdx.y) * g.C + c] = ss[0];
  }
}

/* NHWC: split blockIdx.y of the N S rows of C, COLS channels per block
 * along x: partial[2][SPLITS][C]. */
template <typename T>
__global__ static void sums_k(ct_channel_geom g, const T *dy, const T *x, const T *gate,
                              bool want_dot, float *partial) {
  __shared__ float sd[ROWS][COLS + 1], ss[ROWS][COLS + 1];
  const size_t c = (size_t)blockIdx.x * COLS + threadIdx.x;
  const size_t rows = g.N * g.S;
  const size_t per = (rows + gridDim.y - 1) / gridDim.y;
  const size_t r0 = blockIdx.y * per, r1 = min(rows, r0 + per);
  float d = 0.0f, s = 0.0f;
  if (c < g.C)
    for (size_t r = r0 + threadIdx.y; r < r1; r += ROWS) {
      const size_t i = g.nhwc ? r * g.C + c : (r / g.S * g.C + c) * g.S + r % g.S;
      const float v = gate && !(ct_ld(gate[i]) > 0.0f) ? 0.0f : ct_ld(dy[i]);
      s += v;
      if (want_dot) d += v * ct_ld(x[i]);
    }
  sd[threadIdx.y][threadIdx.x] = d;
  ss[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < g.C) {
    for (int k = 1; k < ROWS; k++) {
      d += sd[k][threadIdx.x];
      s += ss[k][threadIdx.x];
    }
    partial[(size_t)blockIdx.y * g.C + c] = d;
    partial[((size_t)gridDim.y + blockIdx.y) * g.C + c] = s;
  }
}

__global__ static void finish_k(size_t C, unsigned splits, const float *partial, bool accumulate,
                                float *dot, float *sum) {
  const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float d = 0.0f, s = 0.0f;
  for (unsigned k = 0; k < splits; k++) {
    d += partial[(size_t)k * C + c];
    s += partial[((size_t)splits + k) * C + c];
  }
  if (dot) dot[c] = accumulate ? dot[c] + d : d;
  if (sum) sum[c] = accumulate ? sum[c] + s : s;
}

template <typename T>
static void affine_t(ct_context *ctx, size_t n, const ct_channel_geom *g, const T *x,
                     const float *a, const float *b, bool relu, const T *gate, T *y) {
  cudaStream_t st = (cudaStream_t)ctx->stream;
  if (n < 0x7fffffffu)
    affine_k<T, unsigned><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>((unsigned)n, *g, x, a, b,
                                                                         relu, gate, y);
  else
    affine_k<T, size_t><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(n, *g, x, a, b, relu, gate,
                                                                       y);
}

template <typename T>
static void sums_t(cudaStream_t st, const ct_channel_geom *g, unsigned splits, const T *dy,
                   const T *x, const T *gate, bool want_dot, float *scratch) {
  if (!g->nhwc && g->S > 1 && g->C <= 0x7fffffffu) {
    sums_nchw_k<<<dim3((unsigned)g->C, splits), 256, 0, st>>>(*g, dy, x, gate, want_dot, scratch);
    return;
  }
  const dim3 grid((unsigned)((g->C + COLS - 1) / COLS), splits), block(COLS, ROWS);
  sums_k<<<grid, block, 0, st>>>(*g, dy, x, gate, want_dot, scratch);
}

extern "C" void ct_channel_affine_gpu(ct_context *ctx, const ct_channel_geom *g, const void *x,
                                      const float *a, const float *b, bool relu, const void *gate,
                                      void *y) {
  const size_t n = g->N * g->C * g->S;
  if (!n) return;
  switch (g->type) {
    case CT_BF16:
      affine_t(ctx, n, g, (const __nv_bfloat16 *)x, a, b, relu, (const __nv_bfloat16 *)gate,
               (__nv_bfloat16 *)y);
      break;
    case CT_F16:
      affine_t(ctx, n, g, (const __half *)x, a, b, relu, (const __half *)gate, (__half *)y);
      break;
    default: affine_t(ctx, n, g, (const float *)x, a, b, relu, (const float *)gate, (float *)y);
  }
  CT_CUDA_LAUNCH_CHECK();
}

static unsigned splits_for(size_t C) {
  const size_t s = SPLIT_CELLS / (C ? C : 1);
  return s < SPLITS ? SPLITS : s > MAX_SPLITS ? MAX_SPLITS : (unsigned)s;
}

extern "C" size_t ct_channel_sums_scratch(size_t C) { return 2 * (size_t)splits_for(C) * C; }

extern "C" void ct_channel_sums_gpu(ct_context *ctx, const ct_channel_geom *g, const void *dy,
                                    const void *x, const void *gate, float *scratch,
                                    bool accumulate, float *dot, float *sum) {
  if (!g->C || (!dot && !sum)) return;
  cudaStream_t st = (cudaStream_t)ctx->stream;
  const size_t rows = g->N * g->S;
  const unsigned most = splits_for(g->C);
  const unsigned splits = rows >= (size_t)most * ROWS ? most : rows >= ROWS ? (unsigned)(rows / ROWS) : 1;
  CT_ASSERTF((g->C + COLS - 1) / COLS <= 0x7fffffffu, "%zu channels", g->C);
  switch (g->type) {
    case CT_BF16:
      sums_t(st, g, splits, (const __nv_bfloat16 *)dy, (const __nv_bfloat16 *)x,
             (const __nv_bfloat16 *)gate, dot != NULL, scratch);
      break;
    case CT_F16:
      sums_t(st, g, splits, (const __half *)dy, (const __half *)x, (const __half *)gate,
             dot != NULL, scratch);
      break;
    default:
      sums_t(st, g, splits, (const float *)dy, (const float *)x, (const float *)gate, dot != NULL,
             scratch);
  }
  CT_CUDA_LAUNCH_CHECK();
  finish_k<<<(unsigned)((g->C + 255) / 256), 256, 0, st>>>(g->C, splits, scratch, accumulate, dot,
                                                          sum);
  CT_CUDA_LAUNCH_CHECK();
}
