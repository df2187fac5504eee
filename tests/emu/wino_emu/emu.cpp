// Host emulator of the Winograd F(2x2, 5x5) convolution kernels
// (src/layers/conv/conv_winograd.cu), for checking their index arithmetic
// without a GPU (tests/emu/wino-emu.sh builds and runs it).  The kernels' own
// source is included here with WG_HOST_EMULATION and runs on the fibers of
// tests/emu/fibers.h, with cp.async copies landing early and late (both
// orders are run).  Every output carries guard zones and starts as NaN, and
// the results are compared with a double reference.
#include <cuda_runtime.h>

#include "../fibers.h"

#define WG_HOST_EMULATION
#define WG_LDG(p) checked_read(p)
#define WG_SMEM_DECL float *wg_smem = g_smem.data()
#include "layers/conv/conv_winograd.cu"

struct Geom {
  const char *name;
  int n, c, h, w, m, ph, pw;
};

/* dst (n, cout, OH, OW) = the 5x5 correlation of src (n, cin, H, W) padded
 * by ph, pw with filters f(co, ci) (a callback), in double. */
template <typename Filt>
static std::vector<double> reference(const std::vector<float> &src, int n, int cin, int H, int W,
                                     int cout, int ph, int pw, Filt f) {
  const int OH = H + 2 * ph - 4, OW = W + 2 * pw - 4;
  std::vector<double> out((size_t)n * cout * OH * OW, 0.0);
  for (int i = 0; i < n; i++)
    for (int co = 0; co < cout; co++)
      for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++) {
          double s = 0.0;
          for (int ci = 0; ci < cin; ci++)
            for (int u = 0; u < 5; u++)
              for (int v = 0; v < 5; v++) {
                const int y = oy + u - ph, x = ox + v - pw;
                if (y < 0 || y >= H || x < 0 || x >= W) continue;
                s += (double)src[(((size_t)i * cin + ci) * H + y) * W + x] * f(co, ci, u, v);
              }
          out[(((size_t)i * cout + co) * OH + oy) * OW + ox] = s;
        }
  return out;
}

template <int BY, int BX, int BK, int TT, int TK, int CC>
static bool run_config(const Geom &g, bool data, const std::vector<float> &w,
                       const std::vector<float> &bias, bool epilogue) {
  typedef wg_shape<BY, BX, BK, TT, TK, CC> S;
  const int OHf = g.h + 2 * g.ph - 4, OWf = g.w + 2 * g.pw - 4;
  wg_args a;
  int cin, cout;
  if (!data) {
    cin = g.c, cout = g.m;
    a.H = g.h, a.W = g.w, a.OH = OHf, a.OW = OWf, a.ph = g.ph, a.pw = g.pw;
  } else {
    cin = g.m, cout = g.c;
    a.H = OHf, a.W = OWf, a.OH = g.h, a.OW = g.w, a.ph = 4 - g.ph, a.pw = 4 - g.pw;
  }
  a.cin = cin, a.cout = cout;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> src((size_t)g.n * cin * a.H * a.W);
  for (auto &v : src) v = dist(g_rng);
  a.TH = (a.OH + 1) / 2;
  a.TW = (a.OW + 1) / 2;
  a.NBY = (a.TH + BY - 1) / BY;
  a.NBX = (a.TW + BX - 1) / BX;
  a.nch = (cin + CC - 1) / CC;
  const int nkb = (cout + BK - 1) / BK;
  /* the filter transform, every thread of its grid (16-byte aligned) */
  const size_t nu = wg_filter_floats(cin, cout, BK, CC);
  std::vector<float> ubuf(nu + 4, std::nanf(""));
  float *up = ubuf.data();
  while ((uintptr_t)up % 16) up++;
  g_ranges.clear();
  reg(w.data(), w.size() * 4);
  reg(src.data(), src.size() * 4);
  reg(bias.data(), bias.size() * 4);
  const int rows = 6 * a.nch * CC * nkb * BK;
  run_grid(dim3((rows + 127) / 128, 1, 1), 128, 0, [&] {
    wg_filter_kernel(w.data(), cin, cout, data ? 1 : 0, BK, CC, a.nch, nkb, up);
  });
  for (size_t i = 0; i < nu; i++)
    if (std::isnan(up[i])) {
      printf("filter transform left a value unwritten\n");
      return false;
    }
  reg(up, nu * 4);
  const size_t ny = (size_t)g.n * cout * a.OH * a.OW, guard = 64;
  std::vector<float> out(ny + 2 * guard, std::nanf(""));
  for (size_t i = 0; i < guard; i++) out[i] = out[ny + guard + i] = 12345.0f;
  a.src = src.data();
  a.u = up;
  a.bias = epilogue ? bias.data() : nullptr;
  a.relu = epilogue ? 1 : 0;
  a.dst = out.data() + guard;
  dim3 grid(g.n * a.NBY * a.NBX, nkb, 1);
  run_grid(grid, S::T, S::FLOATS, [&] { wg_conv_kernel<BY, BX, BK, TT, TK, CC>(a); });
  std::vector<double> ref;
  if (!data)
    ref = reference(src, g.n, cin, a.H, a.W, cout, a.ph, a.pw, [&](int co, int ci, int y, int x) {
      return (double)w[(((size_t)co * g.c + ci) * 5 + y) * 5 + x];
    });
  else
    ref = reference(src, g.n, cin, a.H, a.W, cout, a.ph, a.pw, [&](int co, int ci, int y, int x) {
      /* dX's filter (co = input channel c, ci = output channel m): turned */
      return (double)w[(((size_t)ci * g.c + co) * 5 + (4 - y)) * 5 + (4 - x)];
    });
  double most = 0.0, err = 0.0;
  for (size_t i = 0; i < ny; i++) {
    double r = ref[i];
    if (epilogue) r = std::max(r + bias[(i / ((size_t)a.OH * a.OW)) % cout], 0.0);
    ref[i] = r;
    most = std::max(most, std::fabs(r));
  }
  for (size_t i = 0; i < guard; i++)
    if (out[i] != 12345.0f || out[ny + guard + i] != 12345.0f) {
      printf("write outside the output\n");
      return false;
    }
  for (size_t i = 0; i < ny; i++) {
    const float v = out[guard + i];
    if (std::isnan(v)) {
      printf("output %zu unwritten\n", i);
      return false;
    }
    err = std::max(err, std::fabs(v - ref[i]));
  }
  const double rel = err / (most > 0 ? most : 1.0);
  printf("%-12s %s %dx%dx%d_%dx%dc%d%s%s: error %.2e of the largest value %s\n", g.name,
         data ? "data   " : "forward", BY, BX, BK, TT, TK, CC, epilogue ? " +bias+relu" : "",
         g_eager ? "" : " late", rel,
         rel <= 1e-5 ? "ok" : "FAIL");
  return rel <= 1e-5;
}

int main(int argc, char **argv) {
  const Geom cases[] = {
      {"cifar conv1", 2, 3, 12, 12, 32, 2, 2},  {"cifar conv2", 2, 32, 8, 8, 32, 2, 2},
      {"cifar conv3", 2, 32, 8, 8, 64, 2, 2},   {"odd sizes", 3, 5, 9, 7, 12, 2, 2},
      {"pad 0", 2, 10, 9, 11, 20, 0, 0},        {"pad 4 and 1", 1, 17, 5, 6, 33, 4, 1},
      {"one pixel", 5, 3, 1, 1, 7, 2, 2},
  };
  const int only = argc > 1 ? atoi(argv[1]) : -1;
  int failures = 0, n = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (only >= 0 && (int)i != only) continue;
    const Geom &g = cases[i];
    std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
    std::vector<float> w((size_t)g.m * g.c * 25), bias(std::max(g.m, g.c));
    for (auto &v : w) v = dist(g_rng);
    for (auto &v : bias) v = dist(g_rng);
    for (int data = 0; data < 2; data++)
      for (int eager = 0; eager < 2; eager++) {
        g_eager = eager != 0;
        int k = 0;
#define WG_RUN(BY, BX, BK, TT, TK, CC)                                                   \
  {                                                                                        \
    const bool epi = !data && k % 2 == eager;                                              \
    failures += !run_config<BY, BX, BK, TT, TK, CC>(g, data != 0, w, bias, epi);           \
    n++;                                                                                   \
    k++;                                                                                   \
  }
        IG_WINO_CONFIGS(WG_RUN)
#undef WG_RUN
      }
  }
  printf("%d runs\n%d failures\n", n, failures);
  return failures != 0;
}
