// Host emulator of the direct filter-gradient kernels
// (src/layers/conv/conv_wgrad_direct.cu), for checking their index arithmetic
// without a GPU (tests/emu/dwgrad-emu.sh builds and runs it).  The kernels'
// own source is included here with DW_HOST_EMULATION and runs on the fibers
// of tests/emu/fibers.h, with cp.async copies landing early and late.
// Every configuration runs each shape three times: as one slice added
// onto a dW that already holds values, split among blocks as a GPU of 132
// multiprocessors would split it, and in slices of two units (the slices
// summed in order, as conv_igemm.cu's sum kernel does).  Every slice starts as NaN, every output has
// guard zones, and the results are compared with a double reference.
#include <cuda_runtime.h>

#include "../fibers.h"

#include "layers/conv/conv_igemm.h"
using std::min; /* CUDA's device min(int, int) */
/* dw_lane_sums on the host: the same butterfly as the shuffles, each
 * thread computing its lane's values from its group's, which the block
 * posts in shared storage between two barriers */
static std::vector<float> g_lanes; /* [thread][value] */
static void lane_sums(float *v, int n, int lanes) {
  const unsigned t = threadIdx.x, first = t / lanes * lanes;
  std::copy(v, v + n, &g_lanes[(size_t)t * n]);
  __syncthreads();
  std::vector<float> cur(lanes), next(lanes);
  for (int j = 0; j < n; j++) {
    for (int l = 0; l < lanes; l++) cur[l] = g_lanes[(size_t)(first + l) * n + j];
    for (int step = 1; step < lanes; step *= 2) {
      for (int l = 0; l < lanes; l++) next[l] = cur[l] + cur[l ^ step];
      cur.swap(next);
    }
    v[j] = cur[t - first];
  }
  __syncthreads();
}
#define DW_HOST_EMULATION
#define DW_SMEM_DECL float *dw_smem = g_smem.data()
#define DW_LANE_SUMS(v, n, lanes) lane_sums((v), (n), (lanes))
#include "layers/conv/conv_wgrad_direct.cu"

struct Geom {
  const char *name;
  int n, c, h, w, m, k, ph, pw;
};

template <int KW, int OWL, int TM, int CB, int MB>
static bool run_config(const Geom &g, int R, int mode, const std::vector<float> &x,
                       const std::vector<float> &dy, const std::vector<double> &ref) {
  typedef dw_shape<KW, OWL, TM, CB, MB> S;
  char cname[64];
  snprintf(cname, sizeof cname, "%dx%d_%dx%dr%d", OWL, TM, CB, MB, R);
  ct_igemm_geom cg;
  cg.n = g.n, cg.c = g.c, cg.h = g.h, cg.w = g.w, cg.m = g.m;
  cg.oh = g.h + 2 * g.ph - KW + 1, cg.ow = g.w + 2 * g.pw - KW + 1;
  cg.kh = cg.kw = KW, cg.sh = cg.sw = cg.dh = cg.dw = 1, cg.ph = g.ph, cg.pw = g.pw;
  dw_args a;
  size_t smem;
  if (!dw_layout(&cg, KW, OWL, TM, CB, MB, R, &a, &smem)) {
    printf("%-12s %s: does not fit (skipped)\n", g.name, cname);
    return true;
  }
  const int tiles = ((g.c + CB - 1) / CB) * ((g.m + MB - 1) / MB);
  const bool one_slice = mode == 0;
  int splits, chunk;
  if (one_slice) {
    splits = 1, chunk = a.units;
  } else if (mode == 1) {
    dw_split(&a, tiles, S::T, smem, 132, &splits, &chunk);
  } else { /* two units a block */
    chunk = 2;
    splits = (a.units + chunk - 1) / chunk;
  }
  a.chunk = chunk;
  const size_t MK = (size_t)g.m * g.c * KW * KW, guard = 64;
  std::vector<float> out((one_slice ? 1 : splits) * MK + 2 * guard, std::nanf(""));
  for (size_t i = 0; i < guard; i++) out[i] = out[out.size() - 1 - i] = 12345.0f;
  std::vector<float> before(MK);
  if (one_slice)
    for (size_t i = 0; i < MK; i++) out[guard + i] = before[i] = (float)(i % 7) - 3.0f;
  a.x = x.data();
  a.dy = dy.data();
  a.out = out.data() + guard;
  a.accumulate = one_slice ? 1 : 0;
  g_ranges.clear();
  reg(x.data(), x.size() * 4);
  reg(dy.data(), dy.size() * 4);
  dim3 grid((g.c + CB - 1) / CB, (g.m + MB - 1) / MB, splits);
  g_lanes.assign((size_t)S::T * TM * KW * KW, 0.0f);
  run_grid(grid, S::T, smem / sizeof(float), [&] { dw_wgrad_kernel<KW, OWL, TM, CB, MB>(a); });
  for (size_t i = 0; i < guard; i++)
    if (out[i] != 12345.0f || out[out.size() - 1 - i] != 12345.0f) {
      printf("write outside the output\n");
      return false;
    }
  double most = 0.0, err = 0.0;
  for (size_t i = 0; i < MK; i++) most = std::max(most, std::fabs(ref[i]));
  for (size_t i = 0; i < MK; i++) {
    double v = 0.0;
    if (one_slice) {
      v = (double)out[guard + i] - before[i];
    } else {
      float s = 0.0f;
      for (int z = 0; z < splits; z++) s += out[guard + z * MK + i];
      v = s;
    }
    if (std::isnan(v)) {
      printf("%s: output %zu unwritten\n", g.name, i);
      return false;
    }
    err = std::max(err, std::fabs(v - ref[i]));
  }
  const double rel = err / (most > 0 ? most : 1.0);
  printf("%-12s %s %-9s %d slices of %d units%s: error %.2e of the largest value %s\n",
         g.name, cname, one_slice ? "onto dW" : "in slices", splits, chunk,
         g_eager ? "" : " late", rel, rel <= 1e-5 ? "ok" : "FAIL");
  return rel <= 1e-5;
}

int main(int argc, char **argv) {
  const Geom cases[] = {
      {"cifar conv2", 2, 32, 8, 8, 32, 5, 2, 2}, {"cifar conv3", 2, 32, 8, 8, 64, 5, 2, 2},
      {"cifar conv1", 2, 3, 32, 32, 32, 5, 2, 2}, {"odd sizes", 3, 5, 9, 7, 12, 5, 2, 2},
      {"pad 0", 2, 10, 9, 11, 20, 5, 0, 0},      {"pad 4 and 1", 1, 17, 5, 6, 33, 5, 4, 1},
      {"one pixel", 5, 3, 1, 1, 7, 5, 2, 2},
  };
  const int only = argc > 1 ? atoi(argv[1]) : -1;
  int failures = 0, n = 0;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    if (only >= 0 && (int)ci != only) continue;
    const Geom &g = cases[ci];
    const int OH = g.h + 2 * g.ph - g.k + 1, OW = g.w + 2 * g.pw - g.k + 1;
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> x((size_t)g.n * g.c * g.h * g.w), dy((size_t)g.n * g.m * OH * OW);
    for (auto &v : x) v = dist(g_rng);
    for (auto &v : dy) v = dist(g_rng);
    std::vector<double> ref((size_t)g.m * g.c * g.k * g.k, 0.0);
    for (int i = 0; i < g.n; i++)
      for (int m = 0; m < g.m; m++)
        for (int c = 0; c < g.c; c++)
          for (int ky = 0; ky < g.k; ky++)
            for (int kx = 0; kx < g.k; kx++) {
              double s = 0.0;
              for (int oy = 0; oy < OH; oy++)
                for (int ox = 0; ox < OW; ox++) {
                  const int y = oy + ky - g.ph, xx = ox + kx - g.pw;
                  if (y < 0 || y >= g.h || xx < 0 || xx >= g.w) continue;
                  s += (double)dy[(((size_t)i * g.m + m) * OH + oy) * OW + ox] *
                       x[(((size_t)i * g.c + c) * g.h + y) * g.w + xx];
                }
              ref[(((size_t)m * g.c + c) * g.k + ky) * g.k + kx] += s;
            }
    for (int mode = 0; mode < 3; mode++) {
      g_eager = mode == 1;
#define DW_RUN(KW, OWL, TM, CB, MB, R)                                       \
  if (KW == g.k) {                                                           \
    failures += !run_config<KW, OWL, TM, CB, MB>(g, R, mode, x, dy, ref);    \
    n++;                                                                     \
  }
      IG_DIRECT_WGRAD_CONFIGS(DW_RUN)
#undef DW_RUN
    }
  }
  printf("%d runs\n%d failures\n", n, failures);
  return failures != 0;
}
