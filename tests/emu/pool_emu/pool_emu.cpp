// The GPU pooling kernels of src/layers/pooling.cu run on the host, one
// thread at a time (their grid-stride loops then cover every index): the
// batched kernels against the plain ones, bit for bit, over many
// geometries.  pool_fwd_small against pool_fwd (MAX and AVE, windows up to
// 3x3, with the fused bias and ReLU), and pool_bwd_cell against pool_bwd
// (MAX, AVE and STOCHASTIC in training, strides 1 to 3, kernels 1 to 5,
// pads, both fused ReLUs).  Built by tests/emu/pool-emu.sh around the
// kernels' own source (kernels.inc).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "layers/pooling.h"

using std::max;
using std::min;

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};
static dim3 blockIdx{0, 0, 0}, threadIdx{0, 0, 0}, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
template <typename T>
static T __ldg(const T *p) {
  return *p;
}
static unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }

#include "kernels.inc"

static int pooled(int in, int k, int pad, int s) {
  int out = (int)ceilf((float)(in + 2 * pad - k) / (float)s) + 1;
  if (pad && (out - 1) * s >= in + pad) out--;
  return out;
}

static uint64_t g_state = 1;
static float uniform() { /* in [-1, 1) */
  g_state = g_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((g_state >> 40) & 0xffff) / 32768.0f - 1.0f;
}

template <int S, int C>
static void cells(const ct_pool_geom &g, const pool_divs &d, const float *x, const float *y,
                  const float *dy, const float *idx, float *dx) {
  const unsigned CH = (unsigned)((g.H + S - 1) / S), CW = (unsigned)((g.W + S - 1) / S);
  pool_bwd_cell<unsigned, S, C>((unsigned)(g.N * g.C * CH * CW), g, d, fast_div_of(CW),
                                fast_div_of(CH), x, y, dy, idx, dx);
}

typedef void (*cell_fn)(const ct_pool_geom &, const pool_divs &, const float *, const float *,
                        const float *, const float *, float *);
static const cell_fn k_cells[3][2] = {
    {cells<1, 2>, cells<1, 3>}, {cells<2, 2>, cells<2, 3>}, {cells<3, 2>, cells<3, 3>}};

static const float k_bias[3] = {0.25f, -0.5f, 0.125f};

/* One geometry: batch 2 of 3 planes of H x (H + 1), square k x k windows
 * at stride s with pad; fused: 1 relu_top, 2 relu_bottom, 4 the bias (MAX).
 * Returns how many comparisons differ (0, 1 or 2); -1 where the geometry
 * has no output or is not the stride-cell kernels'. */
static int check(int method, int k, int s, int pad, int H, int fused) {
  ct_pool_geom g;
  memset(&g, 0, sizeof g);
  g.method = method;
  g.kh = g.kw = k;
  g.sh = g.sw = s;
  g.ph = g.pw = pad;
  g.N = 2, g.C = 3, g.H = H, g.W = H + 1;
  g.relu_top = fused & 1, g.relu_bottom = fused & 2;
  g.bias = method == 0 && (fused & 4) ? k_bias : nullptr;
  g.PH = pooled(g.H, k, pad, s);
  g.PW = pooled(g.W, k, pad, s);
  const int cover = (k + 2 * s - 2) / s; /* as ct_pool_backward_gpu */
  if (g.PH <= 0 || g.PW <= 0 || cover > 3) return -1;
  const size_t nin = (size_t)g.N * g.C * g.H * g.W, nout = (size_t)g.N * g.C * g.PH * g.PW;
  std::vector<float> x(nin), y(nout), y2(nout), dy(nout), idx(nout), dx(nin), dx2(nin);
  for (float &v : x) v = uniform();
  for (float &v : dy) v = uniform();
  for (float &v : idx) v = (uniform() + 1.0f) / 2.0f; /* STOCHASTIC's draws */
  std::vector<float> idx2 = idx;
  const pool_divs d = divs_of(&g);
  int differ = 0;
  pool_fwd<unsigned>((unsigned)nout, g, d, true, x.data(), y.data(), idx.data());
  if (method != 2 && k <= 3) {
    if (k <= 2) pool_fwd_small<unsigned, 2>((unsigned)nout, g, d, x.data(), y2.data(), idx2.data());
    else pool_fwd_small<unsigned, 3>((unsigned)nout, g, d, x.data(), y2.data(), idx2.data());
    differ += memcmp(y.data(), y2.data(), nout * 4) != 0 ||
              (method == 0 && memcmp(idx.data(), idx2.data(), nout * 4) != 0);
  }
  pool_bwd<unsigned>((unsigned)nin, g, d, true, x.data(), y.data(), dy.data(), idx.data(),
                     dx.data());
  k_cells[s - 1][cover <= 2 ? 0 : 1](g, d, x.data(), y.data(), dy.data(), idx.data(), dx2.data());
  differ += memcmp(dx.data(), dx2.data(), nin * 4) != 0;
  return differ;
}

int main() {
  long geometries = 0, bad = 0;
  for (int method = 0; method < 3; method++)
    for (int k = 1; k <= 5; k++)
      for (int s = 1; s <= 3; s++)
        for (int pad = 0; pad < k && pad <= 2; pad++)
          for (int H = k; H <= 9; H += 2)
            for (int fused = 0; fused < 8; fused++) {
              const int differ = check(method, k, s, pad, H, fused);
              if (differ < 0) continue;
              geometries++;
              if (differ && bad++ < 5)
                printf("differs: method %d k %d stride %d pad %d H %d fused %d\n", method, k, s,
                       pad, H, fused);
            }
  printf("%ld geometries, %ld differences\n", geometries, bad);
  return bad != 0;
}
