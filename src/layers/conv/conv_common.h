/* What Convolution and Deconvolution share: ConvolutionParameter parsing, the
 * learnable blobs, shapes, and the chunked im2col + GEMM engine.
 *
 * The GEMM view.  Both layers are the same product
 *     Y (y_channels, y_spatial) = W (y_channels, kernel_dim) * im2col(X)
 * per image and group, where for Convolution X is the bottom and Y the top,
 * and for Deconvolution (Caffe's reverse_dimensions) X is the top and Y the
 * bottom.  Weights have Caffe's shape (y_channels, x_channels / group,
 * kernel...): (num_output, channels/group, kh, kw) for Convolution and
 * (channels, num_output/group, kh, kw) for Deconvolution.
 *
 * Speed: instead of one small GEMM per image (Caffe), a chunk of up to
 * `chunk` images is unfolded side by side into one column matrix
 * (group * kernel_dim, chunk * y_spatial) and multiplied at once; Y of the
 * chunk is kept channel-major in `rows` (y_channels, chunk * y_spatial) and
 * permuted to and from the blob's (image, channel, spatial) layout.  The
 * weight gradient of a whole chunk is one GEMM too.  The chunk is bounded by
 * a byte budget (64 MB by default).  1x1 kernels with stride 1 and no pad skip
 * im2col: each image already is its column matrix.
 *
 * The column matrix remembers which X it holds, so backward reuses the
 * unfolding of the last forward chunk (backward walks the chunks in reverse)
 * and Deconvolution's backward unfolds the top diff once for both gradients.
 * Like every Caffe layer, this assumes the bottoms keep the values forward saw
 * until backward runs.
 *
 * Engines.  On the host, convolution_param.engine CAFFE keeps this im2col +
 * GEMM engine (the reference); DEFAULT (and CUDNN, which has no host
 * meaning) take oneDNN's primitives (conv_dnnl.h) when the build has oneDNN
 * and it supports the geometry, planned at reshape.  GPUs keep their own
 * choice. */
#ifndef CT_LAYERS_CONV_COMMON_H
#define CT_LAYERS_CONV_COMMON_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/conv/im2col.h"
#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The device primitives the engine needs (host and GPU tables). */
typedef struct ct_conv_backend {
  void (*gemm)(ct_context *ctx, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
               const float *A, const float *B, float beta, float *C);
  /* B images side by side, as ct_im2col_cpu / ct_col2im_cpu. */
  void (*im2col)(ct_context *ctx, const ct_im2col_geom *g, int B, const float *im, float *col);
  void (*col2im)(ct_context *ctx, const ct_im2col_geom *g, int B, const float *col, float *im);
  /* rows (C, B*S) = images (B, C, S) permuted, and back. */
  void (*to_rows)(ct_context *ctx, const float *images, int B, int C, size_t S, float *rows);
  void (*from_rows)(ct_context *ctx, const float *rows, int B, int C, size_t S, float *images);
  /* x (B, C, S) += bias (C) broadcast. */
  void (*add_bias)(ct_context *ctx, const float *bias, int B, int C, size_t S, float *x);
  /* dbias (C) += sum over b, s of dx (B, C, S). */
  void (*bias_grad)(ct_context *ctx, const float *dx, int B, int C, size_t S, float *dbias);
} ct_conv_backend;

extern const ct_conv_backend ct_conv_backend_cpu;
#ifdef CORTADO_HAVE_CUDA
extern const ct_conv_backend ct_conv_backend_gpu; /* conv_common.cu */
/* Floats of device scratch ct_bias_grad_gpu takes for a (B, C, S) gradient. */
size_t ct_bias_grad_scratch(int B, int C, size_t S);
/* dbias (C) += sum over b, s of dx (B, C, S) on ctx's stream, the same bits
 * on every run: partial sums over slices of each channel's B*S values into
 * scratch (ct_bias_grad_scratch floats), then their sum in a fixed order
 * (S = 1, rows of channels: ct_channel_sums_gpu's).  B*S must be below
 * 2^32. */
void ct_bias_grad_gpu(ct_context *ctx, const float *dx, int B, int C, size_t S, float *scratch,
                      float *dbias);
/* The same over dx of any element type (the sums in float32). */
void ct_bias_grad_gpu_typed(ct_context *ctx, ct_dtype type, const void *dx, int B, int C,
                            size_t S, float *scratch, float *dbias);
/* y (B, C, S) of a 16-bit type += bias (C, float32), then max(., 0) when
 * relu (ct_channel_affine_gpu's pass). */
void ct_bias_add_gpu_typed(ct_context *ctx, ct_dtype type, const float *bias, int B, int C,
                           size_t S, bool relu, void *y);
/* y = max(y + bias[c], 0) over a (B, C, S) array (fewer than 2^32 values),
 * in one pass: a convolution's bias and the ReLU fused after it. */
void ct_bias_relu_gpu(ct_context *ctx, const float *bias, int B, int C, size_t S, float *y);
#endif

/* The sliding window of a ConvolutionParameter, what Convolution,
 * Deconvolution and Im2col share: the channel axis and, for each spatial
 * axis after it, kernel, stride, pad and dilation. */
typedef struct ct_conv_window {
  int axis;      /* channel axis of the bottom */
  int nspatial;  /* spatial axes after it */
  bool force_nd; /* force_nd_im2col */
  int kernel[CT_IM2COL_MAX_AXES], stride[CT_IM2COL_MAX_AXES];
  int pad[CT_IM2COL_MAX_AXES], dilation[CT_IM2COL_MAX_AXES];
} ct_conv_window;

/* Parses the window of p for bottom by Caffe's rules and defaults
 * (kernel_size or kernel_h/_w required; stride 1, pad 0, dilation 1; a value
 * given once or once per spatial axis).  Errors (CT_ERR_INVALID /
 * CT_ERR_UNSUPPORTED) name the field. */
ct_status ct_conv_window_parse(const Caffe__ConvolutionParameter *p, const ct_tensor *bottom,
                               ct_conv_window *w, ct_error *err);
/* The output size along spatial axis i for an input of `in`: Caffe's rule
 * (in + 2 pad - dilated extent) / stride + 1, or its inverse for
 * Deconvolution (reverse).  CT_ERR_INVALID when it is not positive. */
ct_status ct_conv_window_out(const ct_conv_window *w, int i, long in, bool reverse, int *out,
                             ct_error *err);

typedef struct ct_conv_dnnl ct_conv_dnnl;
typedef struct ct_conv_dw ct_conv_dw;

typedef struct ct_conv {
  bool reverse;       /* Deconvolution */
  int engine;         /* convolution_param.engine (Caffe__ConvolutionParameter__Engine) */
  int axis;           /* channel axis of the bottom */
  int nspatial;       /* spatial axes after it */
  int num_output;
  int group;
  bool bias_term;
  bool relu_fused;    /* set by the net (ct_conv_cudnn_absorb_relu): the cuDNN forward also
                         applies the ReLU in place on the top that follows */
  bool relu_bwd_fused; /* and the backward starts with the ReLU's (16-bit layers) */
  bool bias_deferred; /* set by the net (ct_conv_cudnn_defer_bias): the cuDNN forward leaves
                         the bias out; the MAX Pooling that reads the top adds it */
  bool is_1x1;        /* 1x1 kernel, stride 1, pad 0: no im2col */
  bool force_nd;
  int kernel[CT_IM2COL_MAX_AXES], stride[CT_IM2COL_MAX_AXES];
  int pad[CT_IM2COL_MAX_AXES], dilation[CT_IM2COL_MAX_AXES];
  int channels;       /* of the bottom */
  int bottom_ndim;
  /* set by reshape */
  int num;            /* images: product of the bottom axes before `axis` */
  int x_channels, y_channels;
  size_t x_spatial, y_spatial;
  int kernel_dim;     /* x_channels / group * prod(kernel) */
  ct_im2col_geom geom;  /* X image -> columns */
  int chunk;          /* images per GEMM */
  ct_tensor *col;     /* (group * kernel_dim, chunk * y_spatial) */
  ct_tensor *rows;    /* (y_channels, chunk * y_spatial) */
  const float *col_x; /* the X chunk whose unfolding col holds (NULL: none) */
  int col_images;     /* and its image count */
  ct_conv_dnnl *fast; /* host only: the oneDNN plan (NULL: the reference engine) */
  ct_conv_dw *dw;     /* GPU only: the depthwise kernels run the layer (conv_depthwise.h;
                         NULL: cuDNN or the reference engine) */
  bool planned;       /* host only: the engine was chosen for plan_num images of */
  int plan_num;       /* spatial shape plan_in (so a reshape to the same shape */
  int plan_in[CT_IM2COL_MAX_AXES]; /* keeps the choice) */
} ct_conv;

/* Net fusion: Convolution conv (set up) applies the in-place ReLU after it
 * in its forward, and *backward_too says whether in its backward as well
 * (only where backward_ok); false, changing nothing, where it cannot (not
 * on a GPU, or see ct_conv_cudnn_absorb_relu). */
bool ct_conv_absorb_relu(ct_layer *conv, bool backward_ok, bool *backward_too);
/* ct_conv_cudnn_defer_bias for a Convolution on a GPU (false elsewhere). */
bool ct_conv_defer_bias(ct_layer *conv);

/* Parses convolution_param (Caffe's rules and defaults), declares and fills
 * the weight and bias blobs, and stores a ct_conv in l->priv.  Errors
 * (CT_ERR_INVALID / CT_ERR_UNSUPPORTED) name the field. */
ct_status ct_conv_setup(ct_layer *l, ct_tensor *const *bottom, bool reverse, ct_error *err);
/* Shapes the tops (Caffe's output size rule) and the scratch, and on the
 * host picks the engine (c->fast) and logs the choice when it changes.
 * Fails when the bottom's axes or channels changed, the bottoms differ in
 * shape, or an output size is not positive. */
ct_status ct_conv_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                          ct_error *err);
void ct_conv_destroy(ct_layer *l);
/* ops->restored of Convolution and Deconvolution (layer.h): oneDNN's
 * reorders of x and dy belong to the forward the blobs held, which the
 * weight gradient and the data gradient would otherwise reuse. */
void ct_conv_restored(ct_layer *l);
/* ops->workspace_bytes of Convolution and Deconvolution: the host column
 * and row buffers. */
size_t ct_conv_workspace_bytes(const ct_layer *l);

/* The engine, one chunk of B images at a time (x, y point at the chunk's
 * first image; rows are Y channel-major, (y_channels, B * y_spatial)).
 *
 * rows = W * im2col(X chunk), per group.  reuse_cols: keep the column matrix
 * when it already holds this chunk's unfolding (never in forward, where the
 * values behind the same pointer are new). */
void ct_conv_y_from_x(ct_conv *c, const ct_conv_backend *be, ct_context *ctx, const float *w,
                      const float *x, int B, bool reuse_cols, float *rows);
/* X chunk = col2im(W^T * rows), overwriting X. */
void ct_conv_x_from_y(ct_conv *c, const ct_conv_backend *be, ct_context *ctx, const float *w,
                      const float *rows, int B, float *x);
/* dw += rows * im2col(X chunk)^T, reusing the column matrix when it holds
 * this chunk. */
void ct_conv_weight_grad(ct_conv *c, const ct_conv_backend *be, ct_context *ctx,
                         const float *rows, const float *x, int B, float *dw);
/* The rows view of a Y chunk (B, y_channels, y_spatial): the images
 * themselves when B == 1, else permuted into c->rows. */
const float *ct_conv_rows_in(ct_conv *c, const ct_conv_backend *be, ct_context *ctx,
                             const float *y, int B);
/* Where to compute a Y chunk's rows (y itself when B == 1), and the store
 * back into y afterwards (a no-op when B == 1). */
float *ct_conv_rows_out(ct_conv *c, float *y, int B);
void ct_conv_rows_store(ct_conv *c, const ct_conv_backend *be, ct_context *ctx, const float *rows,
                        int B, float *y);
/* The backend of the context's device. */
const ct_conv_backend *ct_conv_backend_of(const ct_context *ctx);

/* Hidden knob for tests: the byte budget of one chunk's scratch (col + rows);
 * 0 restores the default.  Takes effect at the next reshape. */
void ct_conv_set_chunk_bytes(size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
