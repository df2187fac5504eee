/* Host MAX and AVE pooling over channels-last (N, H, W, C) tensors
 * (pooling_cpu.h), the order of a bfloat16 net's convolutions on the host.
 *
 * The C channels of a pixel are contiguous, so every window position is one
 * run of C values and the channel loop is the vector loop: an output pixel's
 * C accumulators sit in a float32 row of the thread's scratch while the
 * window is walked in Caffe's (h, w) order (MAX keeps the first maximum,
 * strict >), then the row is written out, rounded once.  Forward spreads
 * output rows (image, ph) over the threads; backward spreads images, since
 * the windows of neighbouring rows overlap.  Backward adds into a float32
 * image of the gradient (for bfloat16, one rounding at the end).  MAX's
 * argmax per output value, in the top's own (channels-last) order, is as
 * the GPU's typed kernels keep it (pooling.h): a byte, the maximum's place
 * in its window (255: none), for windows of at most 255 positions (a
 * quarter of a float index's memory traffic), else its input pixel
 * h W + w as a float. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/parallel.h"
#include "core/status.h"
#include "layers/pooling_cpu.h"

/* AVX-512 (with its byte and word lanes) where the build's target has it
 * (CORTADO_NATIVE: -march=native): MAX forward with byte argmaxes. */
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define CT_POOL_AVX512 1
#else
#define CT_POOL_AVX512 0
#endif

typedef struct nhwc_job {
  const ct_pool_geom *g;
  const ct_pool_windows *w;
  ct_dtype type; /* of x, y, dy and dx */
  const void *x, *dy;
  void *y, *dx;
  void *idx;         /* MAX's argmax: bytes or floats (ct_pool_typed_arg_bytes) */
  bool byte_args;
} nhwc_job;

/* c values of pixel p of an image, as float32, into dst (inlined loops:
 * math/typed.h's ct_cpu_convert opens an OpenMP region per call, which
 * made pool1 of cifar10_quick eight times slower called per pixel). */
static inline void pixel_in(ct_dtype t, const void *base, size_t p, int c, float *restrict dst) {
  if (t == CT_F32) {
    memcpy(dst, (const float *)base + p * (size_t)c, (size_t)c * sizeof *dst);
    return;
  }
  const uint16_t *restrict src = (const uint16_t *)base + p * (size_t)c;
  for (int i = 0; i < c; i++) dst[i] = ct_bf16_to_f32(src[i]);
}

static inline void pixel_out(ct_dtype t, void *base, size_t p, int c, const float *restrict src) {
  if (t == CT_F32) {
    memcpy((float *)base + p * (size_t)c, src, (size_t)c * sizeof *src);
    return;
  }
  uint16_t *restrict dst = (uint16_t *)base + p * (size_t)c;
  for (int i = 0; i < c; i++) dst[i] = ct_f32_to_bf16(src[i]);
}

/* Output rows (image n, row ph) at least ~16K input values of work each. */
static size_t min_rows(const ct_pool_geom *g) {
  const size_t row = (size_t)g->kh * g->W * g->C;
  return row >= 16384 ? 1 : 16384 / (row ? row : 1);
}

/* ---------------------------------------------------------------- forward */

/* Walks one window over pixels of type T (CONV to float32) from channel
 * c0, keeping each of the NC channels' maximum in M[k] and its place in
 * A[k] (Caffe's (h, w) order, the first maximum: strict >). */
#define WALK_WINDOW(T, CONV, NC, M, A, c0)                                          \
  do {                                                                              \
    const T *restrict xi = (const T *)j->x + n * (size_t)g->H * g->W * C + (c0);    \
    for (int h = h0; h < h1; h++)                                                   \
      for (int w = j->w->wlo[pw]; w < j->w->whi[pw]; w++) {                         \
        const float here = j->byte_args ? (float)((h - hs) * g->kw + (w - ws))      \
                                        : (float)(h * g->W + w);                    \
        const T *restrict px = xi + ((size_t)h * g->W + w) * C;                     \
        for (int k = 0; k < (NC); k++) {                                            \
          const float v = CONV(px[k]);                                              \
          const bool gt = v > (M)[k];                                               \
          (M)[k] = gt ? v : (M)[k];                                                 \
          (A)[k] = gt ? here : (A)[k];                                              \
        }                                                                           \
      }                                                                             \
  } while (0)
/* The same for channels [c0, c0 + CB), CB a constant (one vector): the
 * running maxima and places stay in registers, then go to acc and arg_. */
#define MAX_BLOCK(T, CONV, CB)                                                      \
  do {                                                                              \
    float m_[CB], a_[CB];                                                           \
    for (int k = 0; k < CB; k++) m_[k] = -FLT_MAX, a_[k] = -1.0f;                   \
    WALK_WINDOW(T, CONV, CB, m_, a_, c0);                                           \
    for (int k = 0; k < CB; k++) acc[c0 + k] = m_[k], arg_[c0 + k] = a_[k];         \
  } while (0)
#define AS_FLOAT(v) (v)

/* Blocks of CB channels over all C, the last one ending at C (it may cover
 * channels of the block before again, which gives the same values). */
#define MAX_BLOCKS(CB)                                                              \
  for (int b = 0; b < C; b += CB) {                                                 \
    const int c0 = b + CB <= C ? b : C - CB;                                        \
    if (j->type == CT_F32) MAX_BLOCK(float, AS_FLOAT, CB);                          \
    else MAX_BLOCK(uint16_t, ct_bf16_to_f32, CB);                                   \
  }

/* A window's maxima for every channel.  The plain loop over the channels
 * vectorises for 32 and more (cifar10_quick's 32: one pass over the window,
 * the maxima in L1; blocks of 32 in registers ran pool1 slower), but the
 * compiler leaves it scalar for LeNet's 20: from 16 to 31 channels, blocks
 * of 16 (pool1 1.9 ms -> 0.4). */
static inline void max_window(const nhwc_job *j, size_t n, int h0, int h1, int hs, int pw, int ws,
                              float *restrict acc, float *restrict arg_) {
  const ct_pool_geom *g = j->g;
  const int C = g->C;
  if (C >= 16 && C < 32) {
    MAX_BLOCKS(16);
    return;
  }
  for (int c = 0; c < C; c++) acc[c] = -FLT_MAX, arg_[c] = -1.0f;
  if (j->type == CT_F32) WALK_WINDOW(float, AS_FLOAT, C, acc, arg_, 0);
  else WALK_WINDOW(uint16_t, ct_bf16_to_f32, C, acc, arg_, 0);
}

static void max_rows(void *arg, size_t begin, size_t end) {
  const nhwc_job *j = arg;
  const ct_pool_geom *g = j->g;
  const int C = g->C;
  float *const buf = ct_xcalloc(2 * (size_t)C, sizeof *buf);
  float *restrict acc = buf, *restrict arg_ = buf + C;
  for (size_t r = begin; r < end; r++) {
    const size_t n = r / g->PH;
    const int ph = (int)(r % g->PH);
    const int h0 = j->w->hlo[ph], h1 = j->w->hhi[ph], hs = ph * g->sh - g->ph;
    for (int pw = 0; pw < g->PW; pw++) {
      const int ws = pw * g->sw - g->pw;
      max_window(j, n, h0, h1, hs, pw, ws, acc, arg_);
      const size_t o = (n * g->PH + ph) * g->PW + pw;
      pixel_out(j->type, j->y, o, C, acc);
      if (j->byte_args) {
        uint8_t *restrict m = (uint8_t *)j->idx + o * C;
        for (int c = 0; c < C; c++) m[c] = (uint8_t)(int)arg_[c]; /* -1: 255 */
      } else {
        memcpy((float *)j->idx + o * C, arg_, (size_t)C * sizeof *arg_);
      }
    }
  }
  free(buf);
}

#if CT_POOL_AVX512
/* 16 channels' values of type t at p (lanes outside m read as 0) as float32. */
static inline __m512 load16(ct_dtype t, const void *p, __mmask16 m) {
  if (t == CT_F32) return _mm512_maskz_loadu_ps(m, p);
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* v into 16 channels of type t at p (lanes in m), rounded as
 * ct_f32_to_bf16 rounds (to nearest even, NaN kept quiet; the instruction
 * VCVTNEPS2BF16 would flush subnormals). */
static inline void store16(ct_dtype t, void *p, __mmask16 m, __m512 v) {
  if (t == CT_F32) {
    _mm512_mask_storeu_ps(p, m, v);
    return;
  }
  const __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
  const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
  _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(r));
}

static inline __mmask16 lanes(int C, int c0) {
  return C - c0 >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (C - c0)) - 1);
}

/* max_rows for byte argmaxes, 16 channels a vector (the last block masked):
 * the running maxima and places stay in registers for the whole window.
 * The same results bit for bit (strict >, the same start, the same
 * rounding). */
static void max_rows_avx512(void *arg, size_t begin, size_t end) {
  const nhwc_job *j = arg;
  const ct_pool_geom *g = j->g;
  const int C = g->C;
  const bool f32 = j->type == CT_F32;
  const size_t es = f32 ? sizeof(float) : sizeof(uint16_t);
  const char *const x = j->x;
  char *const y = j->y;
  uint8_t *const idx = j->idx;
  for (size_t r = begin; r < end; r++) {
    const size_t n = r / g->PH;
    const int ph = (int)(r % g->PH);
    const int h0 = j->w->hlo[ph], h1 = j->w->hhi[ph], hs = ph * g->sh - g->ph;
    for (int pw = 0; pw < g->PW; pw++) {
      const int ws = pw * g->sw - g->pw, w0 = j->w->wlo[pw], w1 = j->w->whi[pw];
      const size_t o = (n * g->PH + ph) * g->PW + pw;
      for (int c0 = 0; c0 < C; c0 += 16) {
        const __mmask16 m = lanes(C, c0);
        __m512 mx = _mm512_set1_ps(-FLT_MAX);
        __m128i at = _mm_set1_epi8((char)255);
        for (int h = h0; h < h1; h++) {
          const char *row = x + (((n * g->H + h) * g->W) * C + c0) * es;
          for (int w = w0; w < w1; w++) {
            const __m512 v = load16(j->type, row + (size_t)w * C * es, m);
            const __mmask16 gt = _mm512_cmp_ps_mask(v, mx, _CMP_GT_OQ);
            mx = _mm512_mask_mov_ps(mx, gt, v);
            at = _mm_mask_blend_epi8(gt, at, _mm_set1_epi8((char)((h - hs) * g->kw + (w - ws))));
          }
        }
        store16(j->type, y + (o * C + c0) * es, m, mx);
        _mm_mask_storeu_epi8(idx + o * C + c0, m, at);
      }
    }
  }
}
#endif

void ct_pool_max_forward_nhwc_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                                  const void *x, void *y, void *mask) {
  CT_ASSERT(type == CT_F32 || type == CT_BF16);
  nhwc_job j = {.g = g, .w = w, .type = type, .x = x, .y = y, .idx = mask,
               .byte_args = ct_pool_typed_arg_bytes(g) == 1};
#if CT_POOL_AVX512
  if (j.byte_args) {
    ct_parallel_for((size_t)g->N * g->PH, min_rows(g), max_rows_avx512, &j);
    return;
  }
#endif
  ct_parallel_for((size_t)g->N * g->PH, min_rows(g), max_rows, &j);
}

#define SUM_WINDOW(T, CONV)                                                         \
  do {                                                                              \
    const T *restrict xi = (const T *)j->x + n * (size_t)g->H * g->W * C;           \
    for (int h = h0; h < h1; h++)                                                   \
      for (int w = j->w->wlo[pw]; w < j->w->whi[pw]; w++) {                         \
        const T *restrict px = xi + ((size_t)h * g->W + w) * C;                     \
        for (int c = 0; c < C; c++) acc[c] += CONV(px[c]);                          \
      }                                                                             \
  } while (0)

static void ave_rows(void *arg, size_t begin, size_t end) {
  const nhwc_job *j = arg;
  const ct_pool_geom *g = j->g;
  const int C = g->C;
  float *restrict acc = ct_xcalloc((size_t)C, sizeof *acc);
  for (size_t r = begin; r < end; r++) {
    const size_t n = r / g->PH;
    const int ph = (int)(r % g->PH);
    const int h0 = j->w->hlo[ph], h1 = j->w->hhi[ph];
    for (int pw = 0; pw < g->PW; pw++) {
      memset(acc, 0, (size_t)C * sizeof *acc);
      if (j->type == CT_F32) SUM_WINDOW(float, AS_FLOAT);
      else SUM_WINDOW(uint16_t, ct_bf16_to_f32);
      const int size = j->w->hext[ph] * j->w->wext[pw];
      /* a division, as the NCHW kernel and Caffe do, not a product */
      for (int c = 0; c < C; c++) acc[c] = size > 0 ? acc[c] / (float)size : 0.0f;
      pixel_out(j->type, j->y, (n * g->PH + ph) * g->PW + pw, C, acc);
    }
  }
  free(acc);
}

void ct_pool_ave_forward_nhwc_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                                  const void *x, void *y) {
  CT_ASSERT(type == CT_F32 || type == CT_BF16);
  nhwc_job j = {.g = g, .w = w, .type = type, .x = x, .y = y};
  ct_parallel_for((size_t)g->N * g->PH, min_rows(g), ave_rows, &j);
}

/* ---------------------------------------------------------------- backward */

/* Images [begin, end): dx (overwritten) from dy, through a float32 image. */
static void back_images(void *arg, size_t begin, size_t end) {
  const nhwc_job *j = arg;
  const ct_pool_geom *g = j->g;
  const int C = g->C;
  const size_t in_px = (size_t)g->H * g->W, out_px = (size_t)g->PH * g->PW;
  const bool f32 = j->type == CT_F32;
  float *img = f32 ? NULL : ct_xcalloc(in_px * C, sizeof *img);
  float *d = ct_xcalloc((size_t)C, sizeof *d);
  /* a byte argmax's pixel from its window's corner: (code / kw) W + code % kw */
  long off[256] = {0};
  if (j->byte_args)
    for (int k = 0; k < g->kh * g->kw && k < 255; k++) off[k] = (long)(k / g->kw) * g->W + k % g->kw;
  for (size_t n = begin; n < end; n++) {
    float *dx = f32 ? (float *)j->dx + n * in_px * C : img;
    memset(dx, 0, in_px * C * sizeof *dx);
    for (size_t o = 0; o < out_px; o++) {
      pixel_in(j->type, j->dy, n * out_px + o, C, d);
      if (j->idx && j->byte_args) { /* MAX: to the place of each value in its window */
        const uint8_t *m = (const uint8_t *)j->idx + (n * out_px + o) * C;
        const int hs = (int)(o / g->PW) * g->sh - g->ph, ws = (int)(o % g->PW) * g->sw - g->pw;
        const long corner = (long)hs * g->W + ws; /* may lie in the padding: off[] brings it in */
        for (int c = 0; c < C; c++)
          if (m[c] != 255) dx[(size_t)(corner + off[m[c]]) * C + c] += d[c];
        continue;
      }
      if (j->idx) { /* MAX: to the pixel of each value */
        const float *idx = (const float *)j->idx + (n * out_px + o) * C;
        for (int c = 0; c < C; c++)
          if (idx[c] >= 0) dx[(size_t)idx[c] * C + c] += d[c];
        continue;
      }
      const int ph = (int)(o / g->PW), pw = (int)(o % g->PW);
      const int size = j->w->hext[ph] * j->w->wext[pw];
      for (int c = 0; c < C; c++) d[c] = size > 0 ? d[c] / (float)size : 0.0f;
      for (int h = j->w->hlo[ph]; h < j->w->hhi[ph]; h++)
        for (int w = j->w->wlo[pw]; w < j->w->whi[pw]; w++) {
          float *restrict p = dx + ((size_t)h * g->W + w) * C;
          for (int c = 0; c < C; c++) p[c] += d[c];
        }
    }
    if (!f32)
      for (size_t p = 0; p < in_px; p++) pixel_out(j->type, j->dx, n * in_px + p, C, img + p * C);
  }
  free(img);
  free(d);
}

void ct_pool_ave_backward_nhwc_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                                   const void *dy, void *dx) {
  CT_ASSERT(type == CT_F32 || type == CT_BF16);
  nhwc_job j = {.g = g, .w = w, .type = type, .dy = dy, .dx = dx};
  ct_parallel_for((size_t)g->N, 1, back_images, &j);
}


void ct_pool_scatter_backward_nhwc_cpu(const ct_pool_geom *g, ct_dtype type, const void *dy,
                                       const void *idx, void *dx) {
  CT_ASSERT(type == CT_F32 || type == CT_BF16);
  nhwc_job j = {.g = g, .type = type, .dy = dy, .dx = dx, .idx = (void *)idx,
               .byte_args = ct_pool_typed_arg_bytes(g) == 1};
  ct_parallel_for((size_t)g->N, 1, back_images, &j);
}
