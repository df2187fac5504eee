/* Element-wise work on typed arrays, host side, and the device dispatch. */
#include "math/typed.h"

#include <stdint.h>
#include <string.h>

#include "core/mem.h"
#include "core/status.h"

#define load ct_typed_load
#define store ct_typed_store

/* Below this many values one thread does it all. */
#define PAR_MIN 32768

/* float32 and bfloat16, the host's pairs, have loops of their own: the
 * compiler vectorises them, where the per-element type switch of
 * ct_typed_load / ct_typed_store kept every loop scalar (LeNet's input
 * Cast, 50,176 values, took 0.8 ms on 2 cores). */

void ct_cpu_convert(size_t n, ct_dtype from, const void *x, ct_dtype to, void *y) {
  if (from == to) {
    if (x != y) memmove(y, x, n * ct_dtype_size(to));
    return;
  }
  if (from == CT_F32 && to == CT_BF16) {
    const float *xs = x;
    uint16_t *ys = y;
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) ys[i] = ct_f32_to_bf16(xs[i]);
    return;
  }
  if (from == CT_BF16 && to == CT_F32) {
    const uint16_t *xs = x;
    float *ys = y;
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) ys[i] = ct_bf16_to_f32(xs[i]);
    return;
  }
#pragma omp parallel for if (n >= PAR_MIN) schedule(static)
  for (size_t i = 0; i < n; i++) store(to, y, i, load(from, x, i));
}

void ct_cpu_axpy_from(size_t n, float alpha, ct_dtype from, const void *x, float *y) {
  if (from == CT_BF16) {
    const uint16_t *xs = x;
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) y[i] += alpha * ct_bf16_to_f32(xs[i]);
    return;
  }
#pragma omp parallel for if (n >= PAR_MIN) schedule(static)
  for (size_t i = 0; i < n; i++) y[i] += alpha * load(from, x, i);
}

void ct_cpu_add_typed(ct_dtype t, size_t n, const void *a, const void *b, void *y) {
  if (t == CT_BF16) {
    const uint16_t *as = a, *bs = b;
    uint16_t *ys = y;
#pragma omp parallel for simd if (n >= PAR_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) ys[i] = ct_f32_to_bf16(ct_bf16_to_f32(as[i]) + ct_bf16_to_f32(bs[i]));
    return;
  }
#pragma omp parallel for if (n >= PAR_MIN) schedule(static)
  for (size_t i = 0; i < n; i++) store(t, y, i, load(t, a, i) + load(t, b, i));
}

/* One TILE x TILE block of the transpose, float32 or bfloat16 on either side
 * (the channels-last Casts of bfloat16 nets on the host: a net's input and
 * the blobs around its NCHW-only layers). */
#define TILE 16
#define TRANSPOSE_BLOCKS(TX, TY, CONV)                                                    \
  do {                                                                                    \
    const TX *xs = x;                                                                     \
    TY *ys = y;                                                                           \
    const size_t rt = (rows + TILE - 1) / TILE;                                           \
    _Pragma("omp parallel for if (n * m >= PAR_MIN) schedule(static)")                  \
    for (size_t job = 0; job < n * rt; job++) {                                           \
      const size_t b = job / rt, r0 = (job % rt) * TILE;                                  \
      const size_t r1 = r0 + TILE < rows ? r0 + TILE : rows;                              \
      const TX *xb = xs + b * m;                                                          \
      TY *yb = ys + b * m;                                                                \
      for (size_t k0 = 0; k0 < cols; k0 += TILE) {                                        \
        const size_t k1 = k0 + TILE < cols ? k0 + TILE : cols;                            \
        for (size_t k = k0; k < k1; k++)                                                  \
          for (size_t r = r0; r < r1; r++) yb[k * rows + r] = CONV(xb[r * cols + k]);     \
      }                                                                                   \
    }                                                                                     \
  } while (0)
#define SAME(v) (v)

void ct_cpu_transpose_convert(size_t n, size_t rows, size_t cols, ct_dtype from, const void *x,
                              ct_dtype to, void *y, bool accumulate) {
  const size_t m = rows * cols;
  if (!accumulate && from == CT_F32 && to == CT_BF16) {
    TRANSPOSE_BLOCKS(float, uint16_t, ct_f32_to_bf16);
    return;
  }
  if (!accumulate && from == CT_BF16 && to == CT_BF16) {
    TRANSPOSE_BLOCKS(uint16_t, uint16_t, SAME);
    return;
  }
  if (!accumulate && from == CT_BF16 && to == CT_F32) {
    TRANSPOSE_BLOCKS(uint16_t, float, ct_bf16_to_f32);
    return;
  }
  if (!accumulate && from == CT_F32 && to == CT_F32) {
    TRANSPOSE_BLOCKS(float, float, SAME);
    return;
  }
#pragma omp parallel for if (n * m >= PAR_MIN) schedule(static)
  for (size_t b = 0; b < n; b++)
    for (size_t r = 0; r < rows; r++)
      for (size_t k = 0; k < cols; k++) {
        const size_t o = b * m + k * rows + r;
        const float v = load(from, x, b * m + r * cols + k);
        store(to, y, o, accumulate ? load(to, y, o) + v : v);
      }
}

#ifdef CORTADO_HAVE_CUDA
#define ON_GPU(call) call
#else
#define ON_GPU(call) ct_abort(__FILE__, __LINE__, "GPU math in a CPU-only build")
#endif

void ct_dev_convert(ct_context *ctx, size_t n, ct_dtype from, const void *x, ct_dtype to, void *y) {
  if (ctx->device == CT_DEVICE_CPU) ct_cpu_convert(n, from, x, to, y);
  else ON_GPU(ct_gpu_convert(ctx, n, from, x, to, y));
}

void ct_dev_axpy_from(ct_context *ctx, size_t n, float alpha, ct_dtype from, const void *x,
                      float *y) {
  if (ctx->device == CT_DEVICE_CPU) ct_cpu_axpy_from(n, alpha, from, x, y);
  else ON_GPU(ct_gpu_axpy_from(ctx, n, alpha, from, x, y));
}

void ct_dev_add_typed(ct_context *ctx, ct_dtype t, size_t n, const void *a, const void *b, void *y) {
  if (ctx->device == CT_DEVICE_CPU) ct_cpu_add_typed(t, n, a, b, y);
  else ON_GPU(ct_gpu_add_typed(ctx, t, n, a, b, y));
}

void ct_dev_acc_typed(ct_context *ctx, ct_dtype t, size_t n, const void *x, void *y) {
  ct_dev_add_typed(ctx, t, n, x, y, y);
}

void ct_dev_transpose_convert(ct_context *ctx, size_t n, size_t rows, size_t cols, ct_dtype from,
                              const void *x, ct_dtype to, void *y, bool accumulate) {
  if (ctx->device == CT_DEVICE_CPU) ct_cpu_transpose_convert(n, rows, cols, from, x, to, y, accumulate);
  else ON_GPU(ct_gpu_transpose_convert(ctx, n, rows, cols, from, x, to, y, accumulate));
}

void ct_dev_relayout(ct_context *ctx, size_t n, size_t c, size_t s, ct_dtype from,
                     ct_layout from_layout, const void *x, ct_dtype to, ct_layout to_layout,
                     void *y) {
  if (from_layout == to_layout || c == 1 || s == 1) {
    ct_dev_convert(ctx, n * c * s, from, x, to, y);
    return;
  }
  if (from_layout == CT_NCHW) ct_dev_transpose_convert(ctx, n, c, s, from, x, to, y, false);
  else ct_dev_transpose_convert(ctx, n, s, c, from, x, to, y, false);
}
