#include "layers/conv/conv_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/parallel.h"
#include "layers/conv/conv_dnnl.h"
#include "layers/filler.h"
#include "math/math.h"

#define CT_CONV_DEFAULT_CHUNK_BYTES ((size_t)64 << 20)

static size_t g_chunk_bytes = CT_CONV_DEFAULT_CHUNK_BYTES;

void ct_conv_set_chunk_bytes(size_t bytes) {
  g_chunk_bytes = bytes ? bytes : CT_CONV_DEFAULT_CHUNK_BYTES;
}

/* ---------------------------------------------------------------- parameters */

/* One repeated field (kernel_size, stride, pad, dilation) or its _h/_w pair
 * (pair is "kernel" for kernel_h/kernel_w, NULL when there is none) into
 * out[nspatial]; dflt < 0 means the field is required. */
static ct_status spatial_values(const char *name, const char *pair, size_t n,
                                const uint32_t *values, bool has_h, uint32_t h, bool has_w,
                                uint32_t w, int nspatial, int dflt, int *out, ct_error *err) {
  /* each value as written, before it becomes an int: 2^31 is not negative */
  const uint64_t lo = strcmp(name, "pad") == 0 ? 0 : 1;
  char field[64];
  if (has_h) {
    snprintf(field, sizeof field, "convolution_param.%s_h", pair);
    CT_TRY(ct_layer_check_count(field, h, lo, err));
  }
  if (has_w) {
    snprintf(field, sizeof field, "convolution_param.%s_w", pair);
    CT_TRY(ct_layer_check_count(field, w, lo, err));
  }
  if (has_h || has_w) {
    CT_ASSERT(pair != NULL);
    if (nspatial != 2)
      return ct_error_set(err, CT_ERR_INVALID,
                          "convolution_param.%s_h and %s_w can only be used for 2-D convolution "
                          "(the bottom has %d spatial axes)",
                          pair, pair, nspatial);
    if (n != 0)
      return ct_error_set(err, CT_ERR_INVALID,
                          "convolution_param: give either %s or %s_h and %s_w, not both", name,
                          pair, pair);
    out[0] = (int)h;
    out[1] = (int)w;
    return CT_OK;
  }
  if (n == 0 && dflt < 0 && nspatial > 0)
    return ct_error_set(err, CT_ERR_INVALID, "convolution_param.%s must be given (or %s_h and %s_w)",
                        name, pair, pair);
  if (n == 0) {
    for (int i = 0; i < nspatial; i++) out[i] = dflt;
    return CT_OK;
  }
  if (n != 1 && (int)n != nspatial)
    return ct_error_set(err, CT_ERR_INVALID,
                        "convolution_param.%s must be given once or once per spatial axis (given "
                        "%zu times for %d spatial axes)",
                        name, n, nspatial);
  snprintf(field, sizeof field, "convolution_param.%s", name);
  for (size_t i = 0; i < n; i++) CT_TRY(ct_layer_check_count(field, values[i], lo, err));
  for (int i = 0; i < nspatial; i++) out[i] = (int)values[n == 1 ? 0 : i];
  return CT_OK;
}

ct_status ct_conv_window_parse(const Caffe__ConvolutionParameter *p, const ct_tensor *bottom,
                               ct_conv_window *w, ct_error *err) {
  memset(w, 0, sizeof *w);
  if (ct_tensor_canonical_axis(bottom, p->axis, &w->axis, err) != CT_OK)
    return ct_error_prefix(err, "convolution_param");
  w->nspatial = bottom->ndim - w->axis - 1;
  if (w->nspatial > CT_IM2COL_MAX_AXES)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "convolution over %d spatial axes is not supported (at most %d)",
                        w->nspatial, CT_IM2COL_MAX_AXES);
  w->force_nd = p->force_nd_im2col;
  CT_TRY(spatial_values("kernel_size", "kernel", p->n_kernel_size, p->kernel_size, p->has_kernel_h,
                        p->kernel_h, p->has_kernel_w, p->kernel_w, w->nspatial, -1, w->kernel,
                        err));
  CT_TRY(spatial_values("stride", "stride", p->n_stride, p->stride, p->has_stride_h, p->stride_h,
                        p->has_stride_w, p->stride_w, w->nspatial, 1, w->stride, err));
  CT_TRY(spatial_values("pad", "pad", p->n_pad, p->pad, p->has_pad_h, p->pad_h, p->has_pad_w,
                        p->pad_w, w->nspatial, 0, w->pad, err));
  CT_TRY(spatial_values("dilation", NULL, p->n_dilation, p->dilation, false, 0, false, 0,
                        w->nspatial, 1, w->dilation, err));
  for (int i = 0; i < w->nspatial; i++) {
    if (w->kernel[i] <= 0)
      return ct_error_set(err, CT_ERR_INVALID,
                          "convolution_param: kernel size must be positive (spatial axis %d is %d)",
                          i, w->kernel[i]);
    if (w->stride[i] <= 0)
      return ct_error_set(err, CT_ERR_INVALID,
                          "convolution_param: stride must be positive (spatial axis %d is %d)", i,
                          w->stride[i]);
    if (w->dilation[i] <= 0)
      return ct_error_set(err, CT_ERR_INVALID,
                          "convolution_param: dilation must be positive (spatial axis %d is %d)",
                          i, w->dilation[i]);
    if (w->pad[i] < 0)
      return ct_error_set(err, CT_ERR_INVALID,
                          "convolution_param: pad is too large (spatial axis %d)", i);
  }
  return CT_OK;
}

ct_status ct_conv_window_out(const ct_conv_window *w, int i, long in, bool reverse, int *out,
                             ct_error *err) {
  long extent = (long)w->dilation[i] * (w->kernel[i] - 1) + 1;
  long o = reverse ? (long)w->stride[i] * (in - 1) + extent - 2L * w->pad[i]
                   : (in + 2L * w->pad[i] - extent) / w->stride[i] + 1;
  if (in <= 0 || o <= 0 || o > (1L << 30))
    return ct_error_set(err, CT_ERR_INVALID,
                        "output size %ld along spatial axis %d is %s (input %ld, kernel extent "
                        "%ld, pad %d, stride %d%s)",
                        o, i, o > 0 ? "too large" : "not positive", in, extent, w->pad[i],
                        w->stride[i], o > 0 ? "; the limit is 2^30 = 1073741824" : "");
  *out = (int)o;
  return CT_OK;
}

static ct_status parse_param(ct_conv *c, const Caffe__ConvolutionParameter *p,
                             const ct_tensor *bottom, ct_error *err) {
  ct_conv_window w;
  CT_TRY(ct_conv_window_parse(p, bottom, &w, err));
  c->axis = w.axis;
  c->nspatial = w.nspatial;
  c->force_nd = w.force_nd;
  c->bottom_ndim = bottom->ndim;
  c->is_1x1 = true;
  for (int i = 0; i < c->nspatial; i++) {
    c->kernel[i] = w.kernel[i];
    c->stride[i] = w.stride[i];
    c->pad[i] = w.pad[i];
    c->dilation[i] = w.dilation[i];
    c->is_1x1 = c->is_1x1 && c->kernel[i] == 1 && c->stride[i] == 1 && c->pad[i] == 0;
  }
  c->channels = bottom->shape[c->axis];
  if (!p->has_num_output)
    return ct_error_set(err, CT_ERR_INVALID, "convolution_param.num_output must be given");
  CT_TRY(ct_layer_check_count("convolution_param.num_output", p->num_output, 1, err));
  c->num_output = (int)p->num_output;
  CT_TRY(ct_layer_check_count("convolution_param.group", p->group, 1, err));
  c->group = (int)p->group;
  if (c->channels % c->group != 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "convolution_param.group %d does not divide the %d input channels",
                        c->group, c->channels);
  if (c->num_output % c->group != 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "convolution_param.group %d does not divide num_output %d", c->group,
                        c->num_output);
  c->bias_term = p->bias_term;
  c->engine = (int)p->engine;
  return CT_OK;
}

ct_status ct_conv_setup(ct_layer *l, ct_tensor *const *bottom, bool reverse, ct_error *err) {
  static const Caffe__ConvolutionParameter dflt = CAFFE__CONVOLUTION_PARAMETER__INIT;
  const Caffe__ConvolutionParameter *p =
      l->param->convolution_param ? l->param->convolution_param : &dflt;
  ct_conv *c = ct_xcalloc(1, sizeof *c);
  l->priv = c;
  c->reverse = reverse;
  c->col = ct_tensor_new(l->ctx->device, NULL);
  c->rows = ct_tensor_new(l->ctx->device, NULL);
  CT_TRY(parse_param(c, p, bottom[0], err));
  c->y_channels = reverse ? c->channels : c->num_output;
  c->x_channels = reverse ? c->num_output : c->channels;
  int wshape[2 + CT_IM2COL_MAX_AXES];
  wshape[0] = c->y_channels;
  wshape[1] = c->x_channels / c->group;
  size_t kdim = (size_t)wshape[1];
  for (int i = 0; i < c->nspatial; i++) {
    wshape[2 + i] = c->kernel[i];
    kdim *= (size_t)c->kernel[i];
    if (kdim * (size_t)c->y_channels > INT32_MAX)
      return ct_error_set(err, CT_ERR_INVALID,
                          "convolution_param: the weights would have more than 2^31 values");
  }
  c->kernel_dim = (int)kdim;
  ct_tensor *w = ct_layer_add_param(l, 2 + c->nspatial, wshape);
  CT_TRY(ct_filler_fill(p->weight_filler, w, &l->ctx->rng, err));
  if (c->bias_term) {
    ct_tensor *b = ct_layer_add_param(l, 1, &c->num_output);
    CT_TRY(ct_filler_fill(p->bias_filler, b, &l->ctx->rng, err));
  }
  return CT_OK;
}

void ct_conv_restored(ct_layer *l) {
  ct_conv *c = l->priv;
  if (!c->fast) return;
  ct_conv_dnnl_forget(c->fast, CT_CONV_DNNL_SLOT_X);
  ct_conv_dnnl_forget(c->fast, CT_CONV_DNNL_SLOT_Y);
}

void ct_conv_destroy(ct_layer *l) {
  ct_conv *c = l->priv;
  if (!c) return;
  ct_tensor_free(c->col);
  ct_tensor_free(c->rows);
  ct_conv_dnnl_free(c->fast);
  free(c);
  l->priv = NULL;
}

size_t ct_conv_workspace_bytes(const ct_layer *l) {
  const ct_conv *c = l->priv;
  size_t bytes = 0;
  if (c && c->col) bytes += c->col->capacity * ct_dtype_size(c->col->dtype);
  if (c && c->rows) bytes += c->rows->capacity * ct_dtype_size(c->rows->dtype);
  return bytes;
}

/* ---------------------------------------------------------------- shapes */

/* The host engine for c's geometry (conv_common.h, Engines): chosen again
 * (and the choice logged) only when the batch or the spatial shape changed. */
static ct_status choose_engine(ct_layer *l, ct_conv *c, ct_error *err) {
  if (l->ctx->device != CT_DEVICE_CPU) return CT_OK;
  if (c->planned && c->plan_num == c->num && !memcmp(c->plan_in, c->geom.in, sizeof c->plan_in))
    return CT_OK;
  c->planned = true;
  c->plan_num = c->num;
  memcpy(c->plan_in, c->geom.in, sizeof c->plan_in);
  ct_conv_dnnl_free(c->fast);
  c->fast = NULL;
  char why[160] = "engine: CAFFE";
  if (c->engine != CAFFE__CONVOLUTION_PARAMETER__ENGINE__CAFFE) {
#ifdef CORTADO_HAVE_DNNL
    c->fast = ct_conv_dnnl_create(c, c->bias_term && !c->reverse, l->dtype, l->layout, why,
                                  sizeof why);
#else
    snprintf(why, sizeof why, "built without oneDNN");
#endif
  }
  char desc[256];
  if (c->fast)
    LOG_INFO("layer '%s' (%s): host engine %s%s", l->name, l->ops->type,
             ct_conv_dnnl_describe(c->fast, desc, sizeof desc),
             l->dtype == CT_F32 ? "" : (l->dtype == CT_BF16 ? " in bfloat16" : " in float16"));
  else if (l->dtype != CT_F32) {
    c->planned = false;
    return ct_error_set(err, CT_ERR_UNSUPPORTED, "no %s engine on the host for this layer (%s)",
                        ct_dtype_name(l->dtype), why);
  } else
    LOG_INFO("layer '%s' (%s): host engine im2col + GEMM (%s)", l->name, l->ops->type, why);
  return CT_OK;
}

static ct_conv_window window_of(const ct_conv *c) {
  ct_conv_window w = {.axis = c->axis, .nspatial = c->nspatial, .force_nd = c->force_nd};
  memcpy(w.kernel, c->kernel, sizeof w.kernel);
  memcpy(w.stride, c->stride, sizeof w.stride);
  memcpy(w.pad, c->pad, sizeof w.pad);
  memcpy(w.dilation, c->dilation, sizeof w.dilation);
  return w;
}

ct_status ct_conv_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                          ct_error *err) {
  ct_conv *c = l->priv;
  const ct_tensor *b0 = bottom[0];
  char s0[128], s1[128];
  if (b0->ndim != c->bottom_ndim)
    return ct_error_set(err, CT_ERR_INVALID, "the bottom must keep its %d axes (now %s)",
                        c->bottom_ndim, ct_tensor_shape_string(b0, s0, sizeof s0));
  if (b0->shape[c->axis] != c->channels)
    return ct_error_set(err, CT_ERR_INVALID,
                        "the bottom must keep its %d channels on axis %d (now %s)", c->channels,
                        c->axis, ct_tensor_shape_string(b0, s0, sizeof s0));
  for (int i = 1; i < l->nbottom; i++)
    if (!ct_tensor_same_shape(bottom[i], b0))
      return ct_error_set(err, CT_ERR_INVALID, "all bottoms must have the same shape: %s vs %s",
                          ct_tensor_shape_string(b0, s0, sizeof s0),
                          ct_tensor_shape_string(bottom[i], s1, sizeof s1));
  int tshape[CT_MAX_AXES];
  for (int i = 0; i < c->axis; i++) tshape[i] = b0->shape[i];
  tshape[c->axis] = c->num_output;
  c->num = (int)ct_tensor_count_range(b0, 0, c->axis);
  ct_im2col_geom *g = &c->geom;
  memset(g, 0, sizeof *g);
  g->nspatial = c->nspatial;
  g->force_nd = c->force_nd;
  g->channels = c->x_channels;
  const ct_conv_window w = window_of(c);
  for (int i = 0; i < c->nspatial; i++) {
    int in = b0->shape[c->axis + 1 + i], out;
    CT_TRY(ct_conv_window_out(&w, i, in, c->reverse, &out, err));
    tshape[c->axis + 1 + i] = out;
    g->kernel[i] = c->kernel[i];
    g->pad[i] = c->pad[i];
    g->stride[i] = c->stride[i];
    g->dilation[i] = c->dilation[i];
    g->in[i] = c->reverse ? out : in;  /* X is the top when reversed */
    g->out[i] = c->reverse ? in : out;
  }
  for (int t = 0; t < l->ntop; t++) CT_TRY(ct_tensor_reshape(top[t], b0->ndim, tshape, err));
  c->x_spatial = ct_im2col_in_count(g);
  c->y_spatial = ct_im2col_out_count(g);
  CT_TRY(choose_engine(l, c, err));
  /* Chunk: as many images as the scratch budget holds (one for 1x1). */
  size_t per_image = ((size_t)c->group * c->kernel_dim + (size_t)c->y_channels) *
                     c->y_spatial * sizeof(float);
  size_t chunk = per_image ? g_chunk_bytes / per_image : 1;
  if (chunk < 1 || c->is_1x1) chunk = 1;
  if (chunk > (size_t)c->num) chunk = c->num > 0 ? (size_t)c->num : 1;
  c->chunk = (int)chunk;
  /* The oneDNN engine needs none of the reference engine's scratch. */
  const bool scratch = c->fast == NULL;
  int cshape[2] = {c->is_1x1 || !scratch ? 0 : c->group * c->kernel_dim,
                   (int)(chunk * c->y_spatial)};
  CT_TRY(ct_tensor_reshape(c->col, 2, cshape, err));
  int rshape[2] = {chunk > 1 && scratch ? c->y_channels : 0, (int)(chunk * c->y_spatial)};
  CT_TRY(ct_tensor_reshape(c->rows, 2, rshape, err));
  c->col_x = NULL;
  return CT_OK;
}

/* ---------------------------------------------------------------- engine */

/* Unfolds the X chunk into col (image b at column b * y_spatial). */
static void unfold(ct_conv *c, const ct_conv_backend *be, ct_context *ctx, const float *x, int B,
                   bool reuse) {
  if (reuse && c->col_x == x && c->col_images == B) return;
  be->im2col(ctx, &c->geom, B, x, c->col->data);
  c->col_x = x;
  c->col_images = B;
}

void ct_conv_y_from_x(ct_conv *c, const ct_conv_backend *be, ct_context *ctx, const float *w,
                      const float *x, int B, bool reuse_cols, float *rows) {
  const float *col = x;
  if (!c->is_1x1) {
    unfold(c, be, ctx, x, B, reuse_cols);
    col = c->col->data;
  }
  const int M = c->y_channels / c->group, N = (int)(B * c->y_spatial), K = c->kernel_dim;
  for (int g = 0; g < c->group; g++)
    be->gemm(ctx, false, false, M, N, K, 1.0f, w + (size_t)g * M * K, col + (size_t)g * K * N,
             0.0f, rows + (size_t)g * M * N);
}

void ct_conv_x_from_y(ct_conv *c, const ct_conv_backend *be, ct_context *ctx, const float *w,
                      const float *rows, int B, float *x) {
  float *col = c->is_1x1 ? x : c->col->data;
  const int M = c->y_channels / c->group, N = (int)(B * c->y_spatial), K = c->kernel_dim;
  for (int g = 0; g < c->group; g++)
    be->gemm(ctx, true, false, K, N, M, 1.0f, w + (size_t)g * M * K, rows + (size_t)g * M * N,
             0.0f, col + (size_t)g * K * N);
  if (c->is_1x1) return;
  c->col_x = NULL;
  be->col2im(ctx, &c->geom, B, col, x);
}

void ct_conv_weight_grad(ct_conv *c, const ct_conv_backend *be, ct_context *ctx,
                         const float *rows, const float *x, int B, float *dw) {
  const float *col = x;
  if (!c->is_1x1) {
    unfold(c, be, ctx, x, B, true);
    col = c->col->data;
  }
  const int M = c->y_channels / c->group, N = (int)(B * c->y_spatial), K = c->kernel_dim;
  for (int g = 0; g < c->group; g++)
    be->gemm(ctx, false, true, M, K, N, 1.0f, rows + (size_t)g * M * N, col + (size_t)g * K * N,
             1.0f, dw + (size_t)g * M * K);
}

const float *ct_conv_rows_in(ct_conv *c, const ct_conv_backend *be, ct_context *ctx,
                             const float *y, int B) {
  if (B == 1) return y;
  be->to_rows(ctx, y, B, c->y_channels, c->y_spatial, c->rows->data);
  return c->rows->data;
}

float *ct_conv_rows_out(ct_conv *c, float *y, int B) { return B == 1 ? y : c->rows->data; }

void ct_conv_rows_store(ct_conv *c, const ct_conv_backend *be, ct_context *ctx, const float *rows,
                        int B, float *y) {
  if (B > 1) be->from_rows(ctx, rows, B, c->y_channels, c->y_spatial, y);
}

/* ---------------------------------------------------------------- host backend */

static void cpu_gemm(ct_context *ctx, bool ta, bool tb, int M, int N, int K, float alpha,
                     const float *A, const float *B, float beta, float *C) {
  ct_conv_dnnl_gemm(ta, tb, M, N, K, alpha, A, B, beta, C);
}

static void cpu_im2col(ct_context *ctx, const ct_im2col_geom *g, int B, const float *im,
                       float *col) {
  ct_im2col_cpu(g, B, im, col);
}

static void cpu_col2im(ct_context *ctx, const ct_im2col_geom *g, int B, const float *col,
                       float *im) {
  ct_col2im_cpu(g, B, col, im);
}

/* The host's layout and bias loops, spread over the threads by (image,
 * channel) planes of S values (channels alone for the bias gradient, so
 * each sum keeps one order). */
typedef struct plane_job {
  int B, C;
  size_t S;
  const float *src, *bias;
  float *dst;
} plane_job;

static size_t min_planes(size_t S) { return S >= 16384 ? 1 : 16384 / (S + 1); }

static void to_rows_planes(void *arg, size_t begin, size_t end) {
  const plane_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    const size_t b = i / j->C, ch = i % j->C;
    memcpy(j->dst + (ch * j->B + b) * j->S, j->src + i * j->S, j->S * sizeof(float));
  }
}

static void from_rows_planes(void *arg, size_t begin, size_t end) {
  const plane_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    const size_t b = i / j->C, ch = i % j->C;
    memcpy(j->dst + i * j->S, j->src + (ch * j->B + b) * j->S, j->S * sizeof(float));
  }
}

static void cpu_to_rows(ct_context *ctx, const float *images, int B, int C, size_t S,
                        float *rows) {
  plane_job j = {B, C, S, images, NULL, rows};
  ct_parallel_for((size_t)B * C, min_planes(S), to_rows_planes, &j);
}

static void cpu_from_rows(ct_context *ctx, const float *rows, int B, int C, size_t S,
                          float *images) {
  plane_job j = {B, C, S, rows, NULL, images};
  ct_parallel_for((size_t)B * C, min_planes(S), from_rows_planes, &j);
}

static void add_bias_planes(void *arg, size_t begin, size_t end) {
  const plane_job *j = arg;
  for (size_t i = begin; i < end; i++) {
    float *restrict p = j->dst + i * j->S;
    const float v = j->bias[i % j->C];
    for (size_t s = 0; s < j->S; s++) p[s] += v;
  }
}

static void cpu_add_bias(ct_context *ctx, const float *bias, int B, int C, size_t S, float *x) {
  plane_job j = {B, C, S, NULL, bias, x};
  ct_parallel_for((size_t)B * C, min_planes(S), add_bias_planes, &j);
}

static void bias_grad_channels(void *arg, size_t begin, size_t end) {
  const plane_job *j = arg;
  for (size_t ch = begin; ch < end; ch++) {
    double sum = 0;
    for (int b = 0; b < j->B; b++) {
      const float *restrict p = j->src + ((size_t)b * j->C + ch) * j->S;
      float part = 0.0f;
      for (size_t s = 0; s < j->S; s++) part += p[s];
      sum += part;
    }
    j->dst[ch] += (float)sum;
  }
}

static void cpu_bias_grad(ct_context *ctx, const float *dx, int B, int C, size_t S,
                          float *dbias) {
  plane_job j = {B, C, S, dx, NULL, dbias};
  ct_parallel_for((size_t)C, min_planes((size_t)B * S), bias_grad_channels, &j);
}

const ct_conv_backend ct_conv_backend_cpu = {
    .gemm = cpu_gemm,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .to_rows = cpu_to_rows,
    .from_rows = cpu_from_rows,
    .add_bias = cpu_add_bias,
    .bias_grad = cpu_bias_grad,
};

const ct_conv_backend *ct_conv_backend_of(const ct_context *ctx) {
#ifdef CORTADO_HAVE_CUDA
  if (ctx->device != CT_DEVICE_CPU) return &ct_conv_backend_gpu;
#endif
  CT_ASSERT(ctx->device == CT_DEVICE_CPU);
  return &ct_conv_backend_cpu;
}
