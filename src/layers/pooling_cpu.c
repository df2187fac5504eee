/* Host MAX and AVE pooling kernels (pooling_cpu.h).
 *
 * Planes (one image's channel) are spread over the threads; a plane is done
 * one output row at a time, eight outputs at once with the accumulators in
 * registers.  To make the k-th window column of eight neighbouring outputs
 * one contiguous run whatever the stride sw, every input row is first laid
 * out by phase: padded column j (input column j - pad) goes to phase j % sw
 * at position j / sw, so that run starts at (k % sw) * q + k / sw.  The
 * padding holds what never wins (MAX: -inf, so Caffe's clipped windows and
 * first-maximum order hold) or adds nothing (AVE: 0), and the phases are
 * long enough for a whole last group of eight: no scalar tails, no masked
 * loads or stores (which defeat store forwarding on some cores).  AVE's
 * backward adds into the same layout and lays it back.
 *
 * bfloat16 tensors are read into these float32 rows and written from them
 * (one rounding per output), so the sums and comparisons are float32's. */
#include "layers/pooling_cpu.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/parallel.h"
#include "core/status.h"

/* Eight floats in GCC's generic vectors: AVX registers where the target has
 * them, pairs of SSE registers otherwise. */
typedef float v8f __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4)));

static inline v8f load8(const float *p) { return *(const v8f_u *)p; }
static inline void store8(float *p, v8f v) { *(v8f_u *)p = v; }
static inline v8f splat8(float x) { return (v8f){x, x, x, x, x, x, x, x}; }
static inline v8f select8(v8i m, v8f a, v8f b) { return (v8f)((m & (v8i)a) | (~m & (v8i)b)); }

/* Eight of the sixteen lanes of a and b, by constant indices. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define SHUFFLE8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUFFLE8(a, b, ...) __builtin_shuffle(a, b, (v8i){__VA_ARGS__})
#endif

/* The phase layout of one plane and what a thread needs to run it. */
typedef struct job {
  const ct_pool_geom *g;
  const ct_pool_windows *w;
  int pw8;          /* PW rounded up to 8 */
  int q;            /* positions per phase */
  int stride;       /* floats per laid-out row: sw * q */
  int *koff;        /* (kw) where window column k starts in a laid-out row */
  ct_dtype type;    /* of x, y, dy and dx: float32 or bfloat16 */
  const void *x, *dy;
  const float *idx;
  void *y, *dx;
  float *mask;
} job;

/* n values of type t from p + off into dst (float32), and back. */
static inline void row_in(ct_dtype t, const void *p, size_t off, float *dst, int n) {
  if (t == CT_F32) {
    memcpy(dst, (const float *)p + off, (size_t)n * sizeof *dst);
    return;
  }
  const uint16_t *src = (const uint16_t *)p + off;
  for (int i = 0; i < n; i++) dst[i] = ct_bf16_to_f32(src[i]);
}
static inline void row_out(ct_dtype t, void *p, size_t off, const float *src, int n) {
  if (t == CT_F32) {
    memcpy((float *)p + off, src, (size_t)n * sizeof *src);
    return;
  }
  uint16_t *dst = (uint16_t *)p + off;
  for (int i = 0; i < n; i++) dst[i] = ct_f32_to_bf16(src[i]);
}

static void job_init(job *j, const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type) {
  CT_ASSERT(type == CT_F32 || type == CT_BF16);
  memset(j, 0, sizeof *j);
  j->g = g;
  j->w = w;
  j->type = type;
  j->pw8 = (g->PW + 7) / 8 * 8;
  const int sw = g->sw, need_in = (g->W + 2 * g->pw + sw - 1) / sw;
  const int need_win = j->pw8 + (g->kw - 1) / sw; /* the last group of eight's reach */
  j->q = need_in > need_win ? need_in : need_win;
  j->stride = sw * j->q;
  j->koff = ct_xcalloc((size_t)g->kw, sizeof *j->koff);
  for (int k = 0; k < g->kw; k++) j->koff[k] = (k % sw) * j->q + k / sw;
}

/* A thread's scratch: the laid-out plane, one padded row, and three rows
 * of pw8 values (the caller's use). */
typedef struct scratch {
  float *rows, *tmp, *a, *b, *c;
} scratch;

static scratch scratch_new(const job *j) {
  const size_t plane = (size_t)j->g->H * j->stride;
  float *p = ct_xcalloc(plane + (size_t)j->stride + 3 * (size_t)j->pw8, sizeof(float));
  return (scratch){p, p + plane, p + plane + j->stride, p + plane + j->stride + j->pw8,
                   p + plane + j->stride + 2 * (size_t)j->pw8};
}

/* The plane of x at offset xoff into s->rows in phase layout, pads = fill.
 * Each row is padded into s->tmp, then split into phases; stride 2, the
 * common one, splits sixteen values at a time. */
static void lay_out(const job *j, const scratch *s, size_t xoff, float fill) {
  const ct_pool_geom *g = j->g;
  const int W = g->W, sw = g->sw, pad = g->pw, q = j->q, n = j->stride;
  float *tmp = s->tmp;
  for (int i = 0; i < pad; i++) tmp[i] = fill;
  for (int i = pad + W; i < n; i++) tmp[i] = fill;
  for (int h = 0; h < g->H; h++) {
    float *restrict r = s->rows + (size_t)h * n;
    row_in(j->type, j->x, xoff + (size_t)h * W, tmp + pad, W);
    int i = 0;
    if (sw == 1) {
      memcpy(r, tmp, (size_t)n * sizeof *r);
      continue;
    }
    if (sw == 2)
      for (; i + 8 <= q; i += 8) {
        const v8f a = load8(tmp + 2 * i), b = load8(tmp + 2 * i + 8);
        store8(r + i, SHUFFLE8(a, b, 0, 2, 4, 6, 8, 10, 12, 14));
        store8(r + q + i, SHUFFLE8(a, b, 1, 3, 5, 7, 9, 11, 13, 15));
      }
    for (int ph = 0; ph < sw; ph++)
      for (int k = i; k < q; k++) r[(size_t)ph * q + k] = tmp[(size_t)k * sw + ph];
  }
}

/* The inverse for AVE's backward: laid-out row r (padded columns) into the
 * input row of dx at offset off (W values), through s->tmp. */
static void lay_back(const job *j, const scratch *s, const float *r, size_t off) {
  const ct_pool_geom *g = j->g;
  const int sw = g->sw, q = j->q;
  float *tmp = s->tmp;
  int i = 0;
  if (sw == 1) {
    row_out(j->type, j->dx, off, r + g->pw, g->W);
    return;
  }
  if (sw == 2)
    for (; i + 8 <= q; i += 8) {
      const v8f a = load8(r + i), b = load8(r + q + i);
      store8(tmp + 2 * i, SHUFFLE8(a, b, 0, 8, 1, 9, 2, 10, 3, 11));
      store8(tmp + 2 * i + 8, SHUFFLE8(a, b, 4, 12, 5, 13, 6, 14, 7, 15));
    }
  for (int ph = 0; ph < sw; ph++)
    for (int k = i; k < q; k++) tmp[(size_t)k * sw + ph] = r[(size_t)ph * q + k];
  row_out(j->type, j->dx, off, tmp + g->pw, g->W);
}

/* Stores eight results at out[pw], or the part below PW through a row. */
static inline void store_part(float *out, int pw, int PW, v8f v, float *spare) {
  if (pw + 8 <= PW) {
    store8(out + pw, v);
    return;
  }
  store8(spare, v);
  memcpy(out + pw, spare, (size_t)(PW - pw) * sizeof *out);
}

/* The same into the row of y (of the job's type) that starts at off. */
static inline void store_y(const job *j, size_t off, int pw, int PW, v8f v, float *spare) {
  if (j->type == CT_F32) {
    store_part((float *)j->y + off, pw, PW, v, spare);
    return;
  }
  store8(spare, v);
  row_out(j->type, j->y, off + pw, spare, PW - pw < 8 ? PW - pw : 8);
}

/* Planes per thread range: at least ~16K input values of work. */
static size_t min_planes(const ct_pool_geom *g) {
  const size_t plane = (size_t)g->H * g->W;
  return plane >= 16384 ? 1 : 16384 / (plane ? plane : 1);
}

/* ---------------------------------------------------------------- MAX */

static void max_planes(void *arg, size_t begin, size_t end) {
  const job *j = arg;
  const ct_pool_geom *g = j->g;
  const int PW = g->PW, n = j->stride;
  scratch s = scratch_new(j);
  float *col = s.a; /* column of output pw in the plane, before the kernel offset */
  for (int pw = 0; pw < j->pw8; pw++) col[pw] = (float)(pw * g->sw);
  for (size_t nc = begin; nc < end; nc++) {
    lay_out(j, &s, nc * g->H * g->W, -INFINITY);
    for (int ph = 0; ph < g->PH; ph++) {
      const size_t yr = (nc * g->PH + ph) * PW;
      float *mr = j->mask + yr;
      const int h0 = j->w->hlo[ph], h1 = j->w->hhi[ph];
      for (int pw = 0; pw < PW; pw += 8) {
        v8f y = splat8(-FLT_MAX), m = splat8(-1.0f);
        const v8f c = load8(col + pw);
        for (int h = h0; h < h1; h++) {
          const float *r = s.rows + (size_t)h * n + pw;
          for (int k = 0; k < g->kw; k++) {
            const v8f v = load8(r + j->koff[k]);
            const v8i gt = v > y;
            y = select8(gt, v, y);
            m = select8(gt, splat8((float)(h * g->W + k - g->pw)) + c, m);
          }
        }
        store_y(j, yr, pw, PW, y, s.b);
        store_part(mr, pw, PW, m, s.b);
      }
    }
  }
  free(s.rows);
}

void ct_pool_max_forward_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                             const void *x, void *y, float *mask) {
  job j;
  job_init(&j, g, w, type);
  j.x = x;
  j.y = y;
  j.mask = mask;
  ct_parallel_for((size_t)g->N * g->C, min_planes(g), max_planes, &j);
  free(j.koff);
}

/* ---------------------------------------------------------------- AVE */

static void ave_planes(void *arg, size_t begin, size_t end) {
  const job *j = arg;
  const ct_pool_geom *g = j->g;
  const int PW = g->PW, n = j->stride;
  scratch s = scratch_new(j);
  float *wext = s.a;
  for (int pw = 0; pw < PW; pw++) wext[pw] = (float)j->w->wext[pw];
  for (size_t nc = begin; nc < end; nc++) {
    lay_out(j, &s, nc * g->H * g->W, 0.0f);
    for (int ph = 0; ph < g->PH; ph++) {
      const size_t yr = (nc * g->PH + ph) * PW;
      const int h0 = j->w->hlo[ph], h1 = j->w->hhi[ph];
      const v8f hext = splat8((float)j->w->hext[ph]);
      for (int pw = 0; pw < PW; pw += 8) {
        v8f sum = splat8(0.0f);
        for (int h = h0; h < h1; h++) {
          const float *r = s.rows + (size_t)h * n + pw;
          for (int k = 0; k < g->kw; k++) sum += load8(r + j->koff[k]);
        }
        const v8f size = hext * load8(wext + pw);
        store_y(j, yr, pw, PW, select8(size > splat8(0.0f), sum / size, splat8(0.0f)), s.b);
      }
    }
  }
  free(s.rows);
}

void ct_pool_ave_forward_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                             const void *x, void *y) {
  job j;
  job_init(&j, g, w, type);
  j.x = x;
  j.y = y;
  ct_parallel_for((size_t)g->N * g->C, min_planes(g), ave_planes, &j);
  free(j.koff);
}

static void ave_back_planes(void *arg, size_t begin, size_t end) {
  const job *j = arg;
  const ct_pool_geom *g = j->g;
  const int PW = g->PW, n = j->stride;
  scratch s = scratch_new(j);
  float *d = s.a;    /* dy / size of a row of outputs, zero past PW */
  float *wext = s.b; /* (PW) window columns, as float */
  for (int pw = 0; pw < PW; pw++) wext[pw] = (float)j->w->wext[pw];
  const int PW_full = PW / 8 * 8;
  for (size_t nc = begin; nc < end; nc++) {
    memset(s.rows, 0, (size_t)g->H * n * sizeof *s.rows);
    for (int ph = 0; ph < g->PH; ph++) {
      float *dyr = s.c; /* the row of dy in float32 */
      row_in(j->type, j->dy, (nc * g->PH + ph) * PW, dyr, PW);
      const v8f hext = splat8((float)j->w->hext[ph]);
      for (int pw = 0; pw < PW_full; pw += 8) {
        const v8f size = hext * load8(wext + pw);
        store8(d + pw, select8(size > splat8(0.0f), load8(dyr + pw) / size, splat8(0.0f)));
      }
      for (int pw = PW_full; pw < PW; pw++) {
        const int size = j->w->hext[ph] * j->w->wext[pw];
        d[pw] = size > 0 ? dyr[pw] / (float)size : 0.0f;
      }
      for (int h = j->w->hlo[ph]; h < j->w->hhi[ph]; h++)
        for (int k = 0; k < g->kw; k++) {
          float *r = s.rows + (size_t)h * n + j->koff[k];
          for (int pw = 0; pw < PW; pw += 8) store8(r + pw, load8(r + pw) + load8(d + pw));
        }
    }
    for (int h = 0; h < g->H; h++)
      lay_back(j, &s, s.rows + (size_t)h * n, (nc * g->H + h) * g->W);
  }
  free(s.rows);
}

void ct_pool_ave_backward_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                              const void *dy, void *dx) {
  job j;
  job_init(&j, g, w, type);
  j.dy = dy;
  j.dx = dx;
  ct_parallel_for((size_t)g->N * g->C, min_planes(g), ave_back_planes, &j);
  free(j.koff);
}

/* ---------------------------------------------------------------- scatter */

/* bfloat16: each plane's sums in float32 scratch, rounded once. */
static void scatter_planes(void *arg, size_t begin, size_t end) {
  const job *j = arg;
  const ct_pool_geom *g = j->g;
  const size_t plane_in = (size_t)g->H * g->W, plane_out = (size_t)g->PH * g->PW;
  const bool f32 = j->type == CT_F32;
  float *acc = f32 ? NULL : ct_xcalloc(plane_in + plane_out, sizeof *acc);
  for (size_t nc = begin; nc < end; nc++) {
    float *dx = f32 ? (float *)j->dx + nc * plane_in : acc;
    const float *dy = f32 ? (const float *)j->dy + nc * plane_out : acc + plane_in;
    const float *idx = j->idx + nc * plane_out;
    if (!f32) row_in(j->type, j->dy, nc * plane_out, acc + plane_in, (int)plane_out);
    memset(dx, 0, plane_in * sizeof *dx);
    for (size_t o = 0; o < plane_out; o++)
      if (idx[o] >= 0) dx[(size_t)idx[o]] += dy[o];
    if (!f32) row_out(j->type, j->dx, nc * plane_in, acc, (int)plane_in);
  }
  free(acc);
}

void ct_pool_scatter_backward_cpu(const ct_pool_geom *g, ct_dtype type, const void *dy,
                                  const float *idx, void *dx) {
  CT_ASSERT(type == CT_F32 || type == CT_BF16);
  job j = {.g = g, .type = type, .dy = dy, .idx = idx, .dx = dx};
  ct_parallel_for((size_t)g->N * g->C, min_planes(g), scatter_planes, &j);
}
