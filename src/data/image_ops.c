/* Resizing and colour / layout conversions of 8-bit images, with OpenCV's
 * arithmetic where Caffe's results depend on it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/image.h"

/* OpenCV's fixed-point luma: weights 0.114, 0.587, 0.299 scaled by 2^14. */
static inline uint8_t bgr_to_gray(const uint8_t *p) {
  return (uint8_t)((p[0] * 1868 + p[1] * 9617 + p[2] * 4899 + (1 << 13)) >> 14);
}

void ct_image_to_gray(const ct_image *src, ct_image *dst) {
  ct_image_alloc(dst, src->h, src->w, 1);
  size_t n = (size_t)src->h * src->w;
  if (src->c == 1) {
    memcpy(dst->data, src->data, n);
    return;
  }
  CT_ASSERT(src->c == 3);
  for (size_t i = 0; i < n; i++) dst->data[i] = bgr_to_gray(src->data + 3 * i);
}

void ct_image_to_color(const ct_image *src, ct_image *dst) {
  ct_image_alloc(dst, src->h, src->w, 3);
  size_t n = (size_t)src->h * src->w;
  if (src->c == 3) {
    memcpy(dst->data, src->data, 3 * n);
    return;
  }
  CT_ASSERT(src->c == 1);
  for (size_t i = 0; i < n; i++)
    dst->data[3 * i] = dst->data[3 * i + 1] = dst->data[3 * i + 2] = src->data[i];
}

void ct_image_hwc_to_chw(const uint8_t *hwc, int h, int w, int c, uint8_t *chw) {
  size_t plane = (size_t)h * w;
  for (size_t i = 0; i < plane; i++)
    for (int k = 0; k < c; k++) chw[k * plane + i] = hwc[i * c + k];
}

void ct_image_chw_to_hwc(const uint8_t *chw, int h, int w, int c, uint8_t *hwc) {
  size_t plane = (size_t)h * w;
  for (size_t i = 0; i < plane; i++)
    for (int k = 0; k < c; k++) hwc[i * c + k] = chw[k * plane + i];
}

/* ----------------------------------------------------------------- resize */
#define COEF_BITS 11
#define COEF_ONE (1 << COEF_BITS)

/* For each destination index along one axis: the source index and the
 * weight of the next source pixel, as OpenCV computes them for
 * INTER_LINEAR (centres aligned, clamped at the borders). */
static void linear_table(int src_n, int dst_n, int *ofs, short *alpha) {
  double scale = (double)src_n / dst_n;
  for (int d = 0; d < dst_n; d++) {
    float f = (float)((d + 0.5) * scale - 0.5);
    int s = (int)floorf(f);
    f -= (float)s;
    if (s < 0) {
      f = 0;
      s = 0;
    }
    if (s >= src_n - 1) {
      f = 0;
      s = src_n - 1;
    }
    ofs[d] = s;
    short a0 = (short)lrintf((1.f - f) * COEF_ONE);
    alpha[2 * d] = a0;
    alpha[2 * d + 1] = (short)(COEF_ONE - a0);
  }
}

/* Exactly half the size in both directions: OpenCV switches to INTER_AREA,
 * the rounded mean of each 2x2 block. */
static void resize_half(const ct_image *src, ct_image *dst) {
  int c = src->c;
  size_t sstride = (size_t)src->w * c;
  for (int y = 0; y < dst->h; y++) {
    const uint8_t *r0 = src->data + (size_t)(2 * y) * sstride, *r1 = r0 + sstride;
    uint8_t *d = dst->data + (size_t)y * dst->w * c;
    for (int x = 0; x < dst->w; x++)
      for (int k = 0; k < c; k++) {
        size_t i = (size_t)(2 * x) * c + k;
        d[x * c + k] = (uint8_t)((r0[i] + r0[i + c] + r1[i] + r1[i + c] + 2) >> 2);
      }
  }
}

void ct_image_resize_bilinear(const ct_image *src, int new_h, int new_w, ct_image *dst) {
  CT_ASSERT(src != dst && new_h > 0 && new_w > 0 && src->h > 0 && src->w > 0);
  int c = src->c;
  ct_image_alloc(dst, new_h, new_w, c);
  if (new_h == src->h && new_w == src->w) {
    memcpy(dst->data, src->data, (size_t)new_h * new_w * c);
    return;
  }
  if (src->w == 2 * new_w && src->h == 2 * new_h) {
    resize_half(src, dst);
    return;
  }
  int *xofs = ct_xcalloc((size_t)new_w, sizeof *xofs);
  int *yofs = ct_xcalloc((size_t)new_h, sizeof *yofs);
  short *xa = ct_xcalloc((size_t)new_w * 2, sizeof *xa);
  short *ya = ct_xcalloc((size_t)new_h * 2, sizeof *ya);
  linear_table(src->w, new_w, xofs, xa);
  linear_table(src->h, new_h, yofs, ya);
  size_t row_n = (size_t)new_w * c;
  int *rows = ct_xcalloc(2 * row_n, sizeof *rows); /* the two horizontally resized source rows */
  int have[2] = {-1, -1};
  for (int y = 0; y < new_h; y++) {
    int sy[2] = {yofs[y], yofs[y] + 1 < src->h ? yofs[y] + 1 : src->h - 1};
    for (int r = 0; r < 2; r++) {
      if (have[r] == sy[r]) continue;
      if (r == 0 && have[1] == sy[0]) { /* reuse the previous lower row */
        memcpy(rows, rows + row_n, row_n * sizeof *rows);
        have[0] = sy[0];
        continue;
      }
      const uint8_t *s = src->data + (size_t)sy[r] * src->w * c;
      int *d = rows + r * row_n;
      for (int x = 0; x < new_w; x++) {
        int sx0 = xofs[x] * c, sx1 = (xofs[x] + 1 < src->w ? xofs[x] + 1 : xofs[x]) * c;
        for (int k = 0; k < c; k++)
          d[x * c + k] = s[sx0 + k] * xa[2 * x] + s[sx1 + k] * xa[2 * x + 1];
      }
      have[r] = sy[r];
    }
    /* OpenCV's vectorised vertical pass: 16-bit products of the rows
     * shifted right by 4 with the weights, high halves added, then
     * rounded down by 2 more bits. */
    int b0 = ya[2 * y], b1 = ya[2 * y + 1];
    uint8_t *d = dst->data + (size_t)y * row_n;
    for (size_t i = 0; i < row_n; i++) {
      int v = (((rows[i] >> 4) * b0) >> 16) + (((rows[row_n + i] >> 4) * b1) >> 16);
      v = (v + 2) >> 2;
      d[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  }
  free(rows);
  free(xofs);
  free(yofs);
  free(xa);
  free(ya);
}
