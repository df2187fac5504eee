#include "layers/conv/im2col.h"

#include <string.h>

#include "core/parallel.h"
#include "core/status.h"

size_t ct_im2col_in_count(const ct_im2col_geom *g) {
  size_t n = 1;
  for (int d = 0; d < g->nspatial; d++) n *= (size_t)g->in[d];
  return n;
}

size_t ct_im2col_out_count(const ct_im2col_geom *g) {
  size_t n = 1;
  for (int d = 0; d < g->nspatial; d++) n *= (size_t)g->out[d];
  return n;
}

size_t ct_im2col_kernel_count(const ct_im2col_geom *g) {
  size_t n = 1;
  for (int d = 0; d < g->nspatial; d++) n *= (size_t)g->kernel[d];
  return n;
}

/* Output positions o in [*lo, *hi) of one axis whose input o * stride + off
 * falls inside [0, size). */
static inline void valid_range(int off, int stride, int size, int nout, int *lo, int *hi) {
  int l, h;
  if (stride == 1) {
    l = off >= 0 ? 0 : -off;
    h = size - off;
  } else {
    l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    h = size - 1 - off < 0 ? 0 : (size - 1 - off) / stride + 1;
  }
  if (h > nout) h = nout;
  if (l > h) l = h;
  *lo = l;
  *hi = h;
}

/* Short runs (a row of a small feature map is often 8-30 values) are copied
 * with inline loops: the compiler would otherwise turn them into memcpy and
 * memset calls that cost more than the copy. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

static inline void copy_run(float *restrict dst, const float *restrict src, int n) {
  for (int i = 0; i < n; i++) dst[i] = src[i];
}

static inline void zero_run(float *dst, int n) {
  for (int i = 0; i < n; i++) dst[i] = 0.0f;
}

static void zero_image(float *dst, size_t n) { memset(dst, 0, n * sizeof *dst); }

static inline void add_run(float *restrict dst, const float *restrict src, int n) {
  for (int i = 0; i < n; i++) dst[i] += src[i];
}

/* Channels [c0, c1) of one image into the rows of col (row stride ld). */
static void im2col_2d(const ct_im2col_geom *g, int c0, int c1, const float *im, float *col,
                      size_t ld) {
  const int H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
  const int KH = g->kernel[0], KW = g->kernel[1];
  const int sh = g->stride[0], sw = g->stride[1], ph = g->pad[0];
  for (int c = c0; c < c1; c++) {
    const float *img = im + (size_t)c * H * W;
    for (int ki = 0; ki < KH; ki++) {
      const int hoff = ki * g->dilation[0] - ph;
      int olo, ohi; /* output rows that read inside the image */
      valid_range(hoff, sh, H, OH, &olo, &ohi);
      for (int kj = 0; kj < KW; kj++) {
        float *row = col + (size_t)((c * KH + ki) * KW + kj) * ld;
        const int woff = kj * g->dilation[1] - g->pad[1];
        int lo, hi;
        valid_range(woff, sw, W, OW, &lo, &hi);
        zero_run(row, olo * OW);
        for (int oh = olo; oh < ohi; oh++) {
          float *dst = row + (size_t)oh * OW;
          const float *src = img + (size_t)(oh * sh + hoff) * W;
          zero_run(dst, lo);
          if (sw == 1) {
            copy_run(dst + lo, src + lo + woff, hi - lo);
          } else {
            for (int ow = lo; ow < hi; ow++) dst[ow] = src[ow * sw + woff];
          }
          zero_run(dst + hi, OW - hi);
        }
        zero_run(row + (size_t)ohi * OW, (OH - ohi) * OW);
      }
    }
  }
}

/* Channels [c0, c1) of one image from the rows of col (row stride ld); those
 * planes of im are overwritten. */
static void col2im_2d(const ct_im2col_geom *g, int c0, int c1, const float *col, size_t ld,
                      float *im) {
  const int H = g->in[0], W = g->in[1], OH = g->out[0], OW = g->out[1];
  const int KH = g->kernel[0], KW = g->kernel[1];
  const int sh = g->stride[0], sw = g->stride[1], ph = g->pad[0];
  zero_image(im + (size_t)c0 * H * W, (size_t)(c1 - c0) * H * W);
  for (int c = c0; c < c1; c++) {
    float *img = im + (size_t)c * H * W;
    for (int ki = 0; ki < KH; ki++) {
      const int hoff = ki * g->dilation[0] - ph;
      int olo, ohi;
      valid_range(hoff, sh, H, OH, &olo, &ohi);
      for (int kj = 0; kj < KW; kj++) {
        const float *row = col + (size_t)((c * KH + ki) * KW + kj) * ld;
        const int woff = kj * g->dilation[1] - g->pad[1];
        int lo, hi;
        valid_range(woff, sw, W, OW, &lo, &hi);
        for (int oh = olo; oh < ohi; oh++) {
          const float *src = row + (size_t)oh * OW;
          float *dst = img + (size_t)(oh * sh + hoff) * W;
          if (sw == 1) {
            add_run(dst + lo + woff, src + lo, hi - lo);
          } else {
            for (int ow = lo; ow < hi; ow++) dst[ow * sw + woff] += src[ow];
          }
        }
      }
    }
  }
}

/* The N-d walk over channels [c0, c1): for every row (channel, kernel
 * offset) and every output position, the image index it reads (-1 in the
 * padding).  to_col selects im2col (col = im) or col2im (im += col). */
static void walk_nd(const ct_im2col_geom *g, int c0, int c1, bool to_col, const float *im_in,
                    float *col_out, const float *col_in, float *im_out, size_t ld) {
  const int n = g->nspatial;
  const size_t in_count = ct_im2col_in_count(g), out_count = ct_im2col_out_count(g);
  const size_t kcount = ct_im2col_kernel_count(g);
  int k[CT_IM2COL_MAX_AXES], o[CT_IM2COL_MAX_AXES];
  for (int c = c0; c < c1; c++) {
    memset(k, 0, sizeof k);
    for (size_t kidx = 0; kidx < kcount; kidx++) {
      size_t row_off = ((size_t)c * kcount + kidx) * ld;
      memset(o, 0, sizeof o);
      for (size_t p = 0; p < out_count; p++) {
        long idx = 0;
        bool inside = true;
        for (int d = 0; d < n && inside; d++) {
          int i = o[d] * g->stride[d] - g->pad[d] + k[d] * g->dilation[d];
          inside = i >= 0 && i < g->in[d];
          idx = idx * g->in[d] + i;
        }
        if (to_col) {
          col_out[row_off + p] = inside ? im_in[c * in_count + (size_t)idx] : 0.0f;
        } else if (inside) {
          im_out[c * in_count + (size_t)idx] += col_in[row_off + p];
        }
        for (int d = n - 1; d >= 0; d--) { /* next output position */
          if (++o[d] < g->out[d]) break;
          o[d] = 0;
        }
      }
      for (int d = n - 1; d >= 0; d--) { /* next kernel offset */
        if (++k[d] < g->kernel[d]) break;
        k[d] = 0;
      }
    }
  }
}

/* Work items (image b, channel c), spread over the threads: every item
 * writes its own rows of one image's columns (im2col) or its own plane
 * (col2im). */
typedef struct fold_job {
  const ct_im2col_geom *g;
  bool to_col;
  size_t in_count, out_count, ld;
  const float *src;
  float *dst;
} fold_job;

static void fold_items(void *arg, size_t begin, size_t end) {
  const fold_job *j = arg;
  const ct_im2col_geom *g = j->g;
  const bool nd = g->nspatial != 2 || g->force_nd;
  for (size_t i = begin; i < end;) {
    /* the run of channels of one image inside [begin, end) */
    const size_t b = i / g->channels;
    const int c0 = (int)(i % g->channels);
    const int c1 = (int)(end - b * g->channels < (size_t)g->channels ? end - b * g->channels
                                                                      : (size_t)g->channels);
    if (j->to_col) {
      const float *im = j->src + b * j->in_count;
      float *col = j->dst + b * j->out_count;
      if (nd) walk_nd(g, c0, c1, true, im, col, NULL, NULL, j->ld);
      else im2col_2d(g, c0, c1, im, col, j->ld);
    } else {
      const float *col = j->src + b * j->out_count;
      float *im = j->dst + b * j->in_count;
      if (nd) {
        const size_t plane = ct_im2col_in_count(g);
        zero_image(im + (size_t)c0 * plane, (size_t)(c1 - c0) * plane);
        walk_nd(g, c0, c1, false, NULL, NULL, col, im, j->ld);
      } else {
        col2im_2d(g, c0, c1, col, j->ld, im);
      }
    }
    i = b * g->channels + (size_t)c1;
  }
}

static void fold(const ct_im2col_geom *g, int B, bool to_col, const float *src, float *dst) {
  CT_ASSERT(g->nspatial >= 1 && g->nspatial <= CT_IM2COL_MAX_AXES);
  const size_t out_count = ct_im2col_out_count(g);
  fold_job j = {g, to_col, (size_t)g->channels * ct_im2col_in_count(g), out_count,
                (size_t)B * out_count, src, dst};
  const size_t per_item = ct_im2col_kernel_count(g) * out_count;
  ct_parallel_for((size_t)B * g->channels, per_item >= 16384 ? 1 : 16384 / (per_item + 1),
                  fold_items, &j);
}

void ct_im2col_cpu(const ct_im2col_geom *g, int B, const float *im, float *col) {
  fold(g, B, true, im, col);
}

void ct_col2im_cpu(const ct_im2col_geom *g, int B, const float *col, float *im) {
  fold(g, B, false, col, im);
}
