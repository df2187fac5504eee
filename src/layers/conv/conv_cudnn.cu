/* Convolution and Deconvolution on cuDNN: see conv_cudnn.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/channel_typed.h"
#include "layers/conv/conv_algos.h"
#include "layers/conv/conv_common.h"
#include "layers/conv/conv_cudnn.h"
#include "layers/conv/conv_depthwise.h"
#include "layers/conv/conv_graph.h"
#include "layers/conv/conv_igemm.h"
#include "math/typed.h"
extern "C" {
#include "core/log.h"
}

typedef struct conv_cudnn {
  cudnnTensorDescriptor_t x, y;   /* one X image batch (num, x_channels, X...), and Y's */
  cudnnTensorDescriptor_t bias;   /* (1, num_output, 1...) over the top's channels */
  cudnnFilterDescriptor_t w;      /* (y_channels, x_channels / group, kernel...) */
  /* One descriptor per direction, each with its algorithm's math type. */
  cudnnConvolutionDescriptor_t fwd, bwd_data, bwd_filter;
  ct_cudnn_conv_algos algos;
  ct_igemm *ig;                   /* Cortado's kernels, where they beat cuDNN (algos.*_rival) */
  bool tf32;
  bool wgrad_side;                /* the weight gradient runs on the gradient stream */
  /* the bias gradient (ct_bias_grad_gpu): the top as (c->num, num_output,
   * top_spatial), and the reduction's scratch (its own, so that the
   * context's workspace stays cuDNN's alone) */
  size_t top_spatial;
  float *bias_scratch;
  size_t bias_scratch_count;
  /* The weight-only work of the forward (0) and backward-data (1)
   * configurations that have some (ct_igemm_prepare; prep_bytes[d] > 0),
   * done into prep[d] by ct_conv_cudnn_prepare.  prepared: done, for the
   * next forward; prepared_bwd: that forward took it, and the backward after
   * it may; prepared_data: it included backward data's. */
  float *prep[2];
  size_t prep_bytes[2], prep_alloc[2];
  bool prepared, prepared_bwd, prepared_data;
  /* 16-bit layers (type): the weights in that type, converted from the
   * float32 master by each forward (and read by the backward after it),
   * and the weight gradient in that type before it is added into the
   * master's float32 diff */
  ct_dtype type;
  size_t w_count;
  void *w16, *dw16;
  /* channels last (l->layout NHWC, 16-bit only): x and y NHWC, the filter
   * in the type as (K, kernel..., C / group) */
  bool nhwc;
  /* 16-bit layers: the three directions through cuDNN's graph API
   * (conv_graph.h), or NULL where it had no engine (the legacy calls run) */
  ct_conv_graph *graph;
} conv_cudnn;

static const float k_one = 1.0f, k_zero = 0.0f;

/* The directions that may prepare work (conv_cudnn.prep), and the chosen
 * kernel of direction d (0 forward, 1 backward data; 0: cuDNN's). */
static const ct_igemm_dir k_prep_dirs[2] = {CT_IGEMM_FWD, CT_IGEMM_BWD_DATA};
static int prep_rival(const conv_cudnn *s, int d) {
  return d == 0 ? s->algos.fwd_rival : s->algos.bwd_data_rival;
}

static conv_cudnn *state_new(void) {
  conv_cudnn *s = (conv_cudnn *)ct_xcalloc(1, sizeof *s);
  CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s->x));
  CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s->y));
  CT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s->bias));
  CT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&s->w));
  CT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&s->fwd));
  CT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&s->bwd_data));
  CT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&s->bwd_filter));
  return s;
}

extern "C" void ct_conv_cudnn_destroy(ct_layer *l) {
  conv_cudnn *s = (conv_cudnn *)l->gpu_priv;
  if (!s) return;
  cudnnDestroyTensorDescriptor(s->x);
  cudnnDestroyTensorDescriptor(s->y);
  cudnnDestroyTensorDescriptor(s->bias);
  cudnnDestroyFilterDescriptor(s->w);
  cudnnDestroyConvolutionDescriptor(s->fwd);
  cudnnDestroyConvolutionDescriptor(s->bwd_data);
  cudnnDestroyConvolutionDescriptor(s->bwd_filter);
  if (s->bias_scratch) ct_mem_free(l->ctx->device, s->bias_scratch);
  if (s->w16) ct_mem_free(l->ctx->device, s->w16);
  if (s->dw16) ct_mem_free(l->ctx->device, s->dw16);
  ct_conv_graph_free(s->graph);
  for (int d = 0; d < 2; d++)
    if (s->prep[d]) ct_mem_free(l->ctx->device, s->prep[d]);
  ct_igemm_free(s->ig);
  free(s);
  l->gpu_priv = NULL;
}

/* Why cuDNN cannot run this convolution, or NULL. */
static const char *unsupported(const ct_conv *c, const ct_tensor *bottom) {
  if (c->nspatial < 1 || c->nspatial > 3) return "cuDNN convolves 1 to 3 spatial axes";
  if (bottom->count == 0) return "an empty bottom";
  if (bottom->count > INT32_MAX) return "a bottom of more than 2^31 values";
  if ((size_t)c->num * c->y_channels * c->y_spatial > INT32_MAX)
    return "a top of more than 2^31 values";
  return NULL;
}

/* The geometry as cuDNN sees it: at least 2 spatial axes (a 1-D
 * convolution gets a unit leading axis). */
typedef struct cudnn_geom {
  int nd;                         /* spatial axes given to cuDNN: 2 or 3 */
  int xdims[5], ydims[5], wdims[5], bdims[5];
  int pad[3], stride[3], dilation[3];
} cudnn_geom;

static void geom_of(const ct_conv *c, cudnn_geom *g) {
  memset(g, 0, sizeof *g);
  const int lead = c->nspatial == 1 ? 1 : 0;
  g->nd = c->nspatial + lead;
  g->xdims[0] = g->ydims[0] = c->num;
  g->xdims[1] = c->x_channels;
  g->ydims[1] = c->y_channels;
  g->wdims[0] = c->y_channels;
  g->wdims[1] = c->x_channels / c->group;
  g->bdims[0] = 1;
  g->bdims[1] = c->num_output;
  for (int i = 0; i < g->nd; i++) {
    const int k = i - lead;  /* the ct_conv axis, -1 for the unit axis */
    g->xdims[2 + i] = k < 0 ? 1 : c->geom.in[k];
    g->ydims[2 + i] = k < 0 ? 1 : c->geom.out[k];
    g->wdims[2 + i] = k < 0 ? 1 : c->kernel[k];
    g->bdims[2 + i] = 1;
    g->pad[i] = k < 0 ? 0 : c->pad[k];
    g->stride[i] = k < 0 ? 1 : c->stride[k];
    g->dilation[i] = k < 0 ? 1 : c->dilation[k];
  }
}

/* Sets every descriptor for the current shapes; CT_ERR_UNSUPPORTED when
 * cuDNN refuses them or disagrees with Caffe's output size. */
static ct_status set_descriptors(conv_cudnn *s, const ct_conv *c, const cudnn_geom *g,
                                 cudnnMathType_t math, ct_error *err) {
  const int n = g->nd + 2;
  cudnnConvolutionDescriptor_t convs[3] = {s->fwd, s->bwd_data, s->bwd_filter};
  /* values in the layer's type, products accumulated in float32 */
  const ct_layout layout = s->nhwc ? CT_NHWC : CT_NCHW;
  if (ct_cudnn_set_tensor_layout(s->x, s->type, layout, n, g->xdims) != CUDNN_STATUS_SUCCESS ||
      ct_cudnn_set_tensor_layout(s->y, s->type, layout, n, g->ydims) != CUDNN_STATUS_SUCCESS ||
      ct_cudnn_set_tensor(s->bias, n, g->bdims) != CUDNN_STATUS_SUCCESS ||
      cudnnSetFilterNdDescriptor(s->w, ct_cudnn_type(s->type),
                                 s->nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, n, g->wdims) !=
          CUDNN_STATUS_SUCCESS)
    return ct_error_set(err, CT_ERR_UNSUPPORTED, "cuDNN refuses the tensor shapes");
  for (int i = 0; i < 3; i++) {
    if (cudnnSetConvolutionNdDescriptor(convs[i], g->nd, g->pad, g->stride, g->dilation,
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionGroupCount(convs[i], c->group) != CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionMathType(convs[i], math) != CUDNN_STATUS_SUCCESS)
      return ct_error_set(err, CT_ERR_UNSUPPORTED,
                          "cuDNN refuses the pad, stride, dilation or group");
  }
  int out[5];
  if (cudnnGetConvolutionNdForwardOutputDim(s->fwd, s->x, s->w, n, out) != CUDNN_STATUS_SUCCESS ||
      memcmp(out, g->ydims, n * sizeof(int)) != 0)
    return ct_error_set(err, CT_ERR_UNSUPPORTED, "cuDNN computes another output size");
  return CT_OK;
}

static void key_of(const ct_conv *c, const cudnn_geom *g, bool tf32, bool deterministic,
                   int rival, ct_cudnn_conv_key *k) {
  memset(k, 0, sizeof *k);
  k->nspatial = g->nd;
  k->n = c->num;
  k->x_channels = c->x_channels;
  k->y_channels = c->y_channels;
  k->group = c->group;
  for (int i = 0; i < g->nd; i++) {
    k->x_dims[i] = g->xdims[2 + i];
    k->y_dims[i] = g->ydims[2 + i];
    k->kernel[i] = g->wdims[2 + i];
    k->pad[i] = g->pad[i];
    k->stride[i] = g->stride[i];
    k->dilation[i] = g->dilation[i];
  }
  k->tf32 = tf32;
  k->deterministic = deterministic;
  k->rival = rival;
}


/* The CAFFE engine's im2col scratch is not needed while cuDNN runs the layer
 * (ct_conv_reshape makes it again when the CAFFE engine takes over). */
static void drop_caffe_scratch(ct_layer *l, ct_conv *c) {
  if (c->col->capacity) {
    ct_tensor_free(c->col);
    c->col = ct_tensor_new(l->ctx->device, NULL);
  }
  if (c->rows->capacity) {
    ct_tensor_free(c->rows);
    c->rows = ct_tensor_new(l->ctx->device, NULL);
  }
  c->col_x = NULL;
}

/* The most multiply-adds of a forward pass for which Cortado's kernels race
 * cuDNN: small convolutions (cifar10_quick's and LeNet's are 0.02-0.66 G
 * multiply-adds), where cuDNN's kernels run at 12-31 TFLOP/s on an H200
 * (its FP32 kernels, even with TF32 allowed) and Cortado's FP32 FMA and
 * TF32 tensor-core kernels can compete; on large ones cuDNN's tuned kernels
 * win and the race would only lengthen the setup. */
#define IGEMM_MAX_MACS ((double)(1u << 31))

/* The implicit-GEMM geometry of a small 2-D Convolution with group 1 (false
 * for anything else, and for geometries the kernels cannot run). */
static bool igemm_geom_of(const ct_conv *c, const cudnn_geom *g, ct_igemm_geom *ig) {
  if (c->reverse || c->group != 1 || g->nd != 2) return false;
  *ig = (ct_igemm_geom){g->xdims[0], g->xdims[1], g->xdims[2], g->xdims[3],
                        g->ydims[1], g->ydims[2], g->ydims[3],
                        g->wdims[2], g->wdims[3], g->stride[0], g->stride[1],
                        g->pad[0], g->pad[1], g->dilation[0], g->dilation[1]};
  const double macs = (double)ig->n * ig->m * ig->oh * ig->ow * ig->c * ig->kh * ig->kw;
  return macs <= IGEMM_MAX_MACS && !ct_igemm_unsupported(ig, CT_IGEMM_FWD);
}

typedef struct rival_user {
  ct_context *ctx;
  ct_igemm *ig;
} rival_user;

/* ct_cudnn_conv_rival's time for the implicit-GEMM kernels. */
static bool rival_time(void *user, int dir, void *x, void *w, void *y, void *ws, size_t ws_bytes,
                       int *choice, float *ms, size_t *bytes) {
  const rival_user *u = (const rival_user *)user;
  if (!ct_igemm_time(u->ctx, u->ig, (ct_igemm_dir)dir, (float *)x, (float *)w, (float *)y,
                     (float *)ws, ws_bytes, choice, ms))
    return false;
  *bytes = ct_igemm_workspace(u->ig, (ct_igemm_dir)dir, *choice);
  return true;
}

/* The most workspace of a weight gradient that may run on the compute
 * stream beside the gradient stream's work: what it adds to a net's compute
 * workspace at most. */
#define WGRAD_BESIDE_MAX_BYTES ((size_t)8 << 20)

static ct_status plan(ct_layer *l, conv_cudnn *s, const ct_conv *c, ct_error *err) {
  cudnn_geom g;
  geom_of(c, &g);
  s->type = l->dtype;
  const bool half = s->type != CT_F32;
  s->nhwc = l->layout == CT_NHWC;
  CT_ASSERT(!s->nhwc || (half && !c->reverse));
  /* 16-bit values always on tensor cores, float32 ones with TF32 when allowed */
  s->tf32 = half || l->ctx->tf32;
  const cudnnMathType_t base = s->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  CT_TRY(set_descriptors(s, c, &g, base, err));
  /* Cortado's implicit-GEMM kernels (float32) race cuDNN where they can run. */
  ct_igemm_free(s->ig);
  s->ig = NULL;
  ct_igemm_geom ig;
  const ct_igemm_mode_t mode = half ? CT_IGEMM_OFF : ct_igemm_mode();
  if (mode != CT_IGEMM_OFF && igemm_geom_of(c, &g, &ig))
    s->ig = ct_igemm_new(l->ctx, &ig, s->tf32);
  rival_user user = {l->ctx, s->ig};
  const ct_cudnn_conv_rival rival = {rival_time, &user, mode == CT_IGEMM_FORCE};
  ct_cudnn_conv_key key;
  key_of(c, &g, s->tf32, l->ctx->deterministic, s->ig ? (int)mode : 0, &key);
  key.dtype = (int)s->type;
  key.layout = (int)l->layout;
  if (half) {
    const size_t wc = (size_t)g.wdims[0] * g.wdims[1] * g.wdims[2] * g.wdims[3] *
                      (g.nd == 3 ? (size_t)g.wdims[4] : 1);
    if (wc > s->w_count) {
      if (s->w16) ct_mem_free(l->ctx->device, s->w16);
      if (s->dw16) ct_mem_free(l->ctx->device, s->dw16);
      s->w16 = ct_mem_alloc(l->ctx->device, wc * ct_dtype_size(s->type));
      s->dw16 = ct_mem_alloc(l->ctx->device, wc * ct_dtype_size(s->type));
      s->w_count = wc;
    }
  }
  ct_conv_graph_free(s->graph);
  s->graph = NULL;
  if (half && !c->reverse) {
    ct_conv_graph_geom gg;
    memset(&gg, 0, sizeof gg);
    gg.nd = g.nd;
    gg.n = c->num;
    gg.c = c->x_channels;
    gg.k = c->y_channels;
    gg.group = c->group;
    for (int i = 0; i < g.nd; i++) {
      gg.in[i] = g.xdims[2 + i];
      gg.out[i] = g.ydims[2 + i];
      gg.kernel[i] = g.wdims[2 + i];
      gg.pad[i] = g.pad[i];
      gg.stride[i] = g.stride[i];
      gg.dilation[i] = g.dilation[i];
    }
    gg.type = s->type;
    gg.layout = l->layout;
    ct_error gerr;
    if (ct_conv_graph_plan(l->ctx, &gg, &s->graph, &gerr) != CT_OK)
      LOG_INFO("layer '%s': %s; cuDNN's legacy calls run it", l->name, gerr.msg);
  }
  if (s->graph) {
    memset(&s->algos, 0, sizeof s->algos);
    s->algos.fwd_bytes = ct_conv_graph_workspace(s->graph, CT_CONV_GRAPH_FWD);
    s->algos.bwd_data_bytes = ct_conv_graph_workspace(s->graph, CT_CONV_GRAPH_BWD_DATA);
    s->algos.bwd_filter_bytes = ct_conv_graph_workspace(s->graph, CT_CONV_GRAPH_BWD_FILTER);
    s->algos.benchmarked = true;
  } else {
    CT_TRY(ct_cudnn_conv_find(l->ctx, &key, s->x, s->w, s->fwd, s->y, s->ig ? &rival : NULL,
                              &s->algos, err));
  }
  if (!s->algos.fwd_rival && !s->algos.bwd_data_rival && !s->algos.bwd_filter_rival) {
    ct_igemm_free(s->ig);
    s->ig = NULL;
  }
  CT_CUDNN_TRY(err, cudnnSetConvolutionMathType(s->fwd, s->algos.fwd_math));
  CT_CUDNN_TRY(err, cudnnSetConvolutionMathType(s->bwd_data, s->algos.bwd_data_math));
  CT_CUDNN_TRY(err, cudnnSetConvolutionMathType(s->bwd_filter, s->algos.bwd_filter_math));
  /* With a gradient stream the weight gradient runs there (see the
   * backward) unless its workspace is too large for it: then the compute
   * stream's workspace holds it too. */
  s->wgrad_side = l->ctx->grads && s->algos.bwd_filter_bytes <= CT_GRAD_WORKSPACE_MAX_BYTES;
  size_t ws = s->algos.fwd_bytes;
  if (s->algos.bwd_data_bytes > ws) ws = s->algos.bwd_data_bytes;
  /* a small weight gradient may run on the compute stream (a net's first
   * convolution's, see the backward): its workspace counts there too */
  if ((!s->wgrad_side || s->algos.bwd_filter_bytes <= WGRAD_BESIDE_MAX_BYTES) &&
      s->algos.bwd_filter_bytes > ws)
    ws = s->algos.bwd_filter_bytes;
  const int *top_dims = c->reverse ? g.xdims : g.ydims;
  s->top_spatial = 1;
  for (int i = 0; i < g.nd; i++) s->top_spatial *= (size_t)top_dims[2 + i];
  size_t bias_count =
      !c->bias_term ? 0
      : s->nhwc     ? ct_bias_grad_scratch(c->num * (int)s->top_spatial, c->num_output, 1)
                    : ct_bias_grad_scratch(c->num, c->num_output, s->top_spatial);
  /* a 16-bit layer may take the ReLU's backward (ct_conv_cudnn_absorb_relu) */
  if (c->bias_term && half && ct_channel_sums_scratch((size_t)c->num_output) > bias_count)
    bias_count = ct_channel_sums_scratch((size_t)c->num_output);
  if (bias_count > s->bias_scratch_count) {
    if (s->bias_scratch) ct_mem_free(l->ctx->device, s->bias_scratch);
    s->bias_scratch = (float *)ct_mem_alloc(l->ctx->device, bias_count * sizeof(float));
    s->bias_scratch_count = bias_count;
  }
  /* the Winograd configurations' transformed filters, in buffers of the
   * layer's own: ct_conv_cudnn_prepare fills them beside the layers below */
  for (int d = 0; d < 2; d++) {
    const int rival = prep_rival(s, d);
    s->prep_bytes[d] = rival ? ct_igemm_prepared_bytes(s->ig, k_prep_dirs[d], rival) : 0;
    if (s->prep_bytes[d] > s->prep_alloc[d]) {
      if (s->prep[d]) ct_mem_free(l->ctx->device, s->prep[d]);
      s->prep[d] = (float *)ct_mem_alloc(l->ctx->device, s->prep_bytes[d]);
      s->prep_alloc[d] = s->prep_bytes[d];
    }
  }
  s->prepared = s->prepared_bwd = s->prepared_data = false;
  ct_context_workspace(l->ctx, ws);
  if (s->wgrad_side) ct_context_grad_workspace(l->ctx, s->algos.bwd_filter_bytes);
  return CT_OK;
}

extern "C" ct_status ct_conv_cudnn_reshape(ct_layer *l, ct_tensor *const *bottom,
                                           ct_tensor *const *top, ct_error *err) {
  ct_conv *c = (ct_conv *)l->priv;
  const Caffe__ConvolutionParameter *p = l->param->convolution_param;
  const int engine = p ? (int)p->engine : CT_ENGINE_DEFAULT;
  /* depthwise layers on Cortado's kernels unless cuDNN is asked for by name */
  if (engine != CT_ENGINE_CUDNN && !c->relu_fused && !c->bias_deferred && ct_conv_dw_fits(c)) {
    ct_conv_cudnn_destroy(l);
    if (!c->dw)
      LOG_INFO("layer '%s': depthwise kernels (group = channels = %d, %d filter%s each)", l->name,
               c->group, c->y_channels / c->group, c->y_channels == c->group ? "" : "s");
    c->dw = ct_conv_dw_plan(c->dw, c, l->ctx->device);
    drop_caffe_scratch(l, c);
    return CT_OK;
  }
  ct_conv_dw_free(c->dw, l->ctx->device);
  c->dw = NULL;
  const char *why = unsupported(c, bottom[0]);
  if ((c->relu_fused || c->bias_deferred) && why)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "fused with the %s after it, but cuDNN cannot run the new shape (%s); "
                        "build the net without fusion", c->relu_fused ? "ReLU" : "Pooling", why);
  if (!ct_cudnn_wanted(l->name, engine, why)) {
    ct_conv_cudnn_destroy(l);
    if (l->dtype != CT_F32)
      return ct_error_set(err, CT_ERR_UNSUPPORTED,
                          "%s convolutions run on cuDNN only, which is off or cannot run this "
                          "one%s%s", ct_dtype_name(l->dtype), why ? ": " : "", why ? why : "");
    return CT_OK;
  }
  conv_cudnn *s = (conv_cudnn *)l->gpu_priv;
  if (!s) s = state_new();
  ct_status st = plan(l, s, c, err);
  if (st == CT_ERR_UNSUPPORTED && !c->relu_fused && !c->bias_deferred && l->dtype == CT_F32) {
    /* Expected for configurations cuDNN lacks: the CAFFE engine runs them. */
    if (engine == CT_ENGINE_CUDNN)
      LOG_WARNING("layer '%s': %s; using the CAFFE engine", l->name, err->msg);
    l->gpu_priv = s;
    ct_conv_cudnn_destroy(l);
    return CT_OK;
  }
  l->gpu_priv = s;
  if (st != CT_OK) {
    ct_conv_cudnn_destroy(l);
    return st;
  }
  drop_caffe_scratch(l, c);
  char algos[256];
  LOG_INFO("layer '%s': cuDNN %s", l->name, ct_conv_cudnn_describe(l, algos, sizeof algos));
  return CT_OK;
}

/* ---------------------------------------------------------------- forward / backward */

static cudnnHandle_t handle(const ct_context *ctx) { return (cudnnHandle_t)ctx->cudnn; }

/* Y = conv(X, W), overwriting Y. */
static void x_to_y(const ct_layer *l, const conv_cudnn *s, const float *w, const float *x,
                   float *y) {
  CT_CUDNN_CHECK(cudnnConvolutionForward(handle(l->ctx), &k_one, s->x, x, s->w, w, s->fwd,
                                         s->algos.fwd, l->ctx->workspace,
                                         l->ctx->workspace_bytes, &k_zero, s->y, y));
}

/* X = conv^T(Y, W), overwriting X. */
static void y_to_x(const ct_layer *l, const conv_cudnn *s, const float *w, const float *y,
                   float *x) {
  if (s->algos.bwd_data_rival) {
    const float *prep = s->prepared_bwd && s->prepared_data ? s->prep[1] : NULL;
    ct_igemm_backward_data(l->ctx, s->ig, s->algos.bwd_data_rival, y, w, prep,
                           (float *)l->ctx->workspace, l->ctx->workspace_bytes, x);
    return;
  }
  CT_CUDNN_CHECK(cudnnConvolutionBackwardData(handle(l->ctx), &k_one, s->w, w, s->y, y, s->bwd_data,
                                              s->algos.bwd_data, l->ctx->workspace,
                                              l->ctx->workspace_bytes, &k_zero, s->x, x));
}

/* dw += the weight gradient of Y = conv(X, W) for dy, enqueued with ctx
 * (the layer's, or the gradient stream's). */
static void weight_grad(ct_context *ctx, const conv_cudnn *s, const float *x, const float *dy,
                        float *dw) {
  if (s->algos.bwd_filter_rival) {
    ct_igemm_backward_filter(ctx, s->ig, s->algos.bwd_filter_rival, x, dy, (float *)ctx->workspace,
                             ctx->workspace_bytes, dw);
    return;
  }
  CT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle(ctx), &k_one, s->x, x, s->y, dy,
                                                s->bwd_filter, s->algos.bwd_filter,
                                                ctx->workspace, ctx->workspace_bytes, &k_one,
                                                s->w, dw));
}

extern "C" bool ct_conv_cudnn_absorb_relu(ct_layer *l, bool backward_ok, bool *backward_too) {
  ct_conv *c = (ct_conv *)l->priv;
  const conv_cudnn *s = (const conv_cudnn *)l->gpu_priv;
  /* 16-bit layers clamp in the pass that adds their bias (forward16) */
  if (!s || c->reverse || !c->bias_term || l->nbottom != 1 || c->relu_fused) return false;
  if ((size_t)c->num * c->y_channels * c->y_spatial > 0xffffffffu) return false;
  c->relu_fused = true;
  /* and gate the gradient in the pass that sums the bias's (backward16) */
  c->relu_bwd_fused = backward_ok && s->type != CT_F32;
  *backward_too = c->relu_bwd_fused;
  return true;
}

extern "C" bool ct_conv_cudnn_defer_bias(ct_layer *l) {
  ct_conv *c = (ct_conv *)l->priv;
  if (!l->gpu_priv || l->dtype != CT_F32 || c->reverse || !c->bias_term || l->nbottom != 1 || c->relu_fused ||
      c->bias_deferred)
    return false;
  c->bias_deferred = true;
  return true;
}

extern "C" bool ct_conv_cudnn_prepare(ct_layer *l, ct_context *side, bool bottom_grad) {
  conv_cudnn *s = (conv_cudnn *)l->gpu_priv;
  /* a net's first convolution computes no bottom gradient: its backward
   * data's transform (raced all the same) would be wasted, and would make
   * the layer the first that waits for the gradient stream */
  const bool want[2] = {s->prep_bytes[0] > 0, s->prep_bytes[1] > 0 && bottom_grad};
  if (!want[0] && !want[1]) return false;
  if (!side) return true;
  for (int d = 0; d < 2; d++)
    if (want[d])
      ct_igemm_prepare(side, s->ig, k_prep_dirs[d], prep_rival(s, d), ct_f32(l->params[0]),
                       s->prep[d]);
  s->prepared = true;
  s->prepared_data = want[1];
  return true;
}

/* The filter (K, C / group, kernel...) as (K, C / group, kernel values). */
static void filter_dims(const ct_conv *c, const conv_cudnn *s, size_t *k, size_t *cg,
                        size_t *taps) {
  *k = (size_t)c->y_channels;
  *cg = (size_t)(c->x_channels / c->group);
  *taps = s->w_count / (*k * *cg);
}

/* 16-bit Convolution (not Deconvolution, no rivals, no deferred bias): the
 * master weights converted (and moved channels-last for an NHWC layer),
 * cuDNN, the float32 bias added in the type, and the fused ReLU in the same
 * pass.  A channels-last top is, for the bias, (N x spatial) rows of the
 * channels. */
static void forward16(ct_layer *l, const ct_conv *c, conv_cudnn *s, ct_tensor *const *bottom,
                      ct_tensor *const *top) {
  CT_ASSERT(!c->reverse && !c->bias_deferred && !s->ig && (!c->relu_fused || c->bias_term));
  if (s->nhwc) {
    size_t k, cg, taps;
    filter_dims(c, s, &k, &cg, &taps);
    ct_gpu_transpose_convert(l->ctx, k, cg, taps, CT_F32, l->params[0]->data, s->type, s->w16,
                             false);
  } else {
    ct_gpu_convert(l->ctx, s->w_count, CT_F32, l->params[0]->data, s->type, s->w16);
  }
  const int rows = s->nhwc ? c->num * (int)c->y_spatial : c->num;
  const size_t spatial = s->nhwc ? 1 : c->y_spatial;
  for (int i = 0; i < l->nbottom; i++) {
    if (s->graph)
      ct_conv_graph_run(l->ctx, s->graph, CT_CONV_GRAPH_FWD, bottom[i]->data, s->w16, top[i]->data,
                        l->ctx->workspace);
    else
      CT_CUDNN_CHECK(cudnnConvolutionForward(handle(l->ctx), &k_one, s->x, bottom[i]->data, s->w,
                                             s->w16, s->fwd, s->algos.fwd, l->ctx->workspace,
                                             l->ctx->workspace_bytes, &k_zero, s->y,
                                             top[i]->data));
    if (c->bias_term)
      ct_bias_add_gpu_typed(l->ctx, s->type, (const float *)l->params[1]->data, rows,
                            c->y_channels, spatial, c->relu_fused, top[i]->data);
  }
}

/* Its backward: the weight gradient in the type into dw16, then added into
 * the master's diff (both on the stream that computes it). */
static void backward16(ct_layer *l, const ct_conv *c, conv_cudnn *s, ct_tensor *const *top,
                       const bool *propagate_down, ct_tensor *const *bottom) {
  const bool wgrad = l->param_propagate_down[0];
  bool bgrad = c->bias_term && l->param_propagate_down[1];
  if (c->relu_bwd_fused) {
    /* the ReLU's backward, in place, and the bias gradient in the same pass,
     * on the compute stream before the gradient stream forks */
    CT_ASSERT(l->nbottom == 1 && c->relu_fused);
    const ct_channel_geom g = {s->type, s->nhwc, (size_t)c->num, (size_t)c->num_output,
                               s->top_spatial};
    ct_channel_sums_gpu(l->ctx, &g, top[0]->diff, NULL, top[0]->data, s->bias_scratch, true, NULL,
                        bgrad ? (float *)l->params[1]->diff : NULL, NULL, top[0]->diff);
    bgrad = false;
  }
  ct_context *pctx = (wgrad || bgrad) && s->wgrad_side ? ct_context_grad_begin(l->ctx) : l->ctx;
  for (int i = 0; i < l->nbottom; i++) {
    if (!propagate_down[i]) continue;
    if (s->graph)
      ct_conv_graph_run(l->ctx, s->graph, CT_CONV_GRAPH_BWD_DATA, top[i]->diff, s->w16,
                        bottom[i]->diff, l->ctx->workspace);
    else
      CT_CUDNN_CHECK(cudnnConvolutionBackwardData(
          handle(l->ctx), &k_one, s->w, s->w16, s->y, top[i]->diff, s->bwd_data,
          s->algos.bwd_data, l->ctx->workspace, l->ctx->workspace_bytes, &k_zero, s->x,
          bottom[i]->diff));
  }
  for (int i = 0; i < l->nbottom; i++) {
    if (wgrad && s->graph) {
      ct_conv_graph_run(pctx, s->graph, CT_CONV_GRAPH_BWD_FILTER, bottom[i]->data, top[i]->diff,
                        s->dw16, pctx->workspace);
    } else if (wgrad) {
      CT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          handle(pctx), &k_one, s->x, bottom[i]->data, s->y, top[i]->diff, s->bwd_filter,
          s->algos.bwd_filter, pctx->workspace, pctx->workspace_bytes, &k_zero, s->w, s->dw16));
    }
    if (wgrad) {
      if (s->nhwc) {
        size_t k, cg, taps;
        filter_dims(c, s, &k, &cg, &taps);
        ct_gpu_transpose_convert(pctx, k, taps, cg, s->type, s->dw16, CT_F32,
                                 l->params[0]->diff, true);
      } else {
        ct_gpu_axpy_from(pctx, s->w_count, 1.0f, s->type, s->dw16, (float *)l->params[0]->diff);
      }
    }
    if (bgrad && s->nhwc)
      ct_bias_grad_gpu_typed(pctx, s->type, top[i]->diff, c->num * (int)s->top_spatial,
                             c->num_output, 1, s->bias_scratch, (float *)l->params[1]->diff);
    else if (bgrad)
      ct_bias_grad_gpu_typed(pctx, s->type, top[i]->diff, c->num, c->num_output, s->top_spatial,
                             s->bias_scratch, (float *)l->params[1]->diff);
  }
  s->prepared_bwd = false;
  if (pctx != l->ctx && !l->grad_side) ct_context_grad_join(l->ctx);
}

extern "C" ct_status ct_conv_cudnn_forward(ct_layer *l, ct_tensor *const *bottom,
                                           ct_tensor *const *top, ct_error *err) {
  const ct_conv *c = (const ct_conv *)l->priv;
  conv_cudnn *s = (conv_cudnn *)l->gpu_priv;
  if (s->type != CT_F32) {
    forward16(l, c, s, bottom, top);
    return CT_OK;
  }
  const float *w = ct_f32(l->params[0]);
  /* a preparation feeds this forward and the backward after it, no other */
  const bool prepared = s->prepared;
  s->prepared = false;
  s->prepared_bwd = prepared;
  if (s->algos.fwd_rival) {
    /* bias, and the fused ReLU, in the kernel's epilogue */
    CT_ASSERT(!c->relu_fused || (l->nbottom == 1 && c->bias_term));
    const float *prep = prepared && s->prep_bytes[0] ? s->prep[0] : NULL;
    for (int i = 0; i < l->nbottom; i++)
      ct_igemm_forward(l->ctx, s->ig, s->algos.fwd_rival, ct_f32(bottom[i]), w, prep,
                       c->bias_term && !c->bias_deferred ? ct_f32(l->params[1]) : NULL,
                       c->relu_fused, (float *)l->ctx->workspace, l->ctx->workspace_bytes,
                       ct_f32(top[i]));
    return CT_OK;
  }
  if (c->relu_fused) {
    CT_ASSERT(l->nbottom == 1 && c->bias_term);
    x_to_y(l, s, w, ct_f32(bottom[0]), ct_f32(top[0]));
    ct_bias_relu_gpu(l->ctx, ct_f32(l->params[1]), c->num, c->y_channels, c->y_spatial, ct_f32(top[0]));
    return CT_OK;
  }
  /* The top is Y for Convolution and X for Deconvolution. */
  const cudnnTensorDescriptor_t top_desc = c->reverse ? s->x : s->y;
  for (int i = 0; i < l->nbottom; i++) {
    if (c->reverse) y_to_x(l, s, w, ct_f32(bottom[i]), ct_f32(top[i]));
    else x_to_y(l, s, w, ct_f32(bottom[i]), ct_f32(top[i]));
    if (c->bias_term && !c->bias_deferred)
      CT_CUDNN_CHECK(cudnnAddTensor(handle(l->ctx), &k_one, s->bias, l->params[1]->data, &k_one,
                                    top_desc, top[i]->data));
  }
  return CT_OK;
}

extern "C" void ct_conv_cudnn_backward(ct_layer *l, ct_tensor *const *top,
                                       const bool *propagate_down, ct_tensor *const *bottom) {
  const ct_conv *c = (const ct_conv *)l->priv;
  conv_cudnn *s = (conv_cudnn *)l->gpu_priv;
  if (s->type != CT_F32) {
    backward16(l, c, s, top, propagate_down, bottom);
    return;
  }
  const bool wgrad = l->param_propagate_down[0];
  const bool bgrad = c->bias_term && l->param_propagate_down[1];
  const float *w = ct_f32(l->params[0]);
  /* The parameter gradients go on the gradient stream (forked here, where
   * the top diffs are final), beside the bottom gradients, which stay on the
   * compute stream: they are the critical path.  Without the net's grad_side
   * (shared weights, or a layer run alone) the compute stream waits for them
   * at once: the stream is still where the weight gradient's workspace is. */
  ct_context *pctx = (wgrad || bgrad) && s->wgrad_side ? ct_context_grad_begin(l->ctx) : l->ctx;
  /* With no bottom gradient (a net's first convolution) the compute stream
   * has nothing else to do: the bias gradient runs there, and so does the
   * weight gradient when the compute stream's workspace holds it, beside
   * the gradient stream's work of the layers above (on an H100,
   * cifar10_quick's conv1 filter gradient, 38 us, ran after conv2's, 80 us,
   * on the gradient stream); the gradient stream then waits for them, so
   * that the layer's parameters are final where the net expects them.  The
   * bias gradient goes on the other stream than the weight gradient, beside
   * it: cifar10_quick's conv1 bias gradient (9 us on an H100) followed its
   * filter gradient on the compute stream, at the end of the iteration's
   * critical path. */
  bool down = false;
  for (int i = 0; i < l->nbottom; i++) down = down || propagate_down[i];
  const bool first = pctx != l->ctx && !down;
  ct_context *wctx =
      first && l->ctx->workspace_bytes >= s->algos.bwd_filter_bytes ? l->ctx : pctx;
  ct_context *bctx = first && wgrad && wctx == pctx ? l->ctx : pctx;
  for (int i = 0; i < l->nbottom; i++) {
    if (!propagate_down[i]) continue;
    if (c->reverse) x_to_y(l, s, w, ct_f32_diff(top[i]), ct_f32_diff(bottom[i])); /* dbottom = conv(dtop) */
    else y_to_x(l, s, w, ct_f32_diff(top[i]), ct_f32_diff(bottom[i]));
  }
  for (int i = 0; i < l->nbottom; i++) {
    const float *dtop = ct_f32_diff(top[i]);
    /* Our own reduction, not cudnnConvolutionBackwardBias, which took a
     * fifth of cifar10_quick's iteration on an H100 (bench/kernel_profile.sh). */
    /* Deconvolution: top X = conv^T(bottom Y), so dW from (X = dtop, dY = bottom). */
    if (wgrad && c->reverse) weight_grad(wctx, s, dtop, ct_f32(bottom[i]), ct_f32_diff(l->params[0]));
    else if (wgrad) weight_grad(wctx, s, ct_f32(bottom[i]), dtop, ct_f32_diff(l->params[0]));
    if (bgrad)
      ct_bias_grad_gpu(bctx, dtop, c->num, c->num_output, s->top_spatial, s->bias_scratch,
                       ct_f32_diff(l->params[1]));
  }
  s->prepared_bwd = false;
  if ((bgrad && bctx != pctx) || (wgrad && wctx != pctx)) ct_context_grad_begin(l->ctx);
  if (pctx != l->ctx && !l->grad_side) ct_context_grad_join(l->ctx);
}

extern "C" char *ct_conv_cudnn_describe(const ct_layer *l, char *buf, size_t len) {
  const conv_cudnn *s = (const conv_cudnn *)l->gpu_priv;
  if (!s) {
    snprintf(buf, len, "CAFFE engine");
    return buf;
  }
  if (s->graph) {
    char e[3][48];
    snprintf(buf, len, "graph fwd %s %.1fM | bwd-data %s %.1fM | bwd-filter %s %.1fM",
             ct_conv_graph_describe(s->graph, CT_CONV_GRAPH_FWD, e[0], 48),
             s->algos.fwd_bytes / 1048576.0,
             ct_conv_graph_describe(s->graph, CT_CONV_GRAPH_BWD_DATA, e[1], 48),
             s->algos.bwd_data_bytes / 1048576.0,
             ct_conv_graph_describe(s->graph, CT_CONV_GRAPH_BWD_FILTER, e[2], 48),
             s->algos.bwd_filter_bytes / 1048576.0);
    return buf;
  }
  const ct_cudnn_conv_algos *a = &s->algos;
  char names[3][32];
  const char *fwd = a->fwd_rival ? ct_igemm_choice_name(CT_IGEMM_FWD, a->fwd_rival, names[0], 32)
                                 : ct_cudnn_fwd_algo_name(a->fwd);
  const char *bwd_data = a->bwd_data_rival ? ct_igemm_choice_name(CT_IGEMM_BWD_DATA,
                                                                  a->bwd_data_rival, names[1], 32)
                                           : ct_cudnn_bwd_data_algo_name(a->bwd_data);
  const char *bwd_filter = a->bwd_filter_rival
                               ? ct_igemm_choice_name(CT_IGEMM_BWD_FILTER, a->bwd_filter_rival,
                                                      names[2], 32)
                               : ct_cudnn_bwd_filter_algo_name(a->bwd_filter);
  /* a star: TF32 allowed (for Cortado's kernels: a TF32 configuration) */
  const bool fwd_star = a->fwd_rival ? ct_igemm_choice_tf32(CT_IGEMM_FWD, a->fwd_rival)
                                     : a->fwd_math != CUDNN_FMA_MATH;
  const bool data_star = a->bwd_data_rival
                             ? ct_igemm_choice_tf32(CT_IGEMM_BWD_DATA, a->bwd_data_rival)
                             : a->bwd_data_math != CUDNN_FMA_MATH;
  const bool filter_star = a->bwd_filter_rival
                               ? ct_igemm_choice_tf32(CT_IGEMM_BWD_FILTER, a->bwd_filter_rival)
                               : a->bwd_filter_math != CUDNN_FMA_MATH;
  snprintf(buf, len, "fwd %s%s %.1fM | bwd-data %s%s %.1fM | bwd-filter %s%s %.1fM%s", fwd,
           fwd_star ? "*" : "", a->fwd_bytes / 1048576.0, bwd_data, data_star ? "*" : "",
           a->bwd_data_bytes / 1048576.0, bwd_filter, filter_star ? "*" : "",
           a->bwd_filter_bytes / 1048576.0, a->benchmarked ? "" : " (heuristics)");
  return buf;
}

extern "C" bool ct_conv_cudnn_race_ms(const ct_layer *l, int dir, float *cudnn_ms,
                                      float *own_ms) {
  const conv_cudnn *s = (const conv_cudnn *)l->gpu_priv;
  if (!s || dir < 0 || dir > 2 || s->algos.race_cudnn_ms[dir] <= 0.0f) return false;
  *cudnn_ms = s->algos.race_cudnn_ms[dir];
  *own_ms = s->algos.race_rival_ms[dir];
  return true;
}
