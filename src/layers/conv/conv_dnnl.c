/* oneDNN convolution engine (conv_dnnl.h).  Compiled only when oneDNN is
 * found (CMake drops *_dnnl.c otherwise). */
#include "layers/conv/conv_dnnl.h"

#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "layers/conv/conv_direct.h"
#include "math/typed.h"

/* A failed call while running a primitive that was made for these very
 * shapes is a bug (or memory exhaustion), not bad input. */
#define DNNL_CHECK(call)                                                           \
  do {                                                                             \
    dnnl_status_t st_ = (call);                                                    \
    CT_ASSERTF(st_ == dnnl_success, "%s:%d: %s failed (oneDNN status %d)", __FILE__, \
               __LINE__, #call, (int)st_);                                         \
  } while (0)

static dnnl_engine_t g_engine;
static pthread_once_t g_engine_once = PTHREAD_ONCE_INIT;
static dnnl_status_t g_engine_status;

static void engine_init(void) { g_engine_status = dnnl_engine_create(&g_engine, dnnl_cpu, 0); }

void ct_conv_dnnl_gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const float *A, const float *B, float beta, float *C) {
  if (M == 0 || N == 0) return;
  DNNL_CHECK(dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A,
                        trans_a ? M : K, B, trans_b ? K : N, beta, C, N));
}

/* ---------------------------------------------------------------- arguments */

enum { ROLE_X, ROLE_Y, ROLE_OWN };  /* slots X and Y are shared; weights, outputs own theirs */

/* A tensor in the layout a primitive wants, when that is not the blob's. */
typedef struct buffer {
  dnnl_memory_desc_t md;
  dnnl_memory_t mem;  /* allocated on first use */
  int role;
  const void *holds;  /* the blob whose values it holds (inputs of roles X and Y) */
} buffer;

/* One tensor argument of a primitive: the blob's layout (user), and, when the
 * primitive wants another, the buffer and the reorder between the two. */
typedef struct arg {
  dnnl_memory_t user; /* the blob's layout; data handle set per call */
  buffer *buf;        /* NULL: the primitive takes the user layout */
  dnnl_primitive_t reorder; /* user -> buffer for inputs, buffer -> user for outputs */
} arg;

typedef struct op {
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t prim;
} op;

#define MAX_BUFFERS 12

struct ct_conv_dnnl {
  dnnl_stream_t stream;
  /* The layer's state when planned: only its geometry fields are read (num,
   * channels, group, nspatial, geom), by the direct kernels. */
  ct_conv conv;
  bool y_bias;
  ct_dtype act;       /* of x and y and their gradients (weights and bias: float32) */
  ct_layout layout;   /* of x and y and their gradients: NCHW or channels-last */
  size_t w_count;
  /* y_from_x (forward), x_from_y (backward data), weight_grad (backward weights) */
  op fwd, bwd_data, bwd_weights;
  arg fwd_x, fwd_w, fwd_b, fwd_y;
  arg bd_dy, bd_w, bd_dx;
  arg bw_x, bw_dy, bw_dw, bw_db;
  buffer bufs[MAX_BUFFERS];
  int nbufs;
  bool direct;        /* forward and backward weights by conv_direct.h's kernels */
  /* 16-bit layers whose geometry the direct kernels fit (few channels, as
   * a net's first convolution) where that ran faster than oneDNN's
   * (pick_weight_grad): the weight gradient by the float32 direct kernel on
   * float32 copies (x32, y32) */
  bool direct16;
  float *x32, *y32;
  float *dw_tmp;      /* (w_count) the weight gradient before it is added */
  float *db_tmp;      /* (y_channels) */
};

static buffer *buffer_for(ct_conv_dnnl *f, const dnnl_memory_desc_t *md, int role) {
  if (role != ROLE_OWN)
    for (int i = 0; i < f->nbufs; i++)
      if (f->bufs[i].role == role && dnnl_memory_desc_equal(&f->bufs[i].md, md))
        return &f->bufs[i];
  CT_ASSERT(f->nbufs < MAX_BUFFERS);
  buffer *b = &f->bufs[f->nbufs++];
  b->md = *md;
  b->role = role;
  return b;
}

/* Sets a up for a primitive argument whose layout is want, for a blob in
 * layout user_md.  Fails when the reorder cannot be made. */
static dnnl_status_t arg_init(ct_conv_dnnl *f, arg *a, const dnnl_memory_desc_t *user_md,
                              const dnnl_memory_desc_t *want, int role, bool input) {
  dnnl_status_t s = dnnl_memory_create(&a->user, user_md, g_engine, DNNL_MEMORY_NONE);
  if (s != dnnl_success || dnnl_memory_desc_equal(user_md, want)) return s;
  a->buf = buffer_for(f, want, role);
  dnnl_primitive_desc_t pd;
  s = input ? dnnl_reorder_primitive_desc_create(&pd, user_md, g_engine, want, g_engine, NULL)
            : dnnl_reorder_primitive_desc_create(&pd, want, g_engine, user_md, g_engine, NULL);
  if (s != dnnl_success) return s;
  s = dnnl_primitive_create(&a->reorder, pd);
  dnnl_primitive_desc_destroy(pd);
  return s;
}

static void arg_free(arg *a) {
  if (a->user) dnnl_memory_destroy(a->user);
  if (a->reorder) dnnl_primitive_destroy(a->reorder);
}

static dnnl_memory_t buffer_mem(buffer *b) {
  if (!b->mem) DNNL_CHECK(dnnl_memory_create(&b->mem, &b->md, g_engine, DNNL_MEMORY_ALLOCATE));
  return b->mem;
}

static void run_reorder(ct_conv_dnnl *f, dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to) {
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  DNNL_CHECK(dnnl_primitive_execute(r, f->stream, 2, args));
}

/* The memory to pass for an input blob p: the blob itself, or its reorder
 * (kept from an earlier call when the slot still holds p). */
static dnnl_memory_t arg_in(ct_conv_dnnl *f, arg *a, const void *p) {
  DNNL_CHECK(dnnl_memory_set_data_handle(a->user, (void *)p));
  if (!a->buf) return a->user;
  buffer *b = a->buf;
  dnnl_memory_t m = buffer_mem(b);
  if (b->role == ROLE_OWN || b->holds != p) {
    run_reorder(f, a->reorder, a->user, m);
    b->holds = b->role == ROLE_OWN ? NULL : p;
  }
  return m;
}

/* The memory a primitive writes an output blob p into; arg_out_done moves it
 * into p when it is a buffer. */
static dnnl_memory_t arg_out(ct_conv_dnnl *f, arg *a, void *p) {
  DNNL_CHECK(dnnl_memory_set_data_handle(a->user, p));
  return a->buf ? buffer_mem(a->buf) : a->user;
}

static void arg_out_done(ct_conv_dnnl *f, arg *a) {
  if (a->buf) run_reorder(f, a->reorder, a->buf->mem, a->user);
}

static void run(ct_conv_dnnl *f, op *o, int n, const dnnl_exec_arg_t *args) {
  DNNL_CHECK(dnnl_primitive_execute(o->prim, f->stream, n, args));
}

/* ---------------------------------------------------------------- planning */

/* Channels last: (N, C, spatial...) stored as (N, spatial..., C). */
static dnnl_format_tag_t channels_last_tag(int ndims) {
  static const dnnl_format_tag_t tags[] = {dnnl_acb, dnnl_acdb, dnnl_acdeb};
  CT_ASSERT(ndims >= 3 && ndims <= 5);
  return tags[ndims - 3];
}

static dnnl_format_tag_t plain_tag(int ndims) {
  static const dnnl_format_tag_t tags[] = {dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde,
                                           dnnl_abcdef};
  CT_ASSERT(ndims >= 1 && ndims <= 6);
  return tags[ndims - 1];
}

static const char *impl_name(const op *o) {
  const char *s = NULL;
  if (!o->pd || dnnl_primitive_desc_query(o->pd, dnnl_query_impl_info_str, 0, &s) != dnnl_success)
    return "?";
  return s;
}

static dnnl_status_t make_op(op *o, const void *desc, const_dnnl_primitive_desc_t hint) {
  dnnl_status_t s = dnnl_primitive_desc_create(&o->pd, desc, NULL, g_engine, hint);
  if (s != dnnl_success) return s;
  return dnnl_primitive_create(&o->prim, o->pd);
}

static const dnnl_memory_desc_t *query(const op *o, dnnl_query_t what) {
  return dnnl_primitive_desc_query_md(o->pd, what, 0);
}

static void remember_geometry(ct_conv_dnnl *f, const ct_conv *c, bool y_bias, ct_dtype act,
                              ct_layout layout) {
  f->conv = *c;
  f->y_bias = y_bias;
  f->act = act;
  f->layout = layout;
  f->direct = act == CT_F32 && ct_conv_direct_fits(c);
}

static dnnl_data_type_t dnnl_type(ct_dtype t) {
  switch (t) {
    case CT_BF16: return dnnl_bf16;
    case CT_F16: return dnnl_f16;
    default: return dnnl_f32;
  }
}

/* Seconds of the second of two weight gradients on zeros (the first warms
 * the kernels and the caches). */
static double time_weight_grad(ct_conv_dnnl *f, const void *x, const void *dy, float *dw,
                               float *db) {
  double t = 0;
  for (int k = 0; k < 2; k++) {
    ct_conv_dnnl_forget(f, CT_CONV_DNNL_SLOT_X);
    ct_conv_dnnl_forget(f, CT_CONV_DNNL_SLOT_Y);
    const double t0 = ct_monotonic_s();
    ct_conv_dnnl_weight_grad(f, x, dy, dw, db);
    t = ct_monotonic_s() - t0;
  }
  return t;
}

/* A 16-bit layer whose geometry the direct kernels fit (few input
 * channels, as a net's first convolution): its weight gradient by oneDNN,
 * or by the float32 direct kernel on float32 copies of x and dy, whichever
 * ran faster here once (oneDNN's is a GEMM on some CPUs: LeNet's conv1
 * took 8 ms against 0.3 in float32, one thread; on AMX its kernel took 1.0
 * ms against 0.35 for the direct one, while for 3 input channels AMX won). */
static void pick_weight_grad(ct_conv_dnnl *f) {
  const ct_conv *c = &f->conv;
  const size_t nx = (size_t)c->num * c->x_channels * c->x_spatial;
  const size_t ny = (size_t)c->num * c->y_channels * c->y_spatial;
  void *x = ct_xcalloc(nx + 1, ct_dtype_size(f->act)), *dy = ct_xcalloc(ny + 1, ct_dtype_size(f->act));
  float *dw = ct_xcalloc(f->w_count, sizeof *dw), *db = ct_xcalloc((size_t)c->y_channels + 1, sizeof *db);
  f->direct16 = false;
  const double t_dnnl = time_weight_grad(f, x, dy, dw, f->y_bias ? db : NULL);
  f->x32 = ct_xcalloc(nx + 1, sizeof(float));
  f->y32 = ct_xcalloc(ny + 1, sizeof(float));
  f->direct16 = true;
  const double t_direct = time_weight_grad(f, x, dy, dw, f->y_bias ? db : NULL);
  f->direct16 = t_direct < t_dnnl;
  if (!f->direct16) {
    free(f->x32);
    free(f->y32);
    f->x32 = f->y32 = NULL;
  }
  /* the slots must not remember the scratch arrays freed here */
  ct_conv_dnnl_forget(f, CT_CONV_DNNL_SLOT_X);
  ct_conv_dnnl_forget(f, CT_CONV_DNNL_SLOT_Y);
  free(x);
  free(dy);
  free(dw);
  free(db);
}

static dnnl_status_t plan(ct_conv_dnnl *f, const ct_conv *c, bool y_bias, bool native,
                          const char **stage) {
  const ct_im2col_geom *g = &c->geom;
  const int nd = 2 + c->nspatial;
  dnnl_dims_t xd = {c->num, c->x_channels}, yd = {c->num, c->y_channels}, wd, bd = {c->y_channels};
  dnnl_dims_t strides, dilates, pad_l, pad_r;
  for (int i = 0; i < c->nspatial; i++) {
    xd[2 + i] = g->in[i];
    yd[2 + i] = g->out[i];
    strides[i] = g->stride[i];
    dilates[i] = g->dilation[i] - 1;
    /* Caffe's floor rounding keeps (in + 2 pad - extent) / stride + 1 == out. */
    pad_l[i] = pad_r[i] = g->pad[i];
  }
  const int wnd = nd + (c->group > 1);
  int k = 0;
  if (c->group > 1) wd[k++] = c->group;
  wd[k++] = c->y_channels / c->group;
  wd[k++] = c->x_channels / c->group;
  for (int i = 0; i < c->nspatial; i++) wd[k++] = g->kernel[i];
  /* x, y and their gradients in the layer's type; the weights computed
   * with in it too (reordered from the float32 master), their gradient and
   * the bias in float32 */
  const dnnl_data_type_t at = dnnl_type(f->act);
  dnnl_memory_desc_t x_md, y_md, w_md, b_md, x_any, y_any, w_any, dw_any;
  dnnl_status_t s;
  *stage = "memory descriptors";
  const dnnl_format_tag_t act_tag = f->layout == CT_NHWC ? channels_last_tag(nd) : plain_tag(nd);
  if ((s = dnnl_memory_desc_init_by_tag(&x_md, nd, xd, at, act_tag)) ||
      (s = dnnl_memory_desc_init_by_tag(&y_md, nd, yd, at, act_tag)) ||
      (s = dnnl_memory_desc_init_by_tag(&w_md, wnd, wd, dnnl_f32, plain_tag(wnd))) ||
      (s = dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_a)) ||
      (s = dnnl_memory_desc_init_by_tag(&x_any, nd, xd, at, dnnl_format_tag_any)) ||
      (s = dnnl_memory_desc_init_by_tag(&y_any, nd, yd, at, dnnl_format_tag_any)) ||
      (s = dnnl_memory_desc_init_by_tag(&w_any, wnd, wd, at, dnnl_format_tag_any)) ||
      (s = dnnl_memory_desc_init_by_tag(&dw_any, wnd, wd, dnnl_f32, dnnl_format_tag_any)))
    return s;
  const dnnl_memory_desc_t *bias = y_bias ? &b_md : NULL;
  /* Forward takes the layouts oneDNN prefers (channel blocks of the vector
   * width, reordered to and from the blobs).  The backward passes too,
   * unless neither channel count fills whole blocks of 8: there the padded
   * blocks cost more than they bring, and oneDNN's GEMM-based kernels on
   * the blobs' own layout were faster (LeNet's 1->20 and 20->50 on AVX2:
   * backward weights 5.0 -> 2.0 ms and 9.9 -> 8.2 ms for both, one thread). */
  const bool plain_bwd = f->act == CT_F32 && c->x_channels % 8 != 0 && c->y_channels % 8 != 0;
  const dnnl_memory_desc_t *bx = plain_bwd ? &x_md : &x_any, *bw = plain_bwd ? &w_md : &w_any,
                           *by = plain_bwd ? &y_md : &y_any, *bdw = plain_bwd ? &w_md : &dw_any;
  /* A 16-bit layer on channels-last blobs convolves them in that order in
   * all three passes: oneDNN 2.6 has kernels for it (brgconv forward,
   * jit_bf16 backward), which spares the reorders of x, y and their
   * gradients into channel blocks (padded: LeNet's 20 channels went into
   * blocks of 16 as 32), and for one input channel it offers its jit_bf16
   * weight gradient there but only its GEMM on the layouts it prefers
   * (LeNet's conv1: 0.13 against 1.4 ms, bench/dnnl_wgrad).  LeNet's bf16
   * iteration 5.2 -> 4.1 ms, cifar10_quick's 14.6 -> 13.6, on 2 AVX512_BF16
   * cores.  (Where oneDNN declines that, the layer is planned again
   * without it: ct_conv_dnnl_create.) */
  if (native) {
    x_any = x_md;
    y_any = y_md;
  }
  dnnl_convolution_desc_t d;
  *stage = "forward";
  if ((s = dnnl_dilated_convolution_forward_desc_init(&d, dnnl_forward_training,
                                                      dnnl_convolution_direct, &x_any, &w_any,
                                                      bias, &y_any, strides, dilates, pad_l,
                                                      pad_r)) ||
      (s = make_op(&f->fwd, &d, NULL)))
    return s;
  *stage = "backward data";
  if ((s = dnnl_dilated_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, bx, bw,
                                                            by, strides, dilates, pad_l,
                                                            pad_r)) ||
      (s = make_op(&f->bwd_data, &d, f->fwd.pd)))
    return s;
  *stage = "backward weights";
  if ((s = dnnl_dilated_convolution_backward_weights_desc_init(
           &d, dnnl_convolution_direct, bx, bdw, bias, by, strides, dilates, pad_l, pad_r)) ||
      (s = make_op(&f->bwd_weights, &d, f->fwd.pd)))
    return s;
  *stage = "reorders";
  if ((s = arg_init(f, &f->fwd_x, &x_md, query(&f->fwd, dnnl_query_src_md), ROLE_X, true)) ||
      (s = arg_init(f, &f->fwd_w, &w_md, query(&f->fwd, dnnl_query_weights_md), ROLE_OWN, true)) ||
      (s = arg_init(f, &f->fwd_y, &y_md, query(&f->fwd, dnnl_query_dst_md), ROLE_OWN, false)) ||
      (s = arg_init(f, &f->bd_dy, &y_md, query(&f->bwd_data, dnnl_query_diff_dst_md), ROLE_Y,
                    true)) ||
      (s = arg_init(f, &f->bd_w, &w_md, query(&f->bwd_data, dnnl_query_weights_md), ROLE_OWN,
                    true)) ||
      (s = arg_init(f, &f->bd_dx, &x_md, query(&f->bwd_data, dnnl_query_diff_src_md), ROLE_OWN,
                    false)) ||
      (s = arg_init(f, &f->bw_x, &x_md, query(&f->bwd_weights, dnnl_query_src_md), ROLE_X,
                    true)) ||
      (s = arg_init(f, &f->bw_dy, &y_md, query(&f->bwd_weights, dnnl_query_diff_dst_md), ROLE_Y,
                    true)) ||
      (s = arg_init(f, &f->bw_dw, &w_md, query(&f->bwd_weights, dnnl_query_diff_weights_md),
                    ROLE_OWN, false)))
    return s;
  if (y_bias &&
      ((s = arg_init(f, &f->fwd_b, &b_md, &b_md, ROLE_OWN, true)) ||
       (s = arg_init(f, &f->bw_db, &b_md, &b_md, ROLE_OWN, false))))
    return s;
  f->w_count = (size_t)c->y_channels * c->kernel_dim;
  f->dw_tmp = ct_xcalloc(f->w_count, sizeof *f->dw_tmp);
  f->db_tmp = ct_xcalloc((size_t)c->y_channels, sizeof *f->db_tmp);
  if (f->act != CT_F32 && ct_conv_direct_fits(c)) pick_weight_grad(f);
  return dnnl_success;
}

ct_conv_dnnl *ct_conv_dnnl_create(const ct_conv *c, bool y_bias, ct_dtype act, ct_layout layout,
                                  char *why, size_t why_len) {
  if (why_len) why[0] = '\0';
  if (c->nspatial < 1 || c->nspatial > 3) {
    snprintf(why, why_len, "oneDNN convolves over 1 to 3 spatial axes, not %d", c->nspatial);
    return NULL;
  }
  if (c->num == 0) {
    snprintf(why, why_len, "an empty batch");
    return NULL;
  }
  pthread_once(&g_engine_once, engine_init);
  if (g_engine_status != dnnl_success) {
    snprintf(why, why_len, "no oneDNN CPU engine (status %d)", (int)g_engine_status);
    return NULL;
  }
  /* 16-bit channels-last blobs: first in their own order (plan) */
  for (int native = act != CT_F32 && layout == CT_NHWC; native >= 0; native--) {
    ct_conv_dnnl *f = ct_xcalloc(1, sizeof *f);
    remember_geometry(f, c, y_bias, act, layout);
    const char *stage = "stream";
    dnnl_status_t s = dnnl_stream_create(&f->stream, g_engine, dnnl_stream_default_flags);
    if (s == dnnl_success) s = plan(f, c, y_bias, native, &stage);
    if (s == dnnl_success) return f;
    snprintf(why, why_len, "oneDNN declined the %s primitive (status %d)", stage, (int)s);
    ct_conv_dnnl_free(f);
  }
  return NULL;
}

void ct_conv_dnnl_free(ct_conv_dnnl *f) {
  if (!f) return;
  arg *args[] = {&f->fwd_x, &f->fwd_w, &f->fwd_b, &f->fwd_y, &f->bd_dy, &f->bd_w,
                 &f->bd_dx, &f->bw_x, &f->bw_dy, &f->bw_dw, &f->bw_db};
  for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) arg_free(args[i]);
  for (int i = 0; i < f->nbufs; i++)
    if (f->bufs[i].mem) dnnl_memory_destroy(f->bufs[i].mem);
  op *ops[] = {&f->fwd, &f->bwd_data, &f->bwd_weights};
  for (int i = 0; i < 3; i++) {
    if (ops[i]->prim) dnnl_primitive_destroy(ops[i]->prim);
    if (ops[i]->pd) dnnl_primitive_desc_destroy(ops[i]->pd);
  }
  if (f->stream) dnnl_stream_destroy(f->stream);
  free(f->dw_tmp);
  free(f->db_tmp);
  free(f->x32);
  free(f->y32);
  free(f);
}

const char *ct_conv_dnnl_describe(const ct_conv_dnnl *f, char *buf, size_t len) {
  const char *direct = "direct:avx2";
  snprintf(buf, len, "oneDNN (forward %s, backward data %s, backward weights %s)",
           f->direct ? direct : impl_name(&f->fwd), impl_name(&f->bwd_data),
           f->direct ? direct : f->direct16 ? "direct:avx2 on float32 copies"
                                             : impl_name(&f->bwd_weights));
  return buf;
}

/* ---------------------------------------------------------------- running */

void ct_conv_dnnl_forget(ct_conv_dnnl *f, ct_conv_dnnl_slot slot) {
  const int role = slot == CT_CONV_DNNL_SLOT_X ? ROLE_X : ROLE_Y;
  for (int i = 0; i < f->nbufs; i++)
    if (f->bufs[i].role == role) f->bufs[i].holds = NULL;
}

void ct_conv_dnnl_y_from_x(ct_conv_dnnl *f, const float *w, const float *bias, const void *x,
                           void *y) {
  CT_ASSERT(!bias || f->y_bias);
  if (f->direct) {
    ct_conv_direct_forward(&f->conv, w, bias, x, y);
    return;
  }

  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, arg_in(f, &f->fwd_x, x)},
                             {DNNL_ARG_WEIGHTS, arg_in(f, &f->fwd_w, w)},
                             {DNNL_ARG_DST, arg_out(f, &f->fwd_y, y)}};
  int n = 3;
  if (f->y_bias) {
    /* A layer without bias values cannot have been planned with them. */
    CT_ASSERT(bias != NULL);
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, arg_in(f, &f->fwd_b, bias)};
  }
  run(f, &f->fwd, n, args);
  arg_out_done(f, &f->fwd_y);
  DNNL_CHECK(dnnl_stream_wait(f->stream));
}

void ct_conv_dnnl_x_from_y(ct_conv_dnnl *f, const float *w, const void *y, void *x) {
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_DIFF_DST, arg_in(f, &f->bd_dy, y)},
                             {DNNL_ARG_WEIGHTS, arg_in(f, &f->bd_w, w)},
                             {DNNL_ARG_DIFF_SRC, arg_out(f, &f->bd_dx, x)}};
  run(f, &f->bwd_data, 3, args);
  arg_out_done(f, &f->bd_dx);
  DNNL_CHECK(dnnl_stream_wait(f->stream));
}

void ct_conv_dnnl_weight_grad(ct_conv_dnnl *f, const void *x, const void *dy, float *dw,
                              float *dbias) {
  CT_ASSERT(!dbias || f->y_bias);
  if (f->direct) {
    ct_conv_direct_weight_grad(&f->conv, x, dy, dw, dbias);
    return;
  }
  if (f->direct16) {
    const ct_conv *c = &f->conv;
    if (f->layout == CT_NHWC) { /* to NCHW float32: (num, spatial, channels) transposed */
      ct_cpu_transpose_convert(c->num, c->x_spatial, c->x_channels, f->act, x, CT_F32, f->x32,
                               false);
      ct_cpu_transpose_convert(c->num, c->y_spatial, c->y_channels, f->act, dy, CT_F32, f->y32,
                               false);
    } else {
      ct_cpu_convert((size_t)c->num * c->x_channels * c->x_spatial, f->act, x, CT_F32, f->x32);
      ct_cpu_convert((size_t)c->num * c->y_channels * c->y_spatial, f->act, dy, CT_F32, f->y32);
    }
    ct_conv_direct_weight_grad(c, f->x32, f->y32, dw, dbias);
    return;
  }
  dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, arg_in(f, &f->bw_x, x)},
                             {DNNL_ARG_DIFF_DST, arg_in(f, &f->bw_dy, dy)},
                             {DNNL_ARG_DIFF_WEIGHTS, arg_out(f, &f->bw_dw, f->dw_tmp)}};
  int n = 3;
  if (f->y_bias) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_DIFF_BIAS, arg_out(f, &f->bw_db, f->db_tmp)};
  run(f, &f->bwd_weights, n, args);
  arg_out_done(f, &f->bw_dw);
  DNNL_CHECK(dnnl_stream_wait(f->stream));
  if (dw)
    for (size_t i = 0; i < f->w_count; i++) dw[i] += f->dw_tmp[i];
  if (dbias)
    for (int i = 0; i < f->conv.y_channels; i++) dbias[i] += f->db_tmp[i];
}
