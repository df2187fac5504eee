/* Convolution throughput per layer: every distinct Convolution of AlexNet,
 * GoogLeNet and ResNet-50 (training nets), or of cifar10_quick or LeNet,
 * forward and backward on one GPU with the cuDNN engine (algorithms
 * benchmarked at reshape) and with the CAFFE engine (im2col + cuBLAS), as a
 * table of milliseconds per call.
 *
 *   conv_bench [--model alexnet|googlenet|resnet50|all|cifar10_quick|lenet]
 *              [--batch N] [--iters K] [--warmup W] [--gpu G]
 *              [--math tf32|fp32] [--fixtures DIR] [--no-caffe] [--list]
 *              [--igemm] [--igemm-all]
 *
 * The shapes come from building each net on the host with batch 1 (data
 * layers replaced by DummyData); --batch sets the batch of the timed layers
 * (default: the net's own batch size).  Backward computes the bottom
 * gradient only where the net does (not for the first convolution).
 * --list prints the distinct convolutions without timing them.
 *
 * --igemm races Cortado's implicit-GEMM kernels against cuDNN
 * (CORTADO_OWN_CONV=1: the cuDNN columns then run each direction's winner)
 * and prints, per convolution and direction, the race's cuDNN and Cortado
 * times and the fastest FP32 and TF32 configurations timed alone (TF32 only
 * with --math tf32); --igemm-all adds every configuration's time.  For
 * cifar10_quick on the GPU machine, in one call:
 *   conv_bench --model cifar10_quick --igemm --no-caffe */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/context.h"
#include "core/rng.h"
#include "gpu/cudnn_util.h"
#include "gpu/gpu.h"
#include "layers/conv/conv_common.h"
#include "layers/conv/conv_cudnn.h"
#include "layers/conv/conv_igemm.h"
#include "layers/layer.h"
#include "models/resnet.h"
#include "net/net.h"
#include "net/net_load.h"

#ifndef CT_BENCH_FIXTURES
#define CT_BENCH_FIXTURES "."
#endif

typedef struct opts {
  const char *model, *fixtures, *math;
  int batch, iters, warmup, gpu;
  bool caffe;
  bool list;      /* only list the convolutions (no GPU needed) */
  bool igemm;     /* race Cortado's kernels and report them per direction */
  bool igemm_all; /* ... with every configuration's time */
} opts;

/* One distinct convolution of a net. */
typedef struct conv_case {
  const Caffe__LayerParameter *lp; /* borrowed from the host net's param */
  int ndim, shape[CT_MAX_AXES];     /* bottom, batch 1 */
  bool bottom_grad;                 /* the net computes the bottom gradient */
  int count;                        /* layers of the net with this shape */
  char key[256];
} conv_case;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail(const char *what, const ct_error *err) {
  fprintf(stderr, "conv_bench: %s: %s\n", what, err->msg);
  return 1;
}

/* ---------------------------------------------------------------- nets */

static void set_batch(Caffe__BlobShape *s, int batch) {
  if (s && s->n_dim > 0) s->dim[0] = batch;
}

/* Batch 1 in every DummyData and Input layer; returns the first batch
 * size seen there (the net's own). */
static int shrink_batch(Caffe__NetParameter *np) {
  int batch = 0;
  for (size_t i = 0; i < np->n_layer; i++) {
    Caffe__LayerParameter *l = np->layer[i];
    Caffe__BlobShape **shapes = NULL;
    size_t n = 0;
    if (l->dummy_data_param) {
      shapes = l->dummy_data_param->shape;
      n = l->dummy_data_param->n_shape;
      for (size_t k = 0; k < l->dummy_data_param->n_num; k++) {
        if (!batch) batch = (int)l->dummy_data_param->num[k];
        l->dummy_data_param->num[k] = 1;
      }
    } else if (l->input_param) {
      shapes = l->input_param->shape;
      n = l->input_param->n_shape;
    }
    for (size_t k = 0; k < n; k++) {
      if (!batch && shapes[k]->n_dim > 0) batch = (int)shapes[k]->dim[0];
      set_batch(shapes[k], 1);
    }
  }
  return batch;
}

static ct_status load_net(const opts *o, const char *model, Caffe__NetParameter **out,
                          ct_error *err) {
  char path[1024];
  if (strcmp(model, "resnet50") == 0) {
    ct_resnet_opts r = {.depth = 50, .num_labels = 1000, .num_channels = 3, .image_size = 224,
                        .batch_size = 32, .backend = "LMDB"};
    return ct_resnet_net(&r, out, err);
  }
  static const struct {
    const char *model, *file;
    int chw[3];
  } nets[] = {{"alexnet", "bvlc_alexnet_train_val.prototxt", {3, 227, 227}},
              {"googlenet", "bvlc_googlenet_train_val.prototxt", {3, 224, 224}},
              {"cifar10_quick", "cifar10_quick_train_test.prototxt", {3, 32, 32}},
              {"lenet", "lenet_train_test.prototxt", {1, 28, 28}}};
  int i = 0;
  while (strcmp(nets[i].model, model) != 0) i++;
  snprintf(path, sizeof path, "%s/%s", o->fixtures, nets[i].file);
  CT_TRY(ct_net_param_read(path, out, err));
  return ct_net_param_replace_data_layers(*out, nets[i].chw, err);
}

static void case_key(const Caffe__LayerParameter *lp, const ct_tensor *b, char *key, size_t len) {
  const Caffe__ConvolutionParameter *p = lp->convolution_param;
  size_t at = 0;
  at += snprintf(key + at, len - at, "%s", lp->type);
  for (int i = 1; i < b->ndim; i++) at += snprintf(key + at, len - at, ",%d", b->shape[i]);
  at += snprintf(key + at, len - at, "|o%u g%u b%d a%d", p->num_output, p->group,
                 (int)p->bias_term, p->axis);
  const struct {
    size_t n;
    const uint32_t *v;
    uint32_t h, w;
  } fields[4] = {{p->n_kernel_size, p->kernel_size, p->kernel_h, p->kernel_w},
                 {p->n_stride, p->stride, p->stride_h, p->stride_w},
                 {p->n_pad, p->pad, p->pad_h, p->pad_w},
                 {p->n_dilation, p->dilation, 0, 0}};
  for (int f = 0; f < 4 && at < len; f++) {
    at += snprintf(key + at, len - at, "|");
    for (size_t i = 0; i < fields[f].n && at < len; i++)
      at += snprintf(key + at, len - at, "%u,", fields[f].v[i]);
    if (at < len) at += snprintf(key + at, len - at, "%u,%u", fields[f].h, fields[f].w);
  }
}

/* The distinct convolutions of a host net built at batch 1. */
static int collect(const ct_net *net, conv_case *cases, int max) {
  int n = 0;
  for (int i = 0; i < net->nlayers; i++) {
    const ct_layer *l = net->layers[i];
    if (strcmp(l->ops->type, "Convolution") != 0) continue;
    const ct_tensor *b = net->bottoms[i][0];
    char key[256];
    case_key(l->param, b, key, sizeof key);
    int k = 0;
    while (k < n && strcmp(cases[k].key, key) != 0) k++;
    if (k < n) {
      cases[k].count++;
      cases[k].bottom_grad = cases[k].bottom_grad || net->bottom_need_backward[i][0];
      continue;
    }
    if (n == max) break;
    conv_case *c = &cases[n++];
    memset(c, 0, sizeof *c);
    c->lp = l->param;
    c->ndim = b->ndim;
    memcpy(c->shape, b->shape, sizeof c->shape);
    c->bottom_grad = net->bottom_need_backward[i][0];
    c->count = 1;
    snprintf(c->key, sizeof c->key, "%s", key);
  }
  return n;
}

/* ---------------------------------------------------------------- timing */

typedef struct timing {
  double fwd_ms, bwd_ms;
  char algos[256];
} timing;

static void to_device(ct_layer *l) {
  for (int i = 0; i < l->nparams; i++) {
    ct_tensor *h = l->params[i];
    ct_tensor *d = ct_tensor_new_shape(l->ctx->device, NULL, h->ndim, h->shape, true);
    ct_tensor_copy_data(d, h);
    ct_tensor_free(h);
    l->params[i] = d;
  }
}

static void fill(ct_tensor *t, bool diff, uint64_t seed) {
  float *h = malloc(t->count * sizeof(float) + 1);
  ct_rng r;
  ct_rng_seed(&r, seed);
  ct_rng_fill_uniform(&r, h, t->count, -1.0f, 1.0f);
  if (diff) ct_tensor_upload_diff(t, h);
  else ct_tensor_upload(t, h);
  free(h);
}

/* ---------------------------------------------------------------- Cortado's kernels */

/* Per direction of convolution l (set up on ctx): the race's times, and
 * Cortado's implicit-GEMM configurations each timed alone on scratch
 * buffers (the fastest FP32 and TF32 ones, or all of them with
 * --igemm-all), with their TFLOP/s. */
static void igemm_report(ct_context *ctx, const opts *o, const ct_layer *l) {
  static const char *const dirs[3] = {"forward", "backward data", "backward filter"};
  const ct_conv *c = (const ct_conv *)l->priv;
  for (int d = 0; d < 3; d++) {
    float dnn, own;
    if (ct_conv_cudnn_race_ms(l, d, &dnn, &own))
      printf("    %-15s race: cuDNN %.4f ms, Cortado %.4f ms\n", dirs[d], dnn, own);
  }
  if (c->reverse || c->group != 1 || c->nspatial != 2) {
    printf("    (Cortado's kernels run 2-D convolutions with group 1 only)\n");
    return;
  }
  const ct_igemm_geom g = {c->num,         c->x_channels,  c->geom.in[0],  c->geom.in[1],
                           c->y_channels,  c->geom.out[0], c->geom.out[1], c->kernel[0],
                           c->kernel[1],   c->stride[0],   c->stride[1],   c->pad[0],
                           c->pad[1],      c->dilation[0], c->dilation[1]};
  const char *why = ct_igemm_unsupported(&g, CT_IGEMM_FWD);
  if (why) {
    printf("    (Cortado's kernels cannot run it: %s)\n", why);
    return;
  }
  const size_t nx = (size_t)g.n * g.c * g.h * g.w, ny = (size_t)g.n * g.m * g.oh * g.ow;
  const size_t nw = (size_t)g.m * g.c * g.kh * g.kw;
  const double flop = 2.0 * (double)ny * g.c * g.kh * g.kw;
  ct_igemm *p = ct_igemm_new(ctx, &g, ctx->tf32);
  size_t ws_bytes = 4;
  for (int d = 0; d < 3; d++) {
    const ct_igemm_dir dir = (ct_igemm_dir)d;
    const int n = dir == CT_IGEMM_BWD_FILTER ? CT_IGEMM_WGRAD_CONFIGS : CT_IGEMM_GEMM_CONFIGS;
    for (int k = 1; k <= n; k++) {
      const size_t b = ct_igemm_workspace(p, dir, k);
      if (b > ws_bytes) ws_bytes = b;
    }
  }
  float *x = ct_gpu_malloc(ctx->device, nx * sizeof(float));
  float *y = ct_gpu_malloc(ctx->device, ny * sizeof(float));
  float *w = ct_gpu_malloc(ctx->device, nw * sizeof(float));
  float *ws = ct_gpu_malloc(ctx->device, ws_bytes);
  float ms[CT_IGEMM_GEMM_CONFIGS > CT_IGEMM_WGRAD_CONFIGS ? CT_IGEMM_GEMM_CONFIGS
                                                         : CT_IGEMM_WGRAD_CONFIGS];
  char name[48];
  for (int d = 0; d < 3; d++) {
    const ct_igemm_dir dir = (ct_igemm_dir)d;
    if (ct_igemm_unsupported(&g, dir)) continue;
    const int n = dir == CT_IGEMM_BWD_FILTER ? CT_IGEMM_WGRAD_CONFIGS : CT_IGEMM_GEMM_CONFIGS;
    ct_igemm_time_each(ctx, p, dir, x, w, y, ws, ws_bytes, ms);
    int best[2] = {0, 0}; /* FP32, TF32 */
    for (int k = 1; k <= n; k++) {
      const int t = ct_igemm_choice_tf32(dir, k);
      if (ms[k - 1] >= 0.0f && (!best[t] || ms[k - 1] < ms[best[t] - 1])) best[t] = k;
    }
    printf("    %-15s", dirs[d]);
    for (int t = 0; t < 2; t++)
      if (best[t])
        printf(" | fastest %s %s %.4f ms %.1f TFLOP/s", t ? "TF32" : "FP32",
               ct_igemm_choice_name(dir, best[t], name, sizeof name), ms[best[t] - 1],
               flop / (ms[best[t] - 1] * 1e-3) / 1e12);
    printf("\n");
    if (o->igemm_all)
      for (int k = 1; k <= n; k++)
        if (ms[k - 1] >= 0.0f)
          printf("      %-24s %.4f ms\n", ct_igemm_choice_name(dir, k, name, sizeof name),
                 ms[k - 1]);
  }
  ct_igemm_free(p);
  ct_gpu_free(ctx->device, ws);
  ct_gpu_free(ctx->device, w);
  ct_gpu_free(ctx->device, y);
  ct_gpu_free(ctx->device, x);
}

/* ---------------------------------------------------------------- layers */

static ct_status time_case(ct_context *ctx, const opts *o, const conv_case *c, int batch,
                           int engine, timing *t, ct_error *err) {
  Caffe__LayerParameter lp = *c->lp;
  Caffe__ConvolutionParameter cp = *c->lp->convolution_param;
  cp.has_engine = 1;
  cp.engine = (Caffe__ConvolutionParameter__Engine)engine;
  lp.convolution_param = &cp;
  int shape[CT_MAX_AXES];
  memcpy(shape, c->shape, sizeof shape);
  shape[0] = batch;
  ct_tensor *bottom = ct_tensor_new_shape(ctx->device, "bottom", c->ndim, shape, true);
  ct_tensor *top = ct_tensor_new(ctx->device, "top");
  top->has_diff = true;
  ct_layer *l = NULL;
  ct_status s = ct_layer_create(&lp, CT_PHASE_TRAIN, ctx, 1, 1, &l, err);
  if (s == CT_OK) s = ct_layer_setup(l, &bottom, &top, err);
  if (s == CT_OK) {
    to_device(l);
    ct_tensor_need_diff(top);
    fill(bottom, false, 1);
    fill(top, true, 2);
    bool prop[1] = {c->bottom_grad};
    for (int i = 0; i < o->warmup && s == CT_OK; i++) {
      s = ct_layer_forward(l, &bottom, &top, NULL, err);
      ct_layer_backward(l, &top, prop, &bottom);
    }
    ct_context_sync(ctx);
    double t0 = now_s();
    for (int i = 0; i < o->iters && s == CT_OK; i++)
      s = ct_layer_forward(l, &bottom, &top, NULL, err);
    ct_context_sync(ctx);
    double t1 = now_s();
    for (int i = 0; i < o->iters; i++) ct_layer_backward(l, &top, prop, &bottom);
    ct_context_sync(ctx);
    double t2 = now_s();
    t->fwd_ms = 1e3 * (t1 - t0) / o->iters;
    t->bwd_ms = 1e3 * (t2 - t1) / o->iters;
    ct_conv_cudnn_describe(l, t->algos, sizeof t->algos);
    if (o->igemm && engine == CT_ENGINE_CUDNN) igemm_report(ctx, o, l);
  }
  ct_layer_free(l);
  ct_tensor_free(bottom);
  ct_tensor_free(top);
  return s;
}

static void shape_text(const conv_case *c, int batch, char *buf, size_t len) {
  size_t at = snprintf(buf, len, "%d", batch);
  for (int i = 1; i < c->ndim; i++) at += snprintf(buf + at, len - at, "x%d", c->shape[i]);
}

static int bench_model(const opts *o, ct_context *gpu, const char *model) {
  ct_error err;
  Caffe__NetParameter *np;
  if (load_net(o, model, &np, &err) != CT_OK) return fail(model, &err);
  int batch = shrink_batch(np);
  if (o->batch > 0 || batch <= 0) batch = o->batch > 0 ? o->batch : 32;
  ct_context host;
  ct_context_init(&host, CT_DEVICE_CPU, 1, &err);
  ct_net *net;
  ct_net_opts no = {.phase = CT_PHASE_TRAIN, .source_name = model, .quiet = true};
  if (ct_net_init(&net, np, &no, &host, &err) != CT_OK) return fail(model, &err);
  conv_case cases[128];
  int n = collect(net, cases, 128);
  printf("\n%s, batch %d, %s math: %d distinct convolutions (ms per call)\n", model, batch,
         gpu && gpu->tf32 ? "TF32" : "FP32", n);
  printf("%-22s %-16s %-10s %3s | %9s %9s | %9s %9s | %6s | %s\n", "layer", "input", "k/s/p/g",
         "n", "cuDNN fwd", "bwd", "CAFFE fwd", "bwd", "speed", "cuDNN algorithms");
  double tot[4] = {0};
  for (int i = 0; i < n; i++) {
    const conv_case *c = &cases[i];
    timing dnn = {0}, caf = {0};
    if (!o->list && time_case(gpu, o, c, batch, CT_ENGINE_CUDNN, &dnn, &err) != CT_OK)
      return fail(c->lp->name, &err);
    if (!o->list && o->caffe &&
        time_case(gpu, o, c, batch, CT_ENGINE_CAFFE, &caf, &err) != CT_OK)
      return fail(c->lp->name, &err);
    const Caffe__ConvolutionParameter *p = c->lp->convolution_param;
    char in[64], geo[32];
    shape_text(c, batch, in, sizeof in);
    snprintf(geo, sizeof geo, "%u/%u/%u/%u",
             p->n_kernel_size ? p->kernel_size[0] : p->kernel_h, p->n_stride ? p->stride[0] : 1,
             p->n_pad ? p->pad[0] : p->pad_h, p->group);
    double a = dnn.fwd_ms + dnn.bwd_ms, b = caf.fwd_ms + caf.bwd_ms;
    printf("%-22.22s %-16s %-10s %3d | %9.3f %9.3f | %9.3f %9.3f | %5.2fx | %s\n", c->lp->name, in,
           geo, c->count, dnn.fwd_ms, dnn.bwd_ms, caf.fwd_ms, caf.bwd_ms, a > 0 ? b / a : 0.0,
           dnn.algos);
    tot[0] += c->count * dnn.fwd_ms;
    tot[1] += c->count * dnn.bwd_ms;
    tot[2] += c->count * caf.fwd_ms;
    tot[3] += c->count * caf.bwd_ms;
  }
  const double all_dnn = tot[0] + tot[1], all_caf = tot[2] + tot[3];
  printf("%-22s %-16s %-10s %3s | %9.3f %9.3f | %9.3f %9.3f | %5.2fx |\n", "total (x n)", "", "",
         "", tot[0], tot[1], tot[2], tot[3], all_dnn > 0 ? all_caf / all_dnn : 0.0);
  ct_net_free(net);
  ct_context_free(&host);
  protobuf_c_message_free_unpacked(&np->base, NULL);
  return 0;
}

static int usage(void) {
  fprintf(stderr,
          "usage: conv_bench [--model alexnet|googlenet|resnet50|all|cifar10_quick|lenet]\n"
          "                  [--batch N] [--iters K] [--warmup W] [--gpu G] [--math tf32|fp32]\n"
          "                  [--fixtures DIR] [--no-caffe] [--list] [--igemm] [--igemm-all]\n");
  return 2;
}

int main(int argc, char **argv) {
  opts o = {.model = "all", .fixtures = CT_BENCH_FIXTURES, .math = "tf32", .iters = 10,
            .warmup = 3, .caffe = true};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--no-caffe") == 0) {
      o.caffe = false;
      continue;
    }
    if (strcmp(a, "--list") == 0) {
      o.list = true;
      continue;
    }
    if (strcmp(a, "--igemm") == 0 || strcmp(a, "--igemm-all") == 0) {
      o.igemm = true;
      o.igemm_all = o.igemm_all || strcmp(a, "--igemm-all") == 0;
      continue;
    }
    if (!v) return usage();
    if (strcmp(a, "--model") == 0) o.model = v;
    else if (strcmp(a, "--batch") == 0) o.batch = atoi(v);
    else if (strcmp(a, "--iters") == 0) o.iters = atoi(v);
    else if (strcmp(a, "--warmup") == 0) o.warmup = atoi(v);
    else if (strcmp(a, "--gpu") == 0) o.gpu = atoi(v);
    else if (strcmp(a, "--math") == 0) o.math = v;
    else if (strcmp(a, "--fixtures") == 0) o.fixtures = v;
    else return usage();
    i++;
  }
  if (o.iters <= 0 || o.warmup < 0 || (strcmp(o.math, "tf32") && strcmp(o.math, "fp32")))
    return usage();
  const char *models[] = {"alexnet", "googlenet", "resnet50", "cifar10_quick", "lenet"};
  bool known = strcmp(o.model, "all") == 0;
  for (int m = 0; m < 5; m++) known = known || strcmp(o.model, models[m]) == 0;
  if (!known) return usage();
  ct_error err;
  ct_context gpu;
  if (!o.list) {
    if (ct_gpu_device_count() == 0) {
      fprintf(stderr, "conv_bench: no GPU (--list needs none)\n");
      return 1;
    }
    if (ct_context_init(&gpu, o.gpu, 1, &err) != CT_OK) return fail("GPU", &err);
    ct_context_set_tf32(&gpu, strcmp(o.math, "tf32") == 0);
    printf("cuDNN workspace limit %.0f MiB\n", ct_cudnn_workspace_limit(o.gpu) / 1048576.0);
  }
  if (o.igemm) ct_igemm_set_mode(CT_IGEMM_RACE);
  int rc = 0;
  for (int m = 0; m < 5 && rc == 0; m++)
    if ((m < 3 && strcmp(o.model, "all") == 0) || strcmp(o.model, models[m]) == 0)
      rc = bench_model(&o, o.list ? NULL : &gpu, models[m]);
  if (!o.list) ct_context_free(&gpu);
  return rc;
}
