/* Direct AVX2 kernels for convolutions over few input channels
 * (conv_direct.h).  Glossary: C input (X) channels, K output (Y) channels,
 * KH x KW kernel, OH x OW output, OW8 = OW rounded up to 8.
 *
 * Every image is first copied into a zero-padded plane per channel,
 * (Hp = OH + KH - 1) x (Wp = OW8 + KW - 1), so a tap (kh, kw) of eight
 * neighbouring outputs is one unaligned load and no bounds are tested.
 *
 * Forward, for each image, block of OB output channels, output row and group
 * of V vectors of 8 columns: OB x V accumulators start at the bias, and each
 * tap adds its broadcast weight times the shifted input row.
 *
 * Backward weights, for each image, block of OB output channels, input
 * channel and kernel row kh: OB x KW accumulators (8 partial sums each) add
 * dY row x input row shifted by kw over the output rows; they live in a
 * per-range table between images and are summed at the end. */
#include "layers/conv/conv_direct.h"

#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#define DIRECT_MAX_C 4
#define DIRECT_MAX_KW 12
#define DIRECT_MAX_ACC ((size_t)1 << 14) /* weight-gradient vectors per range */

typedef struct dgeom {
  int num, C, K, H, W, OH, OW, KH, KW, ph, pw;
  int OW8, Hp, Wp;
} dgeom;

static dgeom geom_of(const ct_conv *c) {
  const ct_im2col_geom *g = &c->geom;
  dgeom d = {c->num,     c->x_channels, c->y_channels, g->in[0],  g->in[1], g->out[0],
             g->out[1],  g->kernel[0],  g->kernel[1],  g->pad[0], g->pad[1]};
  d.OW8 = (d.OW + 7) / 8 * 8;
  d.Hp = d.OH + d.KH - 1;
  d.Wp = d.OW8 + d.KW - 1;
  return d;
}

bool ct_conv_direct_fits(const ct_conv *c) {
  if (c->nspatial != 2 || c->group != 1 || c->x_channels > DIRECT_MAX_C) return false;
  const ct_im2col_geom *g = &c->geom;
  for (int i = 0; i < 2; i++)
    if (g->stride[i] != 1 || g->dilation[i] != 1) return false;
  return g->kernel[1] <= DIRECT_MAX_KW &&
         (size_t)c->y_channels * c->x_channels * g->kernel[0] * g->kernel[1] <= DIRECT_MAX_ACC;
}

/* An unaligned load kept in a register: without the barrier the compiler
 * folds the load into every FMA that uses it, and the kernels become bound
 * by loads instead of FMAs. */
static inline __m256 load_reg(const float *p) {
  __m256 v = _mm256_loadu_ps(p);
  __asm__("" : "+x"(v));
  return v;
}

static size_t padded_count(const dgeom *d) { return (size_t)d->C * d->Hp * d->Wp; }

/* Image xi (C, H, W) into xp (C, Hp, Wp), zero around it.  With stride 1,
 * Hp = H + 2 ph and Wp >= W + 2 pw. */
static void pad_image(const dgeom *d, const float *xi, float *xp) {
  memset(xp, 0, padded_count(d) * sizeof *xp);
  for (int ic = 0; ic < d->C; ic++)
    for (int ih = 0; ih < d->H; ih++)
      memcpy(xp + ((size_t)ic * d->Hp + ih + d->ph) * d->Wp + d->pw,
             xi + ((size_t)ic * d->H + ih) * d->W, (size_t)d->W * sizeof *xp);
}

/* ---------------------------------------------------------------- forward */

typedef struct fwd_job {
  dgeom d;
  const float *w, *bias, *x;
  float *y;
} fwd_job;

/* OB channels from oc0 x V vectors from column col0 of output row oh. */
static inline __attribute__((always_inline)) void fwd_tile(const fwd_job *j, const float *xp,
                                                           float *yi, int oc0, int oh, int col0,
                                                           const int OB, const int V,
                                                           float *spare) {
  const dgeom *d = &j->d;
  const size_t wstride = (size_t)d->C * d->KH * d->KW; /* one output channel's weights */
  __m256 acc[4][4];
  for (int o = 0; o < OB; o++)
    for (int v = 0; v < V; v++)
      acc[o][v] = j->bias ? _mm256_set1_ps(j->bias[oc0 + o]) : _mm256_setzero_ps();
  /* Per tap: V loads and OB broadcasts feed OB x V FMAs. */
  for (int ic = 0; ic < d->C; ic++)
    for (int kh = 0; kh < d->KH; kh++) {
      const float *xr = xp + ((size_t)ic * d->Hp + oh + kh) * d->Wp + col0;
      const float *wr = j->w + (size_t)oc0 * wstride + ((size_t)ic * d->KH + kh) * d->KW;
#pragma GCC unroll 4
      for (int kw = 0; kw < d->KW; kw++) {
        __m256 wb[4];
        for (int o = 0; o < OB; o++) wb[o] = _mm256_broadcast_ss(wr + o * wstride + kw);
        for (int v = 0; v < V; v++) {
          const __m256 xv = load_reg(xr + kw + 8 * v);
          for (int o = 0; o < OB; o++) acc[o][v] = _mm256_fmadd_ps(wb[o], xv, acc[o][v]);
        }
      }
    }
  const int n = d->OW - col0 < 8 * V ? d->OW - col0 : 8 * V;
  for (int o = 0; o < OB; o++) {
    float *yr = yi + ((size_t)(oc0 + o) * d->OH + oh) * d->OW + col0;
    if (n == 8 * V) {
      for (int v = 0; v < V; v++) _mm256_storeu_ps(yr + 8 * v, acc[o][v]);
    } else {
      for (int v = 0; v < V; v++) _mm256_storeu_ps(spare + 8 * v, acc[o][v]);
      memcpy(yr, spare, (size_t)n * sizeof *yr);
    }
  }
}

#define FWD_CASE(OB_, V_)                                      \
  case (OB_) * 8 + (V_):                                       \
    fwd_tile(j, xp, yi, oc0, oh, col0, OB_, V_, spare);        \
    break;

static void fwd_images(void *arg, size_t begin, size_t end) {
  const fwd_job *j = arg;
  const dgeom *d = &j->d;
  float *xp = malloc((padded_count(d) + 32) * sizeof *xp), *spare = xp + padded_count(d);
  CT_ASSERT(xp != NULL);
  for (size_t n = begin; n < end; n++) {
    pad_image(d, j->x + n * d->C * d->H * d->W, xp);
    float *yi = j->y + n * d->K * d->OH * d->OW;
    for (int col0 = 0; col0 < d->OW; col0 += 32) {
      const int V = (d->OW8 - col0) / 8 < 4 ? (d->OW8 - col0) / 8 : 4;
      const int OBmax = V >= 3 ? 3 : 4; /* OB x V + OB + 1 registers <= 16 */
      for (int oc0 = 0; oc0 < d->K; oc0 += OBmax) {
        const int OB = d->K - oc0 < OBmax ? d->K - oc0 : OBmax;
        for (int oh = 0; oh < d->OH; oh++) switch (OB * 8 + V) {
            FWD_CASE(1, 1) FWD_CASE(1, 2) FWD_CASE(1, 3) FWD_CASE(1, 4)
            FWD_CASE(2, 1) FWD_CASE(2, 2) FWD_CASE(2, 3) FWD_CASE(2, 4)
            FWD_CASE(3, 1) FWD_CASE(3, 2) FWD_CASE(3, 3) FWD_CASE(3, 4)
            FWD_CASE(4, 1) FWD_CASE(4, 2) FWD_CASE(4, 3)
            default: CT_ASSERT(!"no forward tile");
          }
      }
    }
  }
  free(xp);
}

void ct_conv_direct_forward(const ct_conv *c, const float *w, const float *bias, const float *x,
                            float *y) {
  fwd_job j = {geom_of(c), w, bias, x, y};
  ct_parallel_for((size_t)j.d.num, 1, fwd_images, &j);
}

/* ---------------------------------------------------------------- weights */

typedef struct wgrad_job {
  dgeom d;
  const float *x, *dy;
  int nranges;
  size_t nw;      /* K * C * KH * KW */
  float *partial; /* (nranges, nw + K) sums of each range, in range order */
} wgrad_job;

/* acc (the table's (oc0, ic, kh) rows, KW vectors per channel) += the
 * correlation of OB dY planes with input row kh of channel ic. */
static inline __attribute__((always_inline)) void wgrad_tile(const dgeom *d, const float *xp,
                                                             const float *dyi, int oc0, int ic,
                                                             int kh, const int OB, const int KW,
                                                             __m256 *table) {
  const size_t cstride = (size_t)d->C * d->KH * KW; /* vectors per output channel */
  __m256 *rows[2];
  __m256 acc[2][DIRECT_MAX_KW];
  for (int o = 0; o < OB; o++) {
    rows[o] = table + (size_t)(oc0 + o) * cstride + ((size_t)ic * d->KH + kh) * KW;
    for (int k = 0; k < KW; k++) acc[o][k] = rows[o][k];
  }
  for (int oh = 0; oh < d->OH; oh++) {
    const float *xr = xp + ((size_t)ic * d->Hp + oh + kh) * d->Wp;
    const float *dr[2];
    for (int o = 0; o < OB; o++) dr[o] = dyi + ((size_t)(oc0 + o) * d->OH + oh) * d->OW8;
    for (int c = 0; c < d->OW8; c += 8) {
      __m256 dv[2];
      for (int o = 0; o < OB; o++) dv[o] = load_reg(dr[o] + c);
      for (int k = 0; k < KW; k++) {
        const __m256 xv = load_reg(xr + c + k);
        for (int o = 0; o < OB; o++) acc[o][k] = _mm256_fmadd_ps(dv[o], xv, acc[o][k]);
      }
    }
  }
  for (int o = 0; o < OB; o++)
    for (int k = 0; k < KW; k++) rows[o][k] = acc[o][k];
}

#define WG_CASE(OB_, KW_)                                             \
  case (OB_) * 16 + (KW_):                                            \
    wgrad_tile(d, xp, dyi, oc0, ic, kh, OB_, KW_, table);             \
    break;
#define WG_CASES(OB_)                                                                    \
  WG_CASE(OB_, 1) WG_CASE(OB_, 2) WG_CASE(OB_, 3) WG_CASE(OB_, 4) WG_CASE(OB_, 5)        \
  WG_CASE(OB_, 6)

static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static void wgrad_ranges(void *arg, size_t begin, size_t end) {
  const wgrad_job *j = arg;
  const dgeom *d = &j->d;
  const size_t plane_out = (size_t)d->OH * d->OW, plane8 = (size_t)d->OH * d->OW8;
  const bool pad_dy = d->OW8 != d->OW;
  float *xp = malloc((padded_count(d) + (pad_dy ? d->K * plane8 : 0)) * sizeof *xp);
  __m256 *table = _mm_malloc((j->nw + (size_t)d->K) * sizeof *table, 32), *btable = table + j->nw;
  CT_ASSERT(xp != NULL && table != NULL);
  float *dyp = xp + padded_count(d);
  if (pad_dy) memset(dyp, 0, d->K * plane8 * sizeof *dyp);
  for (size_t r = begin; r < end; r++) {
    memset(table, 0, (j->nw + (size_t)d->K) * sizeof *table);
    const size_t n0 = (size_t)d->num * r / j->nranges, n1 = (size_t)d->num * (r + 1) / j->nranges;
    for (size_t n = n0; n < n1; n++) {
      pad_image(d, j->x + n * d->C * d->H * d->W, xp);
      const float *dyi = j->dy + n * d->K * plane_out;
      if (pad_dy) {
        for (size_t row = 0; row < (size_t)d->K * d->OH; row++)
          memcpy(dyp + row * d->OW8, dyi + row * d->OW, (size_t)d->OW * sizeof *dyp);
        dyi = dyp;
      }
      for (int oc = 0; oc < d->K; oc++) {
        __m256 s = btable[oc];
        const float *p = dyi + (size_t)oc * plane8;
        for (size_t i = 0; i < plane8; i += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(p + i));
        btable[oc] = s;
      }
      const int OBmax = d->KW <= 6 ? 2 : 1; /* OB x KW + OB + 1 registers <= 16 */
      for (int oc0 = 0; oc0 < d->K; oc0 += OBmax) {
        const int OB = d->K - oc0 < OBmax ? d->K - oc0 : OBmax;
        for (int ic = 0; ic < d->C; ic++)
          for (int kh = 0; kh < d->KH; kh++) switch (OB * 16 + d->KW) {
              WG_CASES(1) WG_CASES(2)
              WG_CASE(1, 7) WG_CASE(1, 8) WG_CASE(1, 9) WG_CASE(1, 10) WG_CASE(1, 11)
              WG_CASE(1, 12)
              default: CT_ASSERT(!"no weight-gradient tile");
            }
      }
    }
    float *out = j->partial + r * (j->nw + (size_t)d->K);
    for (size_t i = 0; i < j->nw + (size_t)d->K; i++) out[i] = hsum(table[i]);
  }
  _mm_free(table);
  free(xp);
}

void ct_conv_direct_weight_grad(const ct_conv *c, const float *x, const float *dy, float *dw,
                                float *dbias) {
  wgrad_job j = {.d = geom_of(c), .x = x, .dy = dy};
  j.nranges = ct_parallel_threads() < j.d.num ? ct_parallel_threads() : j.d.num;
  if (j.nranges < 1) j.nranges = 1;
  j.nw = (size_t)j.d.K * j.d.C * j.d.KH * j.d.KW;
  j.partial = malloc((size_t)j.nranges * (j.nw + (size_t)j.d.K) * sizeof *j.partial);
  CT_ASSERT(j.partial != NULL);
  ct_parallel_for((size_t)j.nranges, 1, wgrad_ranges, &j);
  for (int r = 0; r < j.nranges; r++) {
    const float *p = j.partial + (size_t)r * (j.nw + (size_t)j.d.K);
    if (dw)
      for (size_t i = 0; i < j.nw; i++) dw[i] += p[i];
    if (dbias)
      for (int i = 0; i < j.d.K; i++) dbias[i] += p[j.nw + (size_t)i];
  }
  free(j.partial);
}

#else /* no AVX2 + FMA: the oneDNN engine keeps these passes */

bool ct_conv_direct_fits(const ct_conv *c) { return false; }

void ct_conv_direct_forward(const ct_conv *c, const float *w, const float *bias, const float *x,
                            float *y) {
  CT_ASSERT(!"direct convolution kernels are not built for this target");
}

void ct_conv_direct_weight_grad(const ct_conv *c, const float *x, const float *dy, float *dw,
                                float *dbias) {
  CT_ASSERT(!"direct convolution kernels are not built for this target");
}

#endif
