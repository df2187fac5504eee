/* Per-channel work on typed tensors: see channel_typed.h. */
#include <stdint.h>

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
    float v = a ? ct_ld(x[i]) * a[c] : ct_ld(x[i]);
    if (b) v += b[c];
    if (relu) v = fmaxf(v, 0.0f);
    if (gate && !(ct_ld(gate[i]) > 0.0f)) v = 0.0f;
    y[i] = ct_st<T>(v);
  }
}

/* V values (16 bytes) a thread: the channel-innermost order (NHWC, or S = 1)
 * with C a multiple of V, or NCHW with S a multiple of V (a vector then
 * lies in one plane).  nv: vectors in the tensor (fewer than 2^32). */
template <typename T, bool INNER>
__global__ static void affine_vec_k(unsigned nv, unsigned C, unsigned S, const T *x,
                                    const float *a, const float *b, bool relu, const T *gate,
                                    T *y) {
  constexpr unsigned V = 16 / sizeof(T);
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += blockDim.x * gridDim.x) {
    const unsigned c0 = INNER ? i * V % C : i * V / S % C;
    uint4 rx = reinterpret_cast<const uint4 *>(x)[i], rg = {0, 0, 0, 0};
    if (gate) rg = reinterpret_cast<const uint4 *>(gate)[i];
    const T *ex = reinterpret_cast<const T *>(&rx), *eg = reinterpret_cast<const T *>(&rg);
    uint4 ry;
    T *ey = reinterpret_cast<T *>(&ry);
#pragma unroll
    for (unsigned j = 0; j < V; j++) {
      const unsigned c = INNER ? c0 + j : c0;
      float v = a ? ct_ld(ex[j]) * a[c] : ct_ld(ex[j]);
      if (b) v += b[c];
      if (relu) v = fmaxf(v, 0.0f);
      if (gate && !(ct_ld(eg[j]) > 0.0f)) v = 0.0f;
      ey[j] = ct_st<T>(v);
    }
    reinterpret_cast<uint4 *>(y)[i] = ry;
  }
}

/* NCHW: block (c, split) sums the split's share of channel c's N S values
 * (consecutive threads read consecutive values of a plane), reduced in
 * shared memory into partial[2][SPLITS][C] as sums_k does. */
template <typename T>
__global__ static void sums_nchw_k(ct_channel_geom g, const T *dy, const T *x, const T *gate,
                                   bool want_dot, const float *a, T *dx, float *partial) {
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
    if (dx) dx[i] = ct_st<T>(a ? a[c] * v : v);
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
                              bool want_dot, const float *a, T *dx, float *partial) {
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
      if (dx) dx[i] = ct_st<T>(a ? a[c] * v : v);
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

/* The channel-innermost order with C a multiple of V (16 bytes a thread):
 * block (channel tile, split) of VEC_THREADS threads, blockDim.x vectors of
 * channels by blockDim.y rows, so that a warp reads whole rows when C is
 * small (C = 64: 8 vectors, 4 rows a warp); each thread keeps V sums of each
 * kind, reduced over the block's rows in shared memory into partial. */
#define VEC_THREADS 256
template <typename T>
__global__ static void sums_vec_k(ct_channel_geom g, const T *dy, const T *x, const T *gate,
                                  bool want_dot, const float *a, T *dx, float *partial) {
  constexpr unsigned V = 16 / sizeof(T);
  __shared__ float sd[VEC_THREADS * V], ss[VEC_THREADS * V];
  const unsigned CV = (unsigned)(g.C / V), cv = blockIdx.x * blockDim.x + threadIdx.x;
  const size_t rows = g.N * g.S;
  const size_t per = (rows + gridDim.y - 1) / gridDim.y;
  const size_t r0 = blockIdx.y * per, r1 = min(rows, r0 + per);
  float d[V], s[V], av[V];
#pragma unroll
  for (unsigned j = 0; j < V; j++)
    d[j] = s[j] = 0.0f, av[j] = !dx || cv >= CV ? 0.0f : a ? a[cv * V + j] : 1.0f;
  if (cv < CV)
    for (size_t r = r0 + threadIdx.y; r < r1; r += blockDim.y) {
      const size_t i = r * CV + cv;
      uint4 rdy = reinterpret_cast<const uint4 *>(dy)[i], rg = {0, 0, 0, 0}, rx = {0, 0, 0, 0}, rdx;
      if (gate) rg = reinterpret_cast<const uint4 *>(gate)[i];
      if (want_dot) rx = reinterpret_cast<const uint4 *>(x)[i];
      const T *edy = reinterpret_cast<const T *>(&rdy), *eg = reinterpret_cast<const T *>(&rg),
              *ex = reinterpret_cast<const T *>(&rx);
      T *edx = reinterpret_cast<T *>(&rdx);
#pragma unroll
      for (unsigned j = 0; j < V; j++) {
        const float v = gate && !(ct_ld(eg[j]) > 0.0f) ? 0.0f : ct_ld(edy[j]);
        s[j] += v;
        d[j] += v * ct_ld(ex[j]);
        edx[j] = ct_st<T>(av[j] * v);
      }
      if (dx) reinterpret_cast<uint4 *>(dx)[i] = rdx;
    }
  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
#pragma unroll
  for (unsigned j = 0; j < V; j++) sd[t * V + j] = d[j], ss[t * V + j] = s[j];
  __syncthreads();
  if (threadIdx.y != 0 || cv >= CV) return;
  for (unsigned y = 1; y < blockDim.y; y++)
#pragma unroll
    for (unsigned j = 0; j < V; j++) {
      d[j] += sd[(y * blockDim.x + threadIdx.x) * V + j];
      s[j] += ss[(y * blockDim.x + threadIdx.x) * V + j];
    }
#pragma unroll
  for (unsigned j = 0; j < V; j++) {
    partial[(size_t)blockIdx.y * g.C + cv * V + j] = d[j];
    partial[((size_t)gridDim.y + blockIdx.y) * g.C + cv * V + j] = s[j];
  }
}

/* The splits' partial sums added per channel: block (x, y) of FINISH_COLS
 * channels by FINISH_ROWS groups of splits, thread (x, y) adding splits y,
 * y + FINISH_ROWS, ... of channel x (a warp reads neighbouring channels),
 * then thread (x, 0) the groups in order: the same bits on every run.  (A
 * thread per channel walking every split serially was a chain of 1,512
 * dependent loads for SqueezeNet's 16-channel squeeze layers at batch 64.) */
#define FINISH_COLS 32
#define FINISH_ROWS 32
__global__ static void finish_k(size_t C, unsigned splits, const float *partial, bool accumulate,
                                float *dot, float *sum) {
  __shared__ float sd[FINISH_ROWS][FINISH_COLS + 1], ss[FINISH_ROWS][FINISH_COLS + 1];
  const size_t c = (size_t)blockIdx.x * FINISH_COLS + threadIdx.x;
  float d = 0.0f, s = 0.0f;
  if (c < C) {
#pragma unroll 4
    for (unsigned k = threadIdx.y; k < splits; k += FINISH_ROWS) {
      d += partial[(size_t)k * C + c];
      s += partial[((size_t)splits + k) * C + c];
    }
  }
  sd[threadIdx.y][threadIdx.x] = d;
  ss[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || c >= C) return;
  for (int k = 1; k < FINISH_ROWS; k++) {
    d += sd[k][threadIdx.x];
    s += ss[k][threadIdx.x];
  }
  if (dot) dot[c] = accumulate ? dot[c] + d : d;
  if (sum) sum[c] = accumulate ? sum[c] + s : s;
}

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* Whether a tensor of geometry g can go V values (16 bytes) at a time: the
 * channel-innermost order with C a multiple of V (inner), or NCHW with S a
 * multiple of V; every pointer 16-byte aligned (NULL counts as aligned). */
template <typename T>
static bool vectors_fit(const ct_channel_geom *g, bool *inner, const void *p0, const void *p1,
                        const void *p2, const void *p3) {
  const size_t V = 16 / sizeof(T);
  *inner = g->nhwc || g->S == 1;
  if (*inner ? g->C % V : g->S % V) return false;
  if (g->N * g->C * g->S / V >= 0xffffffffu || g->C * g->S >= 0xffffffffu) return false;
  return aligned16(p0) && aligned16(p1) && aligned16(p2) && aligned16(p3);
}

template <typename T>
static void affine_t(ct_context *ctx, size_t n, const ct_channel_geom *g, const T *x,
                     const float *a, const float *b, bool relu, const T *gate, T *y) {
  cudaStream_t st = (cudaStream_t)ctx->stream;
  bool inner;
  if (vectors_fit<T>(g, &inner, x, gate, y, NULL)) {
    const unsigned nv = (unsigned)(n / (16 / sizeof(T)));
    if (inner)
      affine_vec_k<T, true><<<ct_cuda_blocks(nv), CT_CUDA_THREADS, 0, st>>>(
          nv, (unsigned)g->C, (unsigned)g->S, x, a, b, relu, gate, y);
    else
      affine_vec_k<T, false><<<ct_cuda_blocks(nv), CT_CUDA_THREADS, 0, st>>>(
          nv, (unsigned)g->C, (unsigned)g->S, x, a, b, relu, gate, y);
  } else if (n < 0x7fffffffu) {
    affine_k<T, unsigned><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>((unsigned)n, *g, x, a, b,
                                                                         relu, gate, y);
  } else {
    affine_k<T, size_t><<<ct_cuda_blocks(n), CT_CUDA_THREADS, 0, st>>>(n, *g, x, a, b, relu, gate,
                                                                       y);
  }
}

static unsigned splits_for(size_t C) {
  const size_t s = SPLIT_CELLS / (C ? C : 1);
  return s < SPLITS ? SPLITS : s > MAX_SPLITS ? MAX_SPLITS : (unsigned)s;
}

/* Row splits for rows rows read `lanes` rows at a time by a block. */
static unsigned splits_of(size_t C, size_t rows, unsigned lanes) {
  const unsigned most = splits_for(C);
  return rows >= (size_t)most * lanes ? most : rows >= lanes ? (unsigned)(rows / lanes) : 1;
}

/* Launches the sums kernel that fits g; returns its row splits. */
template <typename T>
static unsigned sums_t(cudaStream_t st, const ct_channel_geom *g, const T *dy, const T *x,
                       const T *gate, bool want_dot, const float *a, T *dx, float *scratch) {
  const size_t rows = g->N * g->S;
  bool inner;
  if (vectors_fit<T>(g, &inner, dy, want_dot ? x : NULL, gate, dx) && inner) {
    const unsigned CV = (unsigned)(g->C / (16 / sizeof(T)));
    const unsigned bx = CV < 32 ? CV : 32, by = VEC_THREADS / bx;
    const unsigned splits = splits_of(g->C, rows, by);
    sums_vec_k<<<dim3((CV + bx - 1) / bx, splits), dim3(bx, by), 0, st>>>(*g, dy, x, gate,
                                                                          want_dot, a, dx, scratch);
    return splits;
  }
  if (!g->nhwc && g->S > 1 && g->C <= 0x7fffffffu) {
    const unsigned splits = splits_of(g->C, rows, ROWS);
    sums_nchw_k<<<dim3((unsigned)g->C, splits), 256, 0, st>>>(*g, dy, x, gate, want_dot, a, dx,
                                                              scratch);
    return splits;
  }
  const unsigned splits = splits_of(g->C, rows, ROWS);
  const dim3 grid((unsigned)((g->C + COLS - 1) / COLS), splits), block(COLS, ROWS);
  sums_k<<<grid, block, 0, st>>>(*g, dy, x, gate, want_dot, a, dx, scratch);
  return splits;
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

extern "C" size_t ct_channel_sums_scratch(size_t C) { return 2 * (size_t)splits_for(C) * C; }

extern "C" void ct_channel_sums_gpu(ct_context *ctx, const ct_channel_geom *g, const void *dy,
                                    const void *x, const void *gate, float *scratch,
                                    bool accumulate, float *dot, float *sum, const float *a,
                                    void *dx) {
  if (!g->C) return;
  if (!dot && !sum) {
    if (dx) ct_channel_affine_gpu(ctx, g, dy, a, NULL, false, gate, dx);
    return;
  }
  cudaStream_t st = (cudaStream_t)ctx->stream;
  CT_ASSERTF((g->C + COLS - 1) / COLS <= 0x7fffffffu, "%zu channels", g->C);
  unsigned splits;
  switch (g->type) {
    case CT_BF16:
      splits = sums_t(st, g, (const __nv_bfloat16 *)dy, (const __nv_bfloat16 *)x,
                      (const __nv_bfloat16 *)gate, dot != NULL, a, (__nv_bfloat16 *)dx, scratch);
      break;
    case CT_F16:
      splits = sums_t(st, g, (const __half *)dy, (const __half *)x, (const __half *)gate,
                      dot != NULL, a, (__half *)dx, scratch);
      break;
    default:
      splits = sums_t(st, g, (const float *)dy, (const float *)x, (const float *)gate, dot != NULL,
                      a, (float *)dx, scratch);
  }
  CT_CUDA_LAUNCH_CHECK();
  finish_k<<<(unsigned)((g->C + FINISH_COLS - 1) / FINISH_COLS), dim3(FINISH_COLS, FINISH_ROWS), 0,
             st>>>(g->C, splits, scratch, accumulate, dot, sum);
  CT_CUDA_LAUNCH_CHECK();
}
