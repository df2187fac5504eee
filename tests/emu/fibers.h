// The host emulation of CUDA blocks that the kernel emulators of tests/emu/
// (igemm_emu, wino_emu, dwgrad_emu, fdirect_emu) run kernels on: each CUDA
// thread of a block is a fiber (ucontext), and all of a block's fibers
// advance in rounds from one __syncthreads (or other yield) to the next, in
// an order shuffled per round; cp.async copies (ig_cp4, ig_cp16) land
// either at issue (g_eager) or as late as the waits allow.  Every global
// read through check_read / checked_read must fall in a buffer registered
// with reg.  A fiber's stack is FIBER_STACK_BYTES (define it first for
// kernels with larger frames).  Rounds cannot show a race between threads
// that a missing __syncthreads would cause on a GPU (compute-sanitizer's
// racecheck on the device does).  Include after <cuda_runtime.h>, before
// the kernels' source.
#ifndef CT_SCRIPTS_EMU_FIBERS_H
#define CT_SCRIPTS_EMU_FIBERS_H
#ifndef FIBER_STACK_BYTES
#define FIBER_STACK_BYTES (64 * 1024)
#endif
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __align__
#undef __restrict__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(x)
#define __restrict__

struct Range {
  const void *lo, *hi;
};
static std::vector<Range> g_ranges;
static void reg(const void *p, size_t bytes) { g_ranges.push_back({p, (const char *)p + bytes}); }
static void check_read(const void *p, size_t bytes) {
  for (auto &r : g_ranges)
    if (p >= r.lo && (const char *)p + bytes <= (const char *)r.hi) return;
  fprintf(stderr, "global read out of bounds at %p\n", p);
  abort();
}
static float checked_read(const float *p) {
  check_read(p, sizeof *p);
  return *p;
}

struct Copy {
  float *dst;
  float v[4];
  int n;
};
struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  bool done = false;
  dim3 tidx;
  std::vector<Copy> open;
  std::vector<std::vector<Copy>> groups;
};
static ucontext_t g_sched;
static Fiber *g_cur;
static dim3 blockIdx, blockDim;
#define threadIdx (g_cur->tidx)
static std::vector<float> g_smem;
static void __syncthreads() { swapcontext(&g_cur->ctx, &g_sched); }

static bool g_eager;
static void cp(float *dst, const float *src, bool full, int n) {
  if (dst < g_smem.data() || dst + n > g_smem.data() + g_smem.size()) {
    fprintf(stderr, "shared write out of range\n");
    abort();
  }
  Copy c{dst, {0, 0, 0, 0}, n};
  for (int i = 0; i < n; i++) c.v[i] = full ? checked_read(src + i) : 0.0f;
  if (g_eager)
    memcpy(dst, c.v, n * sizeof(float));
  else
    g_cur->open.push_back(c);
}
static void ig_cp4(float *dst, const float *src, bool full) { cp(dst, src, full, 1); }
static void ig_cp16(float *dst, const float *src, bool full) {
  if (((uintptr_t)dst | (uintptr_t)src) % 16) {
    fprintf(stderr, "a 16-byte copy not aligned\n");
    abort();
  }
  cp(dst, src, full, 4);
}
static void ig_cp_commit() {
  g_cur->groups.push_back(g_cur->open);
  g_cur->open.clear();
}
template <int N>
static void ig_cp_wait() {
  while ((int)g_cur->groups.size() > N) {
    for (auto &c : g_cur->groups.front()) memcpy(c.dst, c.v, c.n * sizeof(float));
    g_cur->groups.erase(g_cur->groups.begin());
  }
}

static std::mt19937 g_rng(7);

/* Runs kernel(args) over grid x block threads, block by block (threads
 * numbered x fastest, then y, then z). */
template <typename F>
static void run_grid(dim3 grid, dim3 block, size_t smem_floats, F kernel) {
  static F *k;
  k = &kernel;
  const int threads = (int)(block.x * block.y * block.z);
  std::vector<Fiber> fib(threads);
  for (unsigned bz = 0; bz < grid.z; bz++)
  for (unsigned by = 0; by < grid.y; by++)
    for (unsigned bx = 0; bx < grid.x; bx++) {
      blockIdx = dim3(bx, by, bz);
      blockDim = block;
      g_smem.assign(smem_floats, std::nanf(""));
      for (int t = 0; t < threads; t++) {
        Fiber &f = fib[t];
        f.done = false;
        f.open.clear();
        f.groups.clear();
        f.tidx = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
        f.stack.resize(FIBER_STACK_BYTES);
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = f.stack.size();
        f.ctx.uc_link = &g_sched;
        makecontext(&f.ctx, (void (*)())+[] {
          (*k)();
          g_cur->done = true;
        }, 0);
      }
      std::vector<int> order(threads);
      for (int t = 0; t < threads; t++) order[t] = t;
      for (;;) {
        std::shuffle(order.begin(), order.end(), g_rng);
        int done = 0;
        for (int t : order) {
          if (fib[t].done) {
            done++;
            continue;
          }
          g_cur = &fib[t];
          swapcontext(&g_sched, &fib[t].ctx);
          if (fib[t].done) done++;
        }
        if (done == threads) break;
        /* a round ends with every live fiber at the same barrier */
        for (int t = 0; t < threads; t++)
          if (fib[t].done) {
            fprintf(stderr, "a thread returned while others wait at a barrier\n");
            abort();
          }
      }
    }
}

template <typename F>
static void run_grid(dim3 grid, int threads, size_t smem_floats, F kernel) {
  run_grid(grid, dim3(threads, 1, 1), smem_floats, kernel);
}

#endif
