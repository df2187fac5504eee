/* The forward of 5x5 stride-1 convolutions with few input channels as a
 * direct sum in strict FP32 (cifar10_quick's conv1: 3 input channels, where
 * Winograd's transforms dominate and an implicit GEMM's reduction of
 * 3 x 25 = 75 is short), raced against cuDNN and the other kernels as
 * forward choices (IG_FDIRECT_CONFIGS in conv_igemm_impl.cuh).
 *
 *   y[n, m, oy, ox] = bias[m] + sum over c, ky, kx of
 *                     w[m, c, ky, kx] * x[n, c, oy + ky - ph, ox + kx - pw]
 *
 * A block takes RB output rows (at most FD_COLS columns) of one image and
 * 32 output channels.  It copies the RB + 4 input rows under them, every
 * input channel, zeros outside the image, and the 32 channels' filters
 * turned to [c][ky][kx][m] into shared memory, once.  A thread owns 8
 * output channels x 4 neighbouring columns of one row: 32 sums in
 * registers.  Per input channel and filter row it reads the 8 input values
 * under its columns (two 16-byte reads), then per filter column the 8
 * channels' weights (two 16-byte reads, one address for all the lanes of a
 * channel group: broadcasts) and runs 32 FMAs, 160 per 12 reads.  The
 * lanes of a warp take 8 column groups x 4 rows (x 2 channel groups when
 * RB is 2), so that its 16-byte input reads fill the banks evenly.  Each
 * output is one thread's sum in a fixed order: deterministic.
 *
 * tests/emu/fdirect-emu.sh compiles the kernel on the host
 * (FD_HOST_EMULATION) and runs it, thread by thread, against a double
 * reference. */
#ifndef FD_HOST_EMULATION
#include <stdint.h>

#include "gpu/gpu.h"
#include "layers/conv/conv_igemm.h"
#include "layers/conv/conv_igemm_impl.cuh"
#define FD_LDG(p) __ldg(p)
#define FD_SMEM_DECL extern __shared__ __align__(16) float fd_smem[]
#define FD_ST4(p, v) (*(float4 *)(p) = (v))
#endif

/* Output columns per block row (8 groups of 4), and the width of an input
 * row in shared memory (the columns and the filter's 4 more). */
#define FD_COLS 32
#define FD_PS (FD_COLS + 4)

typedef struct fd_args {
  const float *x, *w, *bias;
  float *y;
  int cin, H, W, cout, OH, OW, ph, pw;
  int relu;
} fd_args;

/* Floats of shared memory of a block of RB rows for cin input channels. */
__host__ __device__ inline int fd_smem_floats(int rb, int cin) {
  return cin * (rb + 4) * FD_PS + cin * 25 * 32;
}

template <int RB>
__global__ void __launch_bounds__(32 * RB, 1024 / (32 * RB)) fd_conv_kernel(fd_args a) {
  constexpr int T = 32 * RB, ROWS = RB + 4;
  FD_SMEM_DECL;
  float *xs = fd_smem;                             /* [c][ROWS][FD_PS] */
  float *ws = fd_smem + a.cin * ROWS * FD_PS;      /* [c * 25 + tap][32] */
  const unsigned tid = threadIdx.x;
  const int per_img = (a.OH + RB - 1) / RB;
  const int img = blockIdx.x / per_img, oy0 = (blockIdx.x - img * per_img) * RB;
  const int m0 = blockIdx.y * 32;

  /* the input rows under the block's (zeros outside the image) */
  for (unsigned e = tid; e < (unsigned)(a.cin * ROWS * FD_PS); e += T) {
    const int px = e % FD_PS, row = (e / FD_PS) % ROWS, c = e / (FD_PS * ROWS);
    const int iy = oy0 - a.ph + row, ix = px - a.pw;
    float v = 0.0f;
    if ((unsigned)iy < (unsigned)a.H && (unsigned)ix < (unsigned)a.W)
      v = FD_LDG(a.x + (((size_t)img * a.cin + c) * a.H + iy) * a.W + ix);
    xs[e] = v;
  }
  /* the block's 32 channels' filters as [c][tap][m] (zeros past cout) */
  for (unsigned e = tid; e < (unsigned)(a.cin * 25 * 32); e += T) {
    const int m = e % 32, t = e / 32, co = m0 + m;
    ws[e] = co < a.cout ? FD_LDG(a.w + (size_t)co * a.cin * 25 + t) : 0.0f;
  }
  __syncthreads();

  const int xg = tid % 8, r = (tid / 8) % RB, mg = tid / (8 * RB);
  float acc[8][4];
#pragma unroll
  for (int i = 0; i < 8; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  for (int c = 0; c < a.cin; c++) {
#pragma unroll
    for (int ky = 0; ky < 5; ky++) {
      const float *xr = xs + (c * ROWS + r + ky) * FD_PS + 4 * xg;
      float xv[8];
      const float4 x0 = *(const float4 *)xr, x1 = *(const float4 *)(xr + 4);
      xv[0] = x0.x, xv[1] = x0.y, xv[2] = x0.z, xv[3] = x0.w;
      xv[4] = x1.x, xv[5] = x1.y, xv[6] = x1.z, xv[7] = x1.w;
      const float *wr = ws + (c * 25 + ky * 5) * 32 + 8 * mg;
#pragma unroll
      for (int kx = 0; kx < 5; kx++) {
        const float4 w0 = *(const float4 *)(wr + kx * 32), w1 = *(const float4 *)(wr + kx * 32 + 4);
        const float wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
          for (int j = 0; j < 4; j++) acc[i][j] = fmaf(wv[i], xv[j + kx], acc[i][j]);
      }
    }
  }

  const int oy = oy0 + r, ox0 = 4 * xg;
  if (oy >= a.OH || ox0 >= a.OW) return;
  /* rows of whole 16-byte words (a top that is a view may start anywhere):
   * four columns at once */
  const bool whole = a.OW % 4 == 0 && (uintptr_t)a.y % 16 == 0;
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const int co = m0 + 8 * mg + i;
    if (co >= a.cout) break;
    const float b = a.bias ? FD_LDG(a.bias + co) : 0.0f;
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
      v[j] = acc[i][j] + b;
      if (a.relu) v[j] = fmaxf(v[j], 0.0f);
    }
    float *dst = a.y + (((size_t)img * a.cout + co) * a.OH + oy) * a.OW + ox0;
    if (whole) {
      FD_ST4(dst, make_float4(v[0], v[1], v[2], v[3]));
    } else {
#pragma unroll
      for (int j = 0; j < 4; j++)
        if (ox0 + j < a.OW) dst[j] = v[j];
    }
  }
}

#ifndef FD_HOST_EMULATION
/* ---------------------------------------------------------------- launchers */

template <int RB>
static void launch(cudaStream_t st, const fd_args &a, int n) {
  dim3 grid((unsigned)(n * ((a.OH + RB - 1) / RB)), (unsigned)((a.cout + 31) / 32));
  fd_conv_kernel<RB><<<grid, 32 * RB, fd_smem_floats(RB, a.cin) * sizeof(float), st>>>(a);
  CT_CUDA_LAUNCH_CHECK();
}

typedef void (*fd_launcher)(cudaStream_t, const fd_args &, int);
#define FD_LAUNCHER(RB) launch<RB>,
static const fd_launcher k_launchers[] = {IG_FDIRECT_CONFIGS(FD_LAUNCHER)};
#undef FD_LAUNCHER

const char *ig_fdirect_unsupported(const ct_igemm_geom *g, ct_igemm_dir dir) {
  if (dir != CT_IGEMM_FWD) return "direct forward: forward only";
  if (g->kh != 5 || g->kw != 5) return "direct forward: 5x5 filters only";
  if (g->sh != 1 || g->sw != 1 || g->dh != 1 || g->dw != 1)
    return "direct forward: stride 1 and dilation 1 only";
  if (g->c > IG_FDIRECT_MAX_CHANNELS) return "direct forward: at most 4 input channels";
  if (g->ow > FD_COLS) return "direct forward: rows of at most 32 outputs";
  return NULL;
}

void ig_fdirect_forward(int index, cudaStream_t st, const ct_igemm_geom *g, const float *x,
                        const float *w, const float *bias, bool relu, float *y) {
  const fd_launcher launch = ig_launcher_at(k_launchers, index, "direct forward");
  CT_ASSERT(!ig_fdirect_unsupported(g, CT_IGEMM_FWD));
  const fd_args a = {x, w, bias, y, g->c, g->h, g->w, g->m, g->oh, g->ow, g->ph, g->pw,
                     relu ? 1 : 0};
  launch(st, a, g->n);
}
#endif
