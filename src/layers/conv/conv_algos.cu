/* The process-wide table of benchmarked convolution algorithms and the
 * race of Cortado's own kernels against cuDNN's (see conv_algos.h). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/settings.h"
#include "layers/conv/conv_algos.h"
#include "layers/conv/conv_igemm.h" /* the rival choices an entry may name */
extern "C" {
#include "core/log.h"
}

/* ---------------------------------------------------------------- algorithm names */

const char *ct_cudnn_fwd_algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

const char *ct_cudnn_bwd_data_algo_name(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

const char *ct_cudnn_bwd_filter_algo_name(cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "FFT_TILING";
    default: return "?";
  }
}

/* ---------------------------------------------------------------- algorithm table */

typedef struct algo_entry {
  ct_cudnn_conv_key key;
  int cc, sms;  /* compute capability (major * 10 + minor) and SM count */
  ct_cudnn_conv_algos algos;
} algo_entry;

static pthread_mutex_t g_table_lock = PTHREAD_MUTEX_INITIALIZER;
static algo_entry *g_table;
static size_t g_table_len, g_table_cap;

static const algo_entry *table_find(const ct_cudnn_conv_key *key, int cc, int sms) {
  for (size_t i = 0; i < g_table_len; i++)
    if (g_table[i].cc == cc && g_table[i].sms == sms &&
        memcmp(&g_table[i].key, key, sizeof *key) == 0)
      return &g_table[i];
  return NULL;
}

static void table_add(const ct_cudnn_conv_key *key, int cc, int sms,
                      const ct_cudnn_conv_algos *a) {
  if (g_table_len == g_table_cap) {
    size_t cap = g_table_cap ? 2 * g_table_cap : 64;
    algo_entry *t = (algo_entry *)realloc(g_table, cap * sizeof *t);
    if (!t) return;  /* not remembering only costs another benchmark */
    g_table = t;
    g_table_cap = cap;
  }
  algo_entry *e = &g_table[g_table_len++];
  memset(e, 0, sizeof *e);
  e->key = *key;
  e->cc = cc;
  e->sms = sms;
  e->algos = *a;
}

extern "C" size_t ct_cudnn_conv_table_size(void) {
  pthread_mutex_lock(&g_table_lock);
  size_t n = g_table_len;
  pthread_mutex_unlock(&g_table_lock);
  return n;
}

/* An entry as doubles (exact: every field is an int or a size under 2^53):
 * the key's ints, cc, sms, the three algorithms, their math types, their
 * workspace bytes, benchmarked, the three rival choices. */
enum { KEY_INTS = sizeof(ct_cudnn_conv_key) / sizeof(int), ENTRY_VALUES = KEY_INTS + 15 };
static_assert(sizeof(ct_cudnn_conv_key) % sizeof(int) == 0, "the key is ints only");

static void entry_to_values(const algo_entry *e, double *v) {
  int key[KEY_INTS];
  memcpy(key, &e->key, sizeof key);
  for (int i = 0; i < KEY_INTS; i++) *v++ = key[i];
  const ct_cudnn_conv_algos *a = &e->algos;
  const double rest[15] = {(double)e->cc,          (double)e->sms,         (double)a->fwd,
                           (double)a->bwd_data,    (double)a->bwd_filter,  (double)a->fwd_math,
                           (double)a->bwd_data_math, (double)a->bwd_filter_math,
                           (double)a->fwd_bytes,   (double)a->bwd_data_bytes,
                           (double)a->bwd_filter_bytes, a->benchmarked ? 1.0 : 0.0,
                           (double)a->fwd_rival,   (double)a->bwd_data_rival,
                           (double)a->bwd_filter_rival};
  memcpy(v, rest, sizeof rest);
}

static bool is_count(double x, double max) { return x >= 0 && x <= max && x == (double)(long long)x; }

/* A rival choice of an entry: 0 (cuDNN) or one of the implicit-GEMM
 * kernels' configurations of the direction, a TF32 one only where the key
 * allows TF32. */
static bool rival_ok(const ct_cudnn_conv_key *key, ct_igemm_dir dir, int choice) {
  const int most = dir == CT_IGEMM_BWD_FILTER ? CT_IGEMM_WGRAD_CONFIGS : CT_IGEMM_GEMM_CONFIGS;
  if (choice < 0 || choice > most) return false;
  return key->tf32 || !ct_igemm_choice_tf32(dir, choice);
}

static bool values_to_entry(const double *v, algo_entry *e) {
  memset(e, 0, sizeof *e);
  int key[KEY_INTS];
  for (int i = 0; i < KEY_INTS; i++) {
    if (!is_count(v[i], 2147483647.0)) return false;
    key[i] = (int)v[i];
  }
  memcpy(&e->key, key, sizeof key);
  const double *r = v + KEY_INTS;
  for (int i = 0; i < 15; i++)
    if (!is_count(r[i], i < 12 ? 9007199254740992.0 : 1024.0)) return false;
  e->cc = (int)r[0];
  e->sms = (int)r[1];
  ct_cudnn_conv_algos *a = &e->algos;
  a->fwd = (cudnnConvolutionFwdAlgo_t)(int)r[2];
  a->bwd_data = (cudnnConvolutionBwdDataAlgo_t)(int)r[3];
  a->bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)(int)r[4];
  a->fwd_math = (cudnnMathType_t)(int)r[5];
  a->bwd_data_math = (cudnnMathType_t)(int)r[6];
  a->bwd_filter_math = (cudnnMathType_t)(int)r[7];
  a->fwd_bytes = (size_t)r[8];
  a->bwd_data_bytes = (size_t)r[9];
  a->bwd_filter_bytes = (size_t)r[10];
  a->benchmarked = r[11] != 0;
  a->fwd_rival = (int)r[12];
  a->bwd_data_rival = (int)r[13];
  a->bwd_filter_rival = (int)r[14];
  return a->fwd < CUDNN_CONVOLUTION_FWD_ALGO_COUNT &&
         a->bwd_data < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT &&
         a->bwd_filter < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT &&
         rival_ok(&e->key, CT_IGEMM_FWD, a->fwd_rival) &&
         rival_ok(&e->key, CT_IGEMM_BWD_DATA, a->bwd_data_rival) &&
         rival_ok(&e->key, CT_IGEMM_BWD_FILTER, a->bwd_filter_rival);
}

extern "C" size_t ct_cudnn_conv_table_entry_values(void) { return ENTRY_VALUES; }

extern "C" size_t ct_cudnn_conv_table_export(double *out, size_t cap) {
  pthread_mutex_lock(&g_table_lock);
  const size_t need = g_table_len * ENTRY_VALUES;
  for (size_t i = 0; out && (i + 1) * ENTRY_VALUES <= cap && i < g_table_len; i++)
    entry_to_values(&g_table[i], out + i * ENTRY_VALUES);
  pthread_mutex_unlock(&g_table_lock);
  return need;
}

extern "C" long ct_cudnn_conv_table_import(const double *in, size_t n) {
  if (n % ENTRY_VALUES) return -1;
  long added = 0;
  pthread_mutex_lock(&g_table_lock);
  for (size_t i = 0; i < n / ENTRY_VALUES; i++) {
    algo_entry e;
    if (!values_to_entry(in + i * ENTRY_VALUES, &e)) {
      added = -1;
      break;
    }
    if (!table_find(&e.key, e.cc, e.sms)) {
      table_add(&e.key, e.cc, e.sms, &e.algos);
      added++;
    }
  }
  pthread_mutex_unlock(&g_table_lock);
  return added;
}

/* ---------------------------------------------------------------- the file */

/* CORTADO_CUDNN_ALGOS=FILE (see cudnn_util.h): a header, the value count,
 * then the export's doubles, in this machine's byte order. */
static const char k_cache_magic[8] = {'C', 'T', 'C', 'O', 'N', 'V', '2', '\n'};

extern "C" long ct_cudnn_conv_table_read(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return -2;
  char magic[8];
  uint64_t n = 0;
  double *v = NULL;
  bool ok = fread(magic, 1, sizeof magic, f) == sizeof magic &&
            memcmp(magic, k_cache_magic, sizeof magic) == 0 && fread(&n, sizeof n, 1, f) == 1 &&
            n <= ((uint64_t)1 << 24);
  if (ok) {
    v = (double *)ct_xcalloc((size_t)n + 1, sizeof *v);
    ok = fread(v, sizeof *v, (size_t)n, f) == (size_t)n && fgetc(f) == EOF;
  }
  fclose(f);
  const long added = ok ? ct_cudnn_conv_table_import(v, (size_t)n) : -1;
  free(v);
  return added;
}

extern "C" bool ct_cudnn_conv_table_write(const char *path) {
  const uint64_t n = ct_cudnn_conv_table_export(NULL, 0);
  double *v = (double *)ct_xcalloc((size_t)n + 1, sizeof *v);
  ct_cudnn_conv_table_export(v, (size_t)n);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  bool ok = f && fwrite(k_cache_magic, 1, sizeof k_cache_magic, f) == sizeof k_cache_magic &&
            fwrite(&n, sizeof n, 1, f) == 1 && fwrite(v, sizeof *v, (size_t)n, f) == (size_t)n;
  if (f && fclose(f) != 0) ok = false;
  if (ok && rename(tmp, path) != 0) ok = false;
  if (!ok) remove(tmp);
  free(v);
  return ok;
}

static const char *cache_path(void) {
  return ct_setting_text("CORTADO_CUDNN_ALGOS");
}

static void cache_load(void) {
  const char *path = cache_path();
  if (!path) return;
  const long added = ct_cudnn_conv_table_read(path);
  if (added == -1)
    LOG_WARNING("CORTADO_CUDNN_ALGOS: %s is not a table of cuDNN algorithms; benchmarking instead",
                path);
  else if (added >= 0)
    LOG_INFO("took %ld cuDNN convolution algorithm choice%s from %s", added, added == 1 ? "" : "s",
             path);
}

static void cache_save(void) {
  const char *path = cache_path();
  if (path && !ct_cudnn_conv_table_write(path))
    LOG_WARNING("CORTADO_CUDNN_ALGOS: cannot write %s: %s", path, strerror(errno));
}

static pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;

/* Device memory for a benchmark; NULL (and the CUDA error cleared) when the
 * device is out of memory. */
static void *try_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 16) != cudaSuccess) {
    cudaGetLastError();
    return NULL;
  }
  return p;
}

/* Everything a benchmark or heuristic query needs. */
typedef struct find_args {
  cudnnHandle_t h;
  cudnnTensorDescriptor_t x;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  cudnnTensorDescriptor_t y;
  bool strict;
  bool deterministic;
  size_t limit;
  cudnnMathType_t base_math;
  /* scratch buffers of the benchmark (NULL: heuristics) */
  void *xbuf, *wbuf, *ybuf, *ws;
  size_t ws_bytes;
} find_args;

/* Whether a result may be used: it ran, it fits the limit, and its math is
 * allowed (never FP16 down-conversion; no tensor ops in strict FP32), and it is
 * deterministic when the context asks for that. */
template <typename Perf>
static bool usable(const Perf &p, const find_args &a) {
  if (p.status != CUDNN_STATUS_SUCCESS || p.memory > a.limit) return false;
  if (p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return false;
  if (a.strict && p.mathType == CUDNN_TENSOR_OP_MATH) return false;
  if (a.deterministic && p.determinism != CUDNN_DETERMINISTIC) return false;
  return true;
}

/* The math type a chosen result runs with. */
template <typename Perf>
static cudnnMathType_t math_of(const Perf &p, const find_args &a) {
  return a.strict ? CUDNN_FMA_MATH : p.mathType;
}

static cudnnStatus_t fwd_query(const find_args &a, int *n, cudnnConvolutionFwdAlgoPerf_t *perf) {
  if (a.xbuf)
    return cudnnFindConvolutionForwardAlgorithmEx(a.h, a.x, a.xbuf, a.w, a.wbuf, a.conv, a.y,
                                                  a.ybuf, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, n,
                                                  perf, a.ws, a.ws_bytes);
  return cudnnGetConvolutionForwardAlgorithm_v7(a.h, a.x, a.w, a.conv, a.y,
                                                CUDNN_CONVOLUTION_FWD_ALGO_COUNT, n, perf);
}

static cudnnStatus_t fwd_bytes(const find_args &a, cudnnConvolutionFwdAlgo_t algo, size_t *b) {
  return cudnnGetConvolutionForwardWorkspaceSize(a.h, a.x, a.w, a.conv, a.y, algo, b);
}

static cudnnStatus_t bwd_data_query(const find_args &a, int *n,
                                    cudnnConvolutionBwdDataAlgoPerf_t *perf) {
  if (a.xbuf)
    return cudnnFindConvolutionBackwardDataAlgorithmEx(
        a.h, a.w, a.wbuf, a.y, a.ybuf, a.conv, a.x, a.xbuf, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, n,
        perf, a.ws, a.ws_bytes);
  return cudnnGetConvolutionBackwardDataAlgorithm_v7(
      a.h, a.w, a.y, a.conv, a.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, n, perf);
}

static cudnnStatus_t bwd_data_bytes(const find_args &a, cudnnConvolutionBwdDataAlgo_t algo,
                                    size_t *b) {
  return cudnnGetConvolutionBackwardDataWorkspaceSize(a.h, a.w, a.y, a.conv, a.x, algo, b);
}

static cudnnStatus_t bwd_filter_query(const find_args &a, int *n,
                                      cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
  if (a.xbuf)
    return cudnnFindConvolutionBackwardFilterAlgorithmEx(
        a.h, a.x, a.xbuf, a.y, a.ybuf, a.conv, a.w, a.wbuf,
        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, n, perf, a.ws, a.ws_bytes);
  return cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      a.h, a.x, a.y, a.conv, a.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, n, perf);
}

static cudnnStatus_t bwd_filter_bytes(const find_args &a, cudnnConvolutionBwdFilterAlgo_t algo,
                                      size_t *b) {
  return cudnnGetConvolutionBackwardFilterWorkspaceSize(a.h, a.x, a.y, a.conv, a.w, algo, b);
}

/* Benchmarked times this close to the fastest (a fraction of it) count as a
 * tie.  cuDNN's own timings of near-equal algorithms swap order from one run
 * to the next, and so did whole-net speeds by up to 4% (AlexNet, H200): a
 * tie goes to the least workspace, which is the same choice every time. */
#define TIE_FRACTION 0.05f

/* One direction: query (benchmark or heuristics), then the usable result
 * whose workspace, asked again under the math type it will run with, fits
 * the limit: the fastest, or among the benchmarked ones within TIE_FRACTION
 * of the fastest, the one with the least workspace. */
template <typename Perf, typename Algo, int Count>
static ct_status choose(const find_args &a, const char *what,
                        cudnnStatus_t (*query)(const find_args &, int *, Perf *),
                        cudnnStatus_t (*bytes)(const find_args &, Algo, size_t *), Algo *algo,
                        cudnnMathType_t *math, size_t *ws, ct_error *err) {
  Perf perf[Count];
  int n = 0;
  cudnnStatus_t s = query(a, &n, perf);
  if (s != CUDNN_STATUS_SUCCESS)
    return ct_error_set(err, CT_ERR_DEVICE, "cuDNN %s algorithm search failed: %s", what,
                        cudnnGetErrorString(s));
  bool found = false;
  float fastest = 0.0f;
  for (int i = 0; i < n; i++) {
    if (!usable(perf[i], a)) continue;
    if (found && perf[i].time > fastest * (1.0f + TIE_FRACTION)) break; /* sorted by time */
    cudnnMathType_t m = math_of(perf[i], a);
    size_t b = 0;
    if (cudnnSetConvolutionMathType(a.conv, m) != CUDNN_STATUS_SUCCESS) continue;
    s = bytes(a, perf[i].algo, &b);
    cudnnSetConvolutionMathType(a.conv, a.base_math);
    if (s != CUDNN_STATUS_SUCCESS || b > a.limit) continue;
    if (found && b >= *ws) continue;
    if (!found) fastest = perf[i].time;
    found = true;
    *algo = perf[i].algo;
    *math = m;
    *ws = b;
    if (!a.xbuf) break; /* heuristics: their order, no times */
  }
  if (found) return CT_OK;
  return ct_error_set(err, CT_ERR_UNSUPPORTED,
                      "no cuDNN %s algorithm runs this convolution within the %zu MiB workspace "
                      "limit (CORTADO_CUDNN_WORKSPACE_MB)",
                      what, a.limit >> 20);
}

/* Whether the rival's time and workspace beat cuDNN's chosen algorithm's,
 * under the rule of choose: faster by more than TIE_FRACTION, or within
 * it with less workspace (at equal workspace, faster). */
static bool rival_wins(float rival_ms, size_t rival_bytes, float cudnn_ms, size_t cudnn_bytes) {
  if (rival_ms > cudnn_ms * (1.0f + TIE_FRACTION)) return false;
  if (rival_ms * (1.0f + TIE_FRACTION) < cudnn_ms) return true;
  if (rival_bytes != cudnn_bytes) return rival_bytes < cudnn_bytes;
  return rival_ms < cudnn_ms;
}

/* Milliseconds per call of cuDNN's algorithm algo (math type math) for
 * direction dir on the benchmark's buffers, timed by ct_gpu_time_calls on
 * the handle's stream as the rival times itself (cuDNN's Find reports a
 * single call, with its overhead). */
static float time_cudnn(const find_args &a, int dir, int algo, cudnnMathType_t math) {
  static const float one = 1.0f, zero = 0.0f;
  cudaStream_t st = NULL;
  CT_CUDNN_CHECK(cudnnGetStream(a.h, &st));
  CT_CUDNN_CHECK(cudnnSetConvolutionMathType(a.conv, math));
  const float ms = ct_gpu_time_calls(st, 5, [&] {
    if (dir == 0)
      CT_CUDNN_CHECK(cudnnConvolutionForward(a.h, &one, a.x, a.xbuf, a.w, a.wbuf, a.conv,
                                             (cudnnConvolutionFwdAlgo_t)algo, a.ws, a.ws_bytes,
                                             &zero, a.y, a.ybuf));
    else if (dir == 1)
      CT_CUDNN_CHECK(cudnnConvolutionBackwardData(a.h, &one, a.w, a.wbuf, a.y, a.ybuf, a.conv,
                                                  (cudnnConvolutionBwdDataAlgo_t)algo, a.ws,
                                                  a.ws_bytes, &zero, a.x, a.xbuf));
    else
      CT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(a.h, &one, a.x, a.xbuf, a.y, a.ybuf, a.conv,
                                                    (cudnnConvolutionBwdFilterAlgo_t)algo, a.ws,
                                                    a.ws_bytes, &one, a.w, a.wbuf));
  });
  CT_CUDNN_CHECK(cudnnSetConvolutionMathType(a.conv, a.base_math));
  return ms;
}

/* Races the rival on direction dir against cuDNN's choice (algo with math
 * type math, *bytes of workspace), both timed the same way, and keeps both
 * times in times->race_*_ms[dir]; on a win sets *choice and *bytes to the
 * rival's. */
static void race(const find_args &a, const ct_cudnn_conv_rival *rival, int dir, bool benchmarked,
                 int algo, cudnnMathType_t math, size_t *bytes, int *choice,
                 ct_cudnn_conv_algos *times) {
  *choice = 0;
  if (!rival || !benchmarked) return;
  int c = 0;
  float t = 0.0f;
  size_t b = 0;
  if (!rival->time(rival->user, dir, a.xbuf, a.wbuf, a.ybuf, a.ws, a.ws_bytes, &c, &t, &b)) return;
  if (b > a.limit || c < 1) return;
  const float ms = time_cudnn(a, dir, algo, math);
  times->race_cudnn_ms[dir] = ms;
  times->race_rival_ms[dir] = t;
  const bool wins = rival->force || rival_wins(t, b, ms, *bytes);
  static const char *const names[3] = {"forward", "backward data", "backward filter"};
  LOG_INFO("convolution %s: cuDNN %.4f ms (%.1fM), Cortado's choice %d %.4f ms (%.1fM): %s",
           names[dir], ms, *bytes / 1048576.0, c, t, b / 1048576.0, wins ? "Cortado" : "cuDNN");
  if (wins) {
    *choice = c;
    *bytes = b;
  }
}

static ct_status choose_all(const find_args &a, const ct_cudnn_conv_rival *rival, bool benchmarked,
                            ct_cudnn_conv_algos *out, ct_error *err) {
  CT_TRY((choose<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t,
                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(a, "forward", fwd_query, fwd_bytes, &out->fwd,
                                                   &out->fwd_math, &out->fwd_bytes, err)));
  race(a, rival, 0, benchmarked, out->fwd, out->fwd_math, &out->fwd_bytes, &out->fwd_rival,
       out);
  CT_TRY((choose<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t,
                 CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(a, "backward-data", bwd_data_query,
                                                        bwd_data_bytes, &out->bwd_data,
                                                        &out->bwd_data_math,
                                                        &out->bwd_data_bytes, err)));
  race(a, rival, 1, benchmarked, out->bwd_data, out->bwd_data_math, &out->bwd_data_bytes,
       &out->bwd_data_rival, out);
  CT_TRY((choose<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t,
                 CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(a, "backward-filter", bwd_filter_query,
                                                          bwd_filter_bytes, &out->bwd_filter,
                                                          &out->bwd_filter_math,
                                                          &out->bwd_filter_bytes, err)));
  race(a, rival, 2, benchmarked, out->bwd_filter, out->bwd_filter_math, &out->bwd_filter_bytes,
       &out->bwd_filter_rival, out);
  return CT_OK;
}

static size_t prod(const int *v, int n) {
  size_t p = 1;
  for (int i = 0; i < n; i++) p *= (size_t)v[i];
  return p;
}

/* Benchmarks on scratch buffers (contents zero; Find overwrites the
 * outputs), or falls back to the heuristics when they do not fit. */
static ct_status find_now(ct_context *ctx, const ct_cudnn_conv_key *k, find_args *a,
                          const ct_cudnn_conv_rival *rival, ct_cudnn_conv_algos *out,
                          ct_error *err) {
  const size_t xbytes = (size_t)k->n * k->x_channels * prod(k->x_dims, k->nspatial) * sizeof(float);
  const size_t ybytes = (size_t)k->n * k->y_channels * prod(k->y_dims, k->nspatial) * sizeof(float);
  const size_t wbytes = (size_t)k->y_channels * (k->x_channels / k->group) *
                        prod(k->kernel, k->nspatial) * sizeof(float);
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  a->xbuf = try_alloc(xbytes);
  a->ybuf = a->xbuf ? try_alloc(ybytes) : NULL;
  a->wbuf = a->ybuf ? try_alloc(wbytes) : NULL;
  a->ws = NULL;
  a->ws_bytes = a->limit;
  while (a->wbuf && a->ws_bytes > 0 && !(a->ws = try_alloc(a->ws_bytes))) a->ws_bytes /= 2;
  bool bench = a->wbuf != NULL;
  if (bench) {
    CT_CUDA_CHECK(cudaMemsetAsync(a->xbuf, 0, xbytes, stream));
    CT_CUDA_CHECK(cudaMemsetAsync(a->ybuf, 0, ybytes, stream));
    CT_CUDA_CHECK(cudaMemsetAsync(a->wbuf, 0, wbytes, stream));
    if (a->ws_bytes < a->limit) a->limit = a->ws_bytes;
  } else {
    LOG_WARNING("not enough GPU memory to benchmark cuDNN convolution algorithms; using cuDNN's "
                "heuristics");
    cudaFree(a->xbuf);
    cudaFree(a->ybuf);
    a->xbuf = a->ybuf = NULL;
  }
  ct_status s = choose_all(*a, rival, bench, out, err);
  out->benchmarked = bench;
  if (bench) {
    CT_CUDA_CHECK(cudaStreamSynchronize(stream));
    cudaFree(a->ws);
    cudaFree(a->wbuf);
    cudaFree(a->ybuf);
    cudaFree(a->xbuf);
  }
  return s;
}

ct_status ct_cudnn_conv_find(ct_context *ctx, const ct_cudnn_conv_key *key,
                             cudnnTensorDescriptor_t x_desc, cudnnFilterDescriptor_t w_desc,
                             cudnnConvolutionDescriptor_t conv_desc,
                             cudnnTensorDescriptor_t y_desc, const ct_cudnn_conv_rival *rival,
                             ct_cudnn_conv_algos *out, ct_error *err) {
  CT_ASSERT((rival != NULL) == (key->rival != 0));
  int major = 0, minor = 0, sms = 0;
  CT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx->device));
  CT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, ctx->device));
  CT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device));
  const int cc = major * 10 + minor;
  find_args a;
  memset(&a, 0, sizeof a);
  a.h = (cudnnHandle_t)ctx->cudnn;
  a.x = x_desc;
  a.w = w_desc;
  a.conv = conv_desc;
  a.y = y_desc;
  a.strict = !key->tf32;
  a.deterministic = key->deterministic != 0;
  a.limit = ct_cudnn_workspace_limit(ctx->device);
  CT_CUDNN_TRY(err, cudnnGetConvolutionMathType(conv_desc, &a.base_math));
  /* The lock is held through a benchmark: workers on other GPUs asking for
   * the same shapes wait for it and then share its result. */
  pthread_once(&g_cache_once, cache_load);
  pthread_mutex_lock(&g_table_lock);
  const algo_entry *e = table_find(key, cc, sms);
  ct_status s = CT_OK;
  bool added = false;
  if (e) {
    *out = e->algos;
  } else {
    memset(out, 0, sizeof *out);
    s = find_now(ctx, key, &a, rival, out, err);
    if (s == CT_OK) table_add(key, cc, sms, out);
    added = s == CT_OK;
  }
  pthread_mutex_unlock(&g_table_lock);
  if (added) cache_save();
  return s;
}
