/* im2col / col2im: unfolding the sliding windows of a convolution into a
 * column matrix, and folding a column matrix back into an image by summing
 * overlapping windows.  Shared by Convolution, Deconvolution (and anything
 * else built on a convolution-shaped GEMM).
 *
 * For an image of C channels and spatial shape in[0..n), the column matrix has
 * C * prod(kernel) rows and prod(out) columns: row (c, k_0..k_{n-1}) holds, for
 * every output position o, the image value at
 *     i_d = o_d * stride_d - pad_d + k_d * dilation_d
 * (0 outside the image).  B images (B, C, in...) are unfolded side by side
 * into one wide matrix (C * prod(kernel), B * prod(out)): image b fills
 * columns [b * prod(out), (b + 1) * prod(out)) of every row. */
#ifndef CT_LAYERS_IM2COL_H
#define CT_LAYERS_IM2COL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_IM2COL_MAX_AXES 6

typedef struct ct_im2col_geom {
  int nspatial;                     /* spatial axes, 1..CT_IM2COL_MAX_AXES */
  bool force_nd;                    /* use the N-d code even for 2 axes (tests, Caffe's flag) */
  int channels;                     /* C of the image */
  int in[CT_IM2COL_MAX_AXES];       /* image spatial shape */
  int out[CT_IM2COL_MAX_AXES];      /* column spatial shape (window positions) */
  int kernel[CT_IM2COL_MAX_AXES];
  int pad[CT_IM2COL_MAX_AXES];
  int stride[CT_IM2COL_MAX_AXES];
  int dilation[CT_IM2COL_MAX_AXES];
} ct_im2col_geom;

/* prod(in), prod(out), prod(kernel) of g. */
size_t ct_im2col_in_count(const ct_im2col_geom *g);
size_t ct_im2col_out_count(const ct_im2col_geom *g);
size_t ct_im2col_kernel_count(const ct_im2col_geom *g);

/* Host: unfolds B images im (B, C, in...) into col (C * prod(kernel),
 * B * prod(out)). */
void ct_im2col_cpu(const ct_im2col_geom *g, int B, const float *im, float *col);
/* Host: im (B, C, in...) = the sum of the windows in col (same layout as
 * above); im is overwritten, not accumulated into. */
void ct_col2im_cpu(const ct_im2col_geom *g, int B, const float *col, float *im);

/* GPU versions on ctx's stream (im2col.cu); same layouts. */
void ct_im2col_gpu(ct_context *ctx, const ct_im2col_geom *g, int B, const float *im, float *col);
void ct_col2im_gpu(ct_context *ctx, const ct_im2col_geom *g, int B, const float *col, float *im);

#ifdef __cplusplus
}
#endif

#endif
