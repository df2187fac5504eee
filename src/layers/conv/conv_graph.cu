/* Convolutions through cuDNN's graph API: see conv_graph.h. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cudnn_util.h"
#include "gpu/gpu.h"
#include "layers/conv/conv_graph.h"
extern "C" {
#include "core/log.h"
}

typedef cudnnBackendDescriptor_t desc_t;

/* One direction: its plan, and the variant pack of the last pointers. */
typedef struct graph_dir {
  desc_t plan;
  size_t ws_bytes;
  int choice;        /* index in the heuristics' list */
  int64_t engine;    /* cuDNN's global engine index, for the log */
  desc_t pack;
  const void *ptrs[4]; /* a, b, out, ws of pack */
} graph_dir;

struct ct_conv_graph {
  graph_dir dir[3];
};

/* Unique ids of the tensors in a graph. */
enum { UID_X = 1, UID_W = 2, UID_Y = 3 };

#define SET(d, attr, type, n, v) cudnnBackendSetAttribute((d), (attr), (type), (n), (v))

/* Calls that build descriptors: a failure makes the build fail (goto fail). */
#define TRY(call)                                     \
  do {                                                \
    if ((call) != CUDNN_STATUS_SUCCESS) goto fail;    \
  } while (0)

static void destroy(desc_t *d) {
  if (*d) cudnnBackendDestroyDescriptor(*d);
  *d = NULL;
}

/* A tensor of dims (n, c, spatial...) packed in layout (NHWC: c last). */
static desc_t make_tensor(int64_t uid, cudnnDataType_t type, int ndim, const int64_t *dims,
                          bool nhwc) {
  desc_t t = NULL;
  int64_t strides[5], s = 1;
  if (nhwc) {
    strides[1] = 1;
    s = dims[1];
    for (int i = ndim - 1; i >= 2; i--) {
      strides[i] = s;
      s *= dims[i];
    }
    strides[0] = s;
  } else {
    for (int i = ndim - 1; i >= 0; i--) {
      strides[i] = s;
      s *= dims[i];
    }
  }
  const int64_t align = 16;
  TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, &t));
  TRY(SET(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  TRY(SET(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, ndim, dims));
  TRY(SET(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, ndim, strides));
  TRY(SET(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  TRY(SET(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
  TRY(cudnnBackendFinalize(t));
  return t;
fail:
  destroy(&t);
  return NULL;
}

static desc_t make_conv(const ct_conv_graph_geom *g) {
  desc_t c = NULL;
  const int64_t nd = g->nd;
  int64_t pad[3], stride[3], dil[3];
  for (int i = 0; i < g->nd; i++) {
    pad[i] = g->pad[i];
    stride[i] = g->stride[i];
    dil[i] = g->dilation[i];
  }
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &c));
  TRY(SET(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nd));
  TRY(SET(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
  TRY(SET(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  TRY(SET(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nd, pad));
  TRY(SET(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nd, pad));
  TRY(SET(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nd, dil));
  TRY(SET(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nd, stride));
  TRY(cudnnBackendFinalize(c));
  return c;
fail:
  destroy(&c);
  return NULL;
}

/* The operation graph of direction dir on handle h (NULL on failure). */
static desc_t make_graph(cudnnHandle_t h, const ct_conv_graph_geom *g, ct_conv_graph_dir dir) {
  const int ndim = g->nd + 2;
  int64_t xd[5] = {g->n, g->c}, wd[5] = {g->k, g->c / g->group}, yd[5] = {g->n, g->k};
  for (int i = 0; i < g->nd; i++) {
    xd[2 + i] = g->in[i];
    wd[2 + i] = g->kernel[i];
    yd[2 + i] = g->out[i];
  }
  const cudnnDataType_t type = ct_cudnn_type(g->type);
  const bool nhwc = g->layout == CT_NHWC;
  desc_t x = make_tensor(UID_X, type, ndim, xd, nhwc), w = make_tensor(UID_W, type, ndim, wd, nhwc);
  desc_t y = make_tensor(UID_Y, type, ndim, yd, nhwc), conv = make_conv(g);
  desc_t op = NULL, graph = NULL;
  const float alpha = 1.0f, beta = 0.0f;
  if (!x || !w || !y || !conv) goto fail;
  /* each direction's operation and its attributes for x (or dx), w (or dw),
   * y (or dy), the convolution, alpha and beta */
  static const struct {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  } ops[3] = {
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
  };
  TRY(cudnnBackendCreateDescriptor(ops[dir].type, &op));
  TRY(SET(op, ops[dir].x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  TRY(SET(op, ops[dir].w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
  TRY(SET(op, ops[dir].y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
  TRY(SET(op, ops[dir].conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
  TRY(SET(op, ops[dir].alpha, CUDNN_TYPE_FLOAT, 1, &alpha));
  TRY(SET(op, ops[dir].beta, CUDNN_TYPE_FLOAT, 1, &beta));
  TRY(cudnnBackendFinalize(op));
  TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph));
  TRY(SET(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
  TRY(SET(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  TRY(cudnnBackendFinalize(graph));
  goto done;
fail:
  destroy(&graph);
done:
  destroy(&op);
  destroy(&conv);
  destroy(&x);
  destroy(&w);
  destroy(&y);
  return graph;
}

/* The engine configurations cuDNN's heuristics give for graph, at most
 * cap of them, into cfgs (created here); returns how many. */
static int heuristics(desc_t graph, desc_t *cfgs, int cap) {
  desc_t heur = NULL;
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  int64_t n = 0;
  int made = 0;
  TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
  TRY(SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
  TRY(SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  TRY(cudnnBackendFinalize(heur));
  TRY(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               0, &n, NULL));
  if (n > cap) n = cap;
  for (made = 0; made < n; made++)
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[made]) !=
        CUDNN_STATUS_SUCCESS)
      break;
  n = 0;
  if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                               made, &n, cfgs) != CUDNN_STATUS_SUCCESS)
    n = 0;
  for (int i = (int)n; i < made; i++) destroy(&cfgs[i]);
  destroy(&heur);
  return (int)n;
fail:
  destroy(&heur);
  return 0;
}

/* Whether cfg's engine may run: float32 accumulation of the type's inputs,
 * and deterministic when asked; *engine gets its global index. */
static bool allowed(desc_t cfg, bool deterministic, int64_t *engine) {
  desc_t e = NULL;
  int64_t n = 0;
  bool ok = false;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e));
  TRY(cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                               &n, &e));
  *engine = -1;
  cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, engine);
  n = 0;
  TRY(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes));
  ok = true;
  for (int64_t i = 0; i < n; i++)
    if (notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
        notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
        (deterministic && notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC))
      ok = false;
fail:
  destroy(&e);
  return ok;
}

/* The execution plan of cfg on h, and its workspace (NULL: none). */
static desc_t make_plan(cudnnHandle_t h, desc_t cfg, size_t *ws) {
  desc_t plan = NULL;
  int64_t n = 0, bytes = 0;
  TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan));
  TRY(SET(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  TRY(SET(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg));
  TRY(cudnnBackendFinalize(plan));
  TRY(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                               &n, &bytes));
  *ws = (size_t)bytes;
  return plan;
fail:
  destroy(&plan);
  return NULL;
}

/* Enqueues d's plan with the pointers of direction dir (a variant pack made
 * again only when they change). */
static cudnnStatus_t execute(cudnnHandle_t h, graph_dir *d, ct_conv_graph_dir dir, const void *a,
                             const void *b, void *out, void *ws) {
  const void *ptrs[4] = {a, b, out, ws};
  if (!d->pack || memcmp(ptrs, d->ptrs, sizeof ptrs) != 0) {
    destroy(&d->pack);
    /* the operands by role: forward x, w -> y; backward data dy, w -> dx;
     * backward filter x, dy -> dw */
    static const int64_t roles[3][3] = {
        {UID_X, UID_W, UID_Y}, {UID_Y, UID_W, UID_X}, {UID_X, UID_Y, UID_W}};
    void *data[3] = {(void *)a, (void *)b, out};
    void *wsp = ws;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &d->pack);
    if (st == CUDNN_STATUS_SUCCESS)
      st = SET(d->pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, roles[dir]);
    if (st == CUDNN_STATUS_SUCCESS)
      st = SET(d->pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, data);
    if (st == CUDNN_STATUS_SUCCESS)
      st = SET(d->pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &wsp);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(d->pack);
    if (st != CUDNN_STATUS_SUCCESS) {
      destroy(&d->pack);
      return st;
    }
    memcpy(d->ptrs, ptrs, sizeof ptrs);
  }
  return cudnnBackendExecute(h, d->plan, d->pack);
}

/* ---------------------------------------------------------------- choices */

/* The process-wide table of choices: geometry, direction, determinism and
 * device kind -> the index in the heuristics' list. */
typedef struct choice_key {
  ct_conv_graph_geom g;
  int dir, deterministic, cc;
} choice_key;
typedef struct choice {
  choice_key key;
  int index;
} choice;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static choice *g_table;
static size_t g_n, g_cap;

static bool lookup(const choice_key *k, int *index) {
  pthread_mutex_lock(&g_lock);
  bool found = false;
  for (size_t i = 0; i < g_n && !found; i++)
    if (memcmp(&g_table[i].key, k, sizeof *k) == 0) {
      *index = g_table[i].index;
      found = true;
    }
  pthread_mutex_unlock(&g_lock);
  return found;
}

static void remember(const choice_key *k, int index) {
  pthread_mutex_lock(&g_lock);
  if (g_n == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 64;
    g_table = (choice *)ct_xrealloc(g_table, g_cap * sizeof *g_table);
  }
  g_table[g_n].key = *k;
  g_table[g_n++].index = index;
  pthread_mutex_unlock(&g_lock);
}

/* Bytes of the three operands of g. */
static void operand_bytes(const ct_conv_graph_geom *g, size_t *x, size_t *w, size_t *y) {
  size_t sx = (size_t)g->n * g->c, sw = (size_t)g->k * (g->c / g->group), sy = (size_t)g->n * g->k;
  for (int i = 0; i < g->nd; i++) {
    sx *= (size_t)g->in[i];
    sw *= (size_t)g->kernel[i];
    sy *= (size_t)g->out[i];
  }
  const size_t e = ct_dtype_size(g->type);
  *x = sx * e;
  *w = sw * e;
  *y = sy * e;
}

#define MAX_CFGS 64

/* Plans direction dir into d: the remembered choice, or the fastest of the
 * first CT_CONV_GRAPH_TRIALS allowed plans within the limit, timed on
 * scratch buffers (a plan whose trial fails is never chosen: before, a
 * failed first one was kept as the fastest). */
static bool plan_dir(ct_context *ctx, const ct_conv_graph_geom *g, ct_conv_graph_dir dir,
                     graph_dir *d) {
  cudnnHandle_t h = (cudnnHandle_t)ctx->cudnn;
  const size_t limit = ct_cudnn_workspace_limit(ctx->device);
  choice_key key;
  memset(&key, 0, sizeof key);
  key.g = *g;
  key.dir = (int)dir;
  key.deterministic = ctx->deterministic;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx->device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ctx->device);
  key.cc = major * 10 + minor;
  desc_t graph = make_graph(h, g, dir);
  if (!graph) return false;
  desc_t cfgs[MAX_CFGS];
  const int n = heuristics(graph, cfgs, MAX_CFGS);
  int remembered = -1;
  const bool known = lookup(&key, &remembered);
  desc_t plans[CT_CONV_GRAPH_TRIALS];
  size_t ws[CT_CONV_GRAPH_TRIALS];
  int index[CT_CONV_GRAPH_TRIALS];
  int64_t engine[CT_CONV_GRAPH_TRIALS];
  int np = 0;
  for (int i = 0; i < n && np < CT_CONV_GRAPH_TRIALS; i++) {
    if (known && i != remembered) continue;
    int64_t e = -1;
    if (!allowed(cfgs[i], ctx->deterministic, &e)) continue;
    size_t b = 0;
    desc_t p = make_plan(h, cfgs[i], &b);
    if (!p) continue;
    if (b > limit) {
      destroy(&p);
      continue;
    }
    plans[np] = p;
    ws[np] = b;
    index[np] = i;
    engine[np++] = e;
  }
  for (int i = 0; i < n; i++) destroy(&cfgs[i]);
  destroy(&graph);
  if (np == 0) return false;
  /* with several, the fastest of those that ran (none: no plan) */
  int best = np > 1 ? -1 : 0;
  if (np > 1) {
    /* time each on scratch operands (values do not matter) */
    size_t bx, bw, by, wmax = 0;
    operand_bytes(g, &bx, &bw, &by);
    for (int i = 0; i < np; i++) wmax = ws[i] > wmax ? ws[i] : wmax;
    void *x = ct_mem_alloc(ctx->device, bx), *w = ct_mem_alloc(ctx->device, bw);
    void *y = ct_mem_alloc(ctx->device, by), *scratch = wmax ? ct_mem_alloc(ctx->device, wmax) : NULL;
    CT_CUDA_CHECK(cudaMemsetAsync(x, 0, bx, (cudaStream_t)ctx->stream));
    CT_CUDA_CHECK(cudaMemsetAsync(w, 0, bw, (cudaStream_t)ctx->stream));
    CT_CUDA_CHECK(cudaMemsetAsync(y, 0, by, (cudaStream_t)ctx->stream));
    const void *in[3][2] = {{x, w}, {y, w}, {x, y}};
    void *out[3] = {y, x, w};
    float fastest = 0.0f;
    for (int i = 0; i < np; i++) {
      graph_dir t = {plans[i], ws[i], index[i], engine[i], NULL, {NULL}};
      bool ok = true;
      const float ms = ct_gpu_time_calls((cudaStream_t)ctx->stream, 3, [&] {
        if (ok && execute(h, &t, dir, in[dir][0], in[dir][1], out[dir], scratch) !=
                      CUDNN_STATUS_SUCCESS)
          ok = false;
      });
      destroy(&t.pack);
      if (ok && (best < 0 || ms < fastest)) {
        fastest = ms;
        best = i;
      }
    }
    ct_mem_free(ctx->device, x);
    ct_mem_free(ctx->device, w);
    ct_mem_free(ctx->device, y);
    if (scratch) ct_mem_free(ctx->device, scratch);
  }
  for (int i = 0; i < np; i++)
    if (i != best) destroy(&plans[i]);
  if (best < 0) return false;
  *d = (graph_dir){plans[best], ws[best], index[best], engine[best], NULL, {NULL}};
  if (!known) remember(&key, index[best]);
  return true;
}

/* ---------------------------------------------------------------- public */

extern "C" ct_status ct_conv_graph_plan(ct_context *ctx, const ct_conv_graph_geom *g,
                                        ct_conv_graph **out, ct_error *err) {
  *out = NULL;
  ct_conv_graph *cg = (ct_conv_graph *)ct_xcalloc(1, sizeof *cg);
  static const char *const names[3] = {"forward", "backward data", "backward filter"};
  for (int d = 0; d < 3; d++)
    if (!plan_dir(ctx, g, (ct_conv_graph_dir)d, &cg->dir[d])) {
      ct_conv_graph_free(cg);
      return ct_error_set(err, CT_ERR_UNSUPPORTED,
                          "cuDNN's graph API has no %s engine for this %s convolution within the "
                          "workspace limit",
                          names[d], ct_dtype_name(g->type));
    }
  *out = cg;
  return CT_OK;
}

extern "C" size_t ct_conv_graph_workspace(const ct_conv_graph *cg, ct_conv_graph_dir dir) {
  return cg->dir[dir].ws_bytes;
}

extern "C" void ct_conv_graph_run(ct_context *ctx, ct_conv_graph *cg, ct_conv_graph_dir dir,
                                  const void *a, const void *b, void *out, void *ws) {
  CT_CUDNN_CHECK(execute((cudnnHandle_t)ctx->cudnn, &cg->dir[dir], dir, a, b, out, ws));
}

extern "C" char *ct_conv_graph_describe(const ct_conv_graph *cg, ct_conv_graph_dir dir, char *buf,
                                        size_t len) {
  snprintf(buf, len, "engine %lld (#%d)", (long long)cg->dir[dir].engine, cg->dir[dir].choice);
  return buf;
}

extern "C" void ct_conv_graph_free(ct_conv_graph *cg) {
  if (!cg) return;
  for (int d = 0; d < 3; d++) {
    destroy(&cg->dir[d].pack);
    destroy(&cg->dir[d].plan);
  }
  free(cg);
}
