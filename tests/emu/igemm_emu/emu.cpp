// Host emulator of the TF32 implicit-GEMM kernels (src/layers/
// conv_igemm_tf32.cu) and the filter gradient's split sum (conv_igemm.cu),
// for checking their index arithmetic without a GPU (tests/emu/igemm-emu.sh
// builds and runs it).  The kernels' own source runs here on the fibers of
// tests/emu/fibers.h: all of a block's threads advance in rounds from one
// sync point to the next (__syncthreads, and every mma, whose warp
// exchange needs the 32 lanes' fragments); mma
// follows the PTX ISA's m16n8k8 .tf32 fragment layouts, cvt.rna rounds to
// TF32; cp.async copies land either at issue or as late as the waits allow
// (both orders are run); every global read is checked against the
// registered buffers, every shared write against the pipeline's size, and
// outputs carry guard zones.  Results are compared with a double reference
// at TF32's tolerance.  Rounds cannot show a race between warps that a
// missing __syncthreads would cause on a GPU.
#include <cuda_runtime.h>

/* the TF32 kernels' frames need more than the default stack */
#define FIBER_STACK_BYTES (128 * 1024)
#include "../fibers.h"

#undef __shared__
using std::min;

template <typename T>
static T __ldg(const T *p) {
  check_read(p, sizeof(T));
  return *p;
}
/* extract.py's stand-in for the kernels' dynamic shared memory */
#define emu_smem (g_smem.data())

static void yield_() { swapcontext(&g_cur->ctx, &g_sched); }

static uint32_t ig_tf32(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  return u;
}
static float f_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* mma's warp exchange: each lane posts its fragments, yields until the
 * whole block has, computes its outputs from its warp's, and yields again
 * before anyone posts the next */
struct Slot {
  uint32_t a[4], b[2];
};
static Slot g_slots[64][32];
static void ig_mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const int tid = g_cur->tidx.x, w = tid / 32, lane = tid % 32;
  memcpy(g_slots[w][lane].a, a, sizeof a);
  memcpy(g_slots[w][lane].b, b, sizeof b);
  yield_();
  const int gid = lane >> 2, tig = lane & 3;
  for (int q = 0; q < 4; q++) {
    const int row = gid + (q >= 2 ? 8 : 0), col = 2 * tig + (q & 1);
    float s = d[q];
    for (int k = 0; k < 8; k++) {
      const float av =
          f_of(g_slots[w][(row % 8) * 4 + k % 4].a[(row >= 8 ? 1 : 0) + (k >= 4 ? 2 : 0)]);
      const float bv = f_of(g_slots[w][col * 4 + k % 4].b[k >= 4 ? 1 : 0]);
      s += av * bv;
    }
    d[q] = s;
  }
  yield_();
}

#define IG_HOST_EMULATION
#include "layers/conv/conv_igemm_impl.cuh"
#include "body.inc"
#include "sum.inc"

// ---------------------------------------------------------------- reference and checks

struct Geom {
  int n, c, h, w, m, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};
static Geom geom(int n, int c, int h, int w, int m, int kh, int kw, int sh, int sw, int ph, int pw,
                 int dh, int dw) {
  return {n,
          c,
          h,
          w,
          m,
          (h + 2 * ph - (dh * (kh - 1) + 1)) / sh + 1,
          (w + 2 * pw - (dw * (kw - 1) + 1)) / sw + 1,
          kh,
          kw,
          sh,
          sw,
          ph,
          pw,
          dh,
          dw};
}

static std::vector<int4> table(const Geom &g, bool bwd) {
  const int KK = g.kh * g.kw, K = bwd ? g.m * KK : g.c * KK;
  std::vector<int4> t((K + IG_TABLE_STEP - 1) / IG_TABLE_STEP * IG_TABLE_STEP,
                      make_int4(0, 0, IG_FAR, IG_FAR));
  if (!bwd) {
    for (int ci = 0; ci < g.c; ci++)
      for (int ky = 0; ky < g.kh; ky++)
        for (int kx = 0; kx < g.kw; kx++) {
          const int k = ci * KK + ky * g.kw + kx;
          t[k] = make_int4(k, ci * g.h * g.w + ky * g.dh * g.w + kx * g.dw, ky * g.dh, kx * g.dw);
        }
  } else {
    for (int co = 0; co < g.m; co++)
      for (int ky = 0; ky < g.kh; ky++)
        for (int kx = 0; kx < g.kw; kx++) {
          const int k = co * KK + ky * g.kw + kx;
          t[k] = make_int4(co * g.c * KK + ky * g.kw + kx,
                           co * g.oh * g.ow - ky * g.dh * g.ow - kx * g.dw, -ky * g.dh, -kx * g.dw);
        }
  }
  return t;
}

static uint64_t rs = 88172645463325252ull;
static float urand() {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return (float)((rs >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static double err(const float *got, const std::vector<double> &want) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); i++) {
    if (std::isnan(got[i])) return INFINITY;
    worst = std::max(worst, std::fabs(got[i] - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return worst / std::max(scale, 1e-6);
}

static int g_fail = 0;
#define GUARD 64
struct Out {
  std::vector<float> v;
  size_t n;
  Out(size_t n_, float fill) : v(n_ + 2 * GUARD, 12345.0f), n(n_) {
    std::fill(v.begin() + GUARD, v.begin() + GUARD + n, fill);
  }
  float *p() { return v.data() + GUARD; }
  bool guards() {
    for (int i = 0; i < GUARD; i++)
      if (v[i] != 12345.0f || v[GUARD + n + i] != 12345.0f) return false;
    return true;
  }
};

static void report(const char *what, double e, bool guards) {
  const bool ok = e <= 3e-3 && guards;
  if (!ok) g_fail++;
  printf("%-60s err %.3g %s%s\n", what, e, guards ? "" : "GUARD BROKEN ", ok ? "ok" : "FAIL");
}

template <int BM, int BN, int WN, int S, int STAGES>
static void run_gemm_cfg(const char *name, const Geom &g, const std::vector<float> &x,
                         const std::vector<float> &w, const std::vector<float> &bias,
                         const std::vector<float> &dy, const std::vector<double> &yref,
                         const std::vector<double> &dxref) {
  using C = ig_tf32_shape<BM, BN, WN, S, STAGES>;
  const size_t smem =
      std::max((size_t)STAGES * (BM * C::SA + C::BK * (BN + 8)), (size_t)C::RED) * 4;
  char what[200];
  // forward with bias and relu
  {
    auto t = table(g, false);
    reg(t.data(), t.size() * sizeof(int4));
    const int K = g.c * g.kh * g.kw, N = g.n * g.oh * g.ow;
    ig_gather gg = {x.data(), g.c * g.h * g.w, g.h,  g.w, g.oh * g.ow, g.ow, g.oh, g.sh,
                    g.sw,     -g.ph,           -g.pw};
    Out y(yref.size(), NAN);
    const float *A = w.data();
    const int4 *tp = t.data();
    float *out = y.p();
    const float *bp = bias.data();
    run_grid(dim3((N + BN - 1) / BN, (g.m + BM - 1) / BM), C::T, smem / 4, [&] {
      ig_tf32_gemm_kernel<BM, BN, WN, S, STAGES>(A, K, tp, K, gg, N, g.m, out, bp, 1);
    });
    snprintf(what, sizeof what, "%s fwd %dx%dx%d wn%d st%d %s", name, BM, BN, S, WN, STAGES,
             g_eager ? "eager" : "late");
    report(what, err(y.p(), yref), y.guards());
  }
  if (g.sh == 1 && g.sw == 1) {
    auto t = table(g, true);
    reg(t.data(), t.size() * sizeof(int4));
    const int K = g.m * g.kh * g.kw, N = g.n * g.h * g.w;
    ig_gather gg = {dy.data(), g.m * g.oh * g.ow, g.oh, g.ow, g.h * g.w, g.w, g.h, 1, 1, g.ph,
                    g.pw};
    Out dx(dxref.size(), NAN);
    const float *A = w.data();
    const int4 *tp = t.data();
    float *out = dx.p();
    run_grid(dim3((N + BN - 1) / BN, (g.c + BM - 1) / BM), C::T, smem / 4, [&] {
      ig_tf32_gemm_kernel<BM, BN, WN, S, STAGES>(A, g.kh * g.kw, tp, K, gg, N, g.c, out, nullptr,
                                                 0);
    });
    snprintf(what, sizeof what, "%s bwd-data %dx%dx%d wn%d st%d %s", name, BM, BN, S, WN, STAGES,
             g_eager ? "eager" : "late");
    report(what, err(dx.p(), dxref), dx.guards());
  }
}

template <int BM, int BN, int WN, int S, int STAGES>
static void run_wgrad_cfg(const char *name, const Geom &g, const std::vector<float> &x,
                          const std::vector<float> &dy, const std::vector<float> &dw0,
                          const std::vector<double> &dwref, int chunk) {
  using C = ig_tf32_shape<BM, BN, WN, S, STAGES>;
  const size_t smem = std::max((size_t)STAGES * (BM + BN) * C::SA, (size_t)C::RED) * 4;
  auto t = table(g, false);
  reg(t.data(), t.size() * sizeof(int4));
  const int K = g.c * g.kh * g.kw, N = g.n * g.oh * g.ow, M = g.m;
  ig_gather gg = {x.data(), g.c * g.h * g.w, g.h,  g.w, g.oh * g.ow, g.ow, g.oh, g.sh,
                  g.sw,     -g.ph,           -g.pw};
  const int splits = (N + chunk - 1) / chunk;
  const bool direct = splits == 1;
  Out part(direct ? (size_t)M * K : (size_t)splits * M * K, NAN);
  if (direct) std::copy(dw0.begin(), dw0.end(), part.p());
  const int4 *tp = t.data();
  float *out = part.p();
  const float *dyp = dy.data();
  run_grid(dim3((K + BN - 1) / BN, (M + BM - 1) / BM, splits), C::T, smem / 4, [&] {
    ig_tf32_wgrad_kernel<BM, BN, WN, S, STAGES>(dyp, M, tp, K, gg, N, chunk, out, direct ? 1 : 0);
  });
  std::vector<float> dw(dw0);
  if (direct)
    std::copy(part.p(), part.p() + (size_t)M * K, dw.begin());
  else {
    const int MK = M * K;
    float *dwp = dw.data();
    const float *pp = part.p();
    reg(pp, (size_t)splits * MK * 4);
    run_grid(dim3((MK + 31) / 32), 32 * IG_SUM_LANES, 1,
             [&] { ig_wgrad_sum_kernel(MK, splits, pp, dwp); });
  }
  char what[200];
  snprintf(what, sizeof what, "%s wgrad %dx%dx%d wn%d st%d chunk %d (%d splits) %s", name, BM, BN,
           S, WN, STAGES, chunk, splits, g_eager ? "eager" : "late");
  report(what, err(dw.data(), dwref), part.guards());
}

static void run_case(const char *name, const Geom &g) {
  const size_t ny = (size_t)g.n * g.m * g.oh * g.ow, nx = (size_t)g.n * g.c * g.h * g.w,
               nw = (size_t)g.m * g.c * g.kh * g.kw;
  std::vector<float> x(nx), w(nw), bias(g.m), dy(ny), dw0(nw);
  for (auto &v : x) v = urand();
  for (auto &v : w) v = urand() * 0.5f;
  for (auto &v : bias) v = urand();
  for (auto &v : dy) v = urand();
  for (auto &v : dw0) v = urand();
  g_ranges.clear();
  reg(x.data(), nx * 4);
  reg(w.data(), nw * 4);
  reg(bias.data(), g.m * 4);
  reg(dy.data(), ny * 4);
  std::vector<double> y(ny), dx(nx), dw(nw);
  for (int i = 0; i < g.n; i++)
    for (int m = 0; m < g.m; m++)
      for (int oy = 0; oy < g.oh; oy++)
        for (int ox = 0; ox < g.ow; ox++)
          for (int c = 0; c < g.c; c++)
            for (int ky = 0; ky < g.kh; ky++)
              for (int kx = 0; kx < g.kw; kx++) {
                const int iy = oy * g.sh - g.ph + ky * g.dh, ix = ox * g.sw - g.pw + kx * g.dw;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                const size_t yi = (((size_t)i * g.m + m) * g.oh + oy) * g.ow + ox,
                             xi = (((size_t)i * g.c + c) * g.h + iy) * g.w + ix;
                const size_t wi = (((size_t)m * g.c + c) * g.kh + ky) * g.kw + kx;
                y[yi] += (double)w[wi] * x[xi];
                dx[xi] += (double)w[wi] * dy[yi];
                dw[wi] += (double)dy[yi] * x[xi];
              }
  std::vector<double> yref(ny);
  for (size_t k = 0; k < ny; k++) {
    double v = y[k] + bias[k / (g.oh * g.ow) % g.m];
    yref[k] = v > 0 ? v : 0;
  }
  for (size_t k = 0; k < nw; k++) dw[k] += dw0[k];
  const int N = g.n * g.oh * g.ow;
#define GEMM(BM, BN, WN, S, STAGES) \
  run_gemm_cfg<BM, BN, WN, S, STAGES>(name, g, x, w, bias, dy, yref, dx);
#define WGRAD(BM, BN, WN, S, STAGES)                                          \
  run_wgrad_cfg<BM, BN, WN, S, STAGES>(name, g, x, dy, dw0, dw, N);           \
  run_wgrad_cfg<BM, BN, WN, S, STAGES>(name, g, x, dy, dw0, dw,               \
                                       std::max(32, (N / 3 + 31) / 32 * 32)); \
  run_wgrad_cfg<BM, BN, WN, S, STAGES>(name, g, x, dy, dw0, dw, 32);
  IG_TF32_GEMM_CONFIGS(GEMM)
  IG_TF32_WGRAD_CONFIGS(WGRAD)
}

int main(int argc, char **argv) {
  const int which = argc > 1 ? atoi(argv[1]) : -1;
  struct {
    const char *name;
    Geom g;
  } cases[] = {
      {"conv1-ish", geom(1, 3, 12, 12, 32, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"conv2-ish", geom(1, 32, 8, 8, 32, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"conv3-ish", geom(2, 32, 4, 4, 64, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"70 outputs", geom(2, 20, 6, 5, 70, 3, 3, 1, 1, 1, 1, 1, 1)},
      {"5x5 pad 2", geom(3, 5, 12, 10, 12, 5, 5, 1, 1, 2, 2, 1, 1)},
      {"stride 2", geom(3, 4, 11, 9, 5, 4, 3, 2, 1, 1, 2, 1, 1)},
      {"dilated", geom(2, 3, 8, 13, 6, 3, 5, 1, 1, 0, 2, 2, 1)},
  };
  for (int mode = 0; mode < 2; mode++) {
    g_eager = mode == 1;
    for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++)
      if (which < 0 || which == i) run_case(cases[i].name, cases[i].g);
  }
  printf("%d failures\n", g_fail);
  return g_fail != 0;
}
