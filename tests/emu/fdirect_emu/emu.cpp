// Host emulator of the direct forward kernel (src/layers/conv/conv_fwd_direct.cu),
// for checking its index arithmetic without a GPU (tests/emu/fdirect-emu.sh
// builds and runs it).  The kernel's own source is included here with
// FD_HOST_EMULATION and runs on the fibers of tests/emu/fibers.h.  Every
// output carries guard zones and starts as NaN, and the results are
// compared with a double reference.
#include <cuda_runtime.h>

#include "../fibers.h"

#define FD_HOST_EMULATION
#define FD_LDG(p) checked_read(p)
#define FD_SMEM_DECL float *fd_smem = g_smem.data()
/* a 16-byte store must be aligned, as on a GPU */
#define FD_ST4(p, v)                                         \
  do {                                                       \
    if ((uintptr_t)(p) % 16) {                               \
      fprintf(stderr, "a 16-byte store not aligned\n");      \
      abort();                                               \
    }                                                        \
    *(float4 *)(p) = (v);                                    \
  } while (0)
#include "layers/conv/conv_fwd_direct.cu"

struct Geom {
  const char *name;
  int n, c, h, w, m, ph, pw;
};

/* A 16-byte aligned run of n floats with `guard` floats of 12345 on each
 * side, the rest NaN. */
struct Guarded {
  std::vector<float> buf;
  float *p;
  size_t n, guard = 64;
  explicit Guarded(size_t n_) : buf(n_ + 2 * 64 + 4, std::nanf("")), n(n_) {
    float *b = buf.data();
    while ((uintptr_t)(b + guard) % 16) b++;
    p = b + guard;
    for (size_t i = 0; i < guard; i++) p[-1 - (long)i] = p[n + i] = 12345.0f;
  }
  bool guards_intact() const {
    for (size_t i = 0; i < guard; i++)
      if (p[-1 - (long)i] != 12345.0f || p[n + i] != 12345.0f) return false;
    return true;
  }
};

/* shift: the output starts that many floats past a 16-byte boundary (a top
 * that is a view). */
template <int RB>
static bool run_config(const Geom &g, bool epilogue, int shift) {
  const int OH = g.h + 2 * g.ph - 4, OW = g.w + 2 * g.pw - 4;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x((size_t)g.n * g.c * g.h * g.w), w((size_t)g.m * g.c * 25), bias(g.m);
  for (auto &v : x) v = dist(g_rng);
  for (auto &v : w) v = dist(g_rng) * 0.5f;
  for (auto &v : bias) v = dist(g_rng);
  const size_t ny = (size_t)g.n * g.m * OH * OW;
  Guarded y(ny + shift);
  float *yp = y.p + shift;
  g_ranges.clear();
  reg(x.data(), x.size() * 4);
  reg(w.data(), w.size() * 4);
  reg(bias.data(), bias.size() * 4);
  const fd_args a = {x.data(), w.data(), epilogue ? bias.data() : nullptr, yp, g.c, g.h, g.w,
                     g.m, OH, OW, g.ph, g.pw, epilogue ? 1 : 0};
  dim3 grid(g.n * ((OH + RB - 1) / RB), (g.m + 31) / 32, 1);
  run_grid(grid, 32 * RB, fd_smem_floats(RB, g.c), [&] { fd_conv_kernel<RB>(a); });
  if (!y.guards_intact()) {
    printf("write outside the output\n");
    return false;
  }
  double most = 0.0, err = 0.0;
  for (int i = 0; i < g.n; i++)
    for (int co = 0; co < g.m; co++)
      for (int oy = 0; oy < OH; oy++)
        for (int ox = 0; ox < OW; ox++) {
          double s = 0.0;
          for (int c = 0; c < g.c; c++)
            for (int u = 0; u < 5; u++)
              for (int v = 0; v < 5; v++) {
                const int iy = oy + u - g.ph, ix = ox + v - g.pw;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                s += (double)x[(((size_t)i * g.c + c) * g.h + iy) * g.w + ix] *
                     w[(((size_t)co * g.c + c) * 5 + u) * 5 + v];
              }
          if (epilogue) s = std::max(s + bias[co], 0.0);
          const float got = yp[(((size_t)i * g.m + co) * OH + oy) * OW + ox];
          if (std::isnan(got)) {
            printf("output (%d, %d, %d, %d) unwritten\n", i, co, oy, ox);
            return false;
          }
          most = std::max(most, std::fabs(s));
          err = std::max(err, std::fabs(got - s));
        }
  const double rel = err / (most > 0 ? most : 1.0);
  printf("%-12s r%d%s%s: error %.2e of the largest value %s\n", g.name, RB,
         epilogue ? " +bias+relu" : "", shift ? " unaligned" : "", rel, rel <= 1e-5 ? "ok" : "FAIL");
  return rel <= 1e-5;
}

int main(int argc, char **argv) {
  const Geom cases[] = {
      {"cifar conv1", 2, 3, 32, 32, 32, 2, 2}, {"lenet conv1", 2, 1, 28, 28, 20, 0, 0},
      {"odd rows", 2, 4, 9, 7, 40, 1, 2},      {"one pixel", 3, 2, 1, 1, 7, 2, 2},
      {"pads 4 and 3", 1, 3, 5, 6, 33, 4, 3},
  };
  const int only = argc > 1 ? atoi(argv[1]) : -1;
  int failures = 0, n = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (only >= 0 && (int)i != only) continue;
    for (int epi = 0; epi < 3; epi++) { /* plain, bias and ReLU, an unaligned top */
#define FD_RUN(RB)                                                  \
  failures += !run_config<RB>(cases[i], epi == 1, epi == 2 ? 1 : 0); \
  n++;
      IG_FDIRECT_CONFIGS(FD_RUN)
#undef FD_RUN
    }
  }
  printf("%d runs\n%d failures\n", n, failures);
  return failures != 0;
}
