/* cuDNN as the layers see it: the engine choice, the workspace limit, and
 * (for .cu files) the checked-call macro, tensor descriptors and the
 * process-wide table of benchmarked convolution algorithms.
 *
 * Engine choice (Caffe's `engine` field of convolution_param, pooling_param,
 * lrn_param, softmax_param, relu_param, sigmoid_param, tanh_param): DEFAULT
 * and CUDNN run the layer on cuDNN when cuDNN computes exactly what Caffe
 * does for its settings, CAFFE runs Cortado's own kernels.  A CUDNN request
 * that cuDNN cannot serve falls back to the own kernels with a warning.
 *
 * Math: convolutions read ctx->tf32 when they are reshaped.  TF32 lets cuDNN
 * use tensor cores (its default for FP32 on Ampere and later); strict FP32
 * (`--math=fp32`) sets CUDNN_FMA_MATH on every convolution descriptor and
 * refuses algorithms that report tensor-op math.  A change of ctx->tf32
 * takes effect at the next reshape of each layer.
 *
 * Workspace: a convolution's algorithms are chosen within a byte limit,
 * CORTADO_CUDNN_WORKSPACE_MB (MiB) when set, else the smaller of 1 GiB and a
 * quarter of the free memory of the first device that asks.  The
 * workspace itself is the context's (ct_context_workspace), grown at
 * reshape to what the chosen algorithms need; forward and backward only
 * read ctx->workspace. */
#ifndef CT_GPU_CUDNN_UTIL_H
#define CT_GPU_CUDNN_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The values of every Caffe Engine enum (they agree across the messages). */
enum { CT_ENGINE_DEFAULT = 0, CT_ENGINE_CAFFE = 1, CT_ENGINE_CUDNN = 2 };

/* Whether layer `name` runs on cuDNN: engine is the layer's Engine field and
 * unsupported is NULL when cuDNN can compute this configuration exactly, or
 * the reason it cannot ("a second top", ...).  Logs a warning, naming the
 * layer and the reason, when engine is CUDNN but the reason is not NULL.
 * False whenever ct_cudnn_set_enabled(false) is in force. */
bool ct_cudnn_wanted(const char *name, int engine, const char *unsupported);

/* Hidden knob for tests and benchmarks: false makes every layer reshaped
 * afterwards use the CAFFE engine whatever its engine field says (true, the
 * default, restores the field's choice).  Not thread-safe: set it before
 * building layers.  Exists in CPU-only builds too (where it changes
 * nothing). */
void ct_cudnn_set_enabled(bool enabled);
bool ct_cudnn_enabled(void);

/* The workspace limit in bytes on device (see above); fixed at the first
 * call.  GPU builds only. */
size_t ct_cudnn_workspace_limit(int device);
/* Everything that decides a convolution's algorithms (plain ints: the
 * table's export starts with them, in this order). */
typedef struct ct_cudnn_conv_key {
  int nspatial;           /* 2 or 3 (1-D convolutions are 2-D with a unit axis) */
  int n, x_channels, y_channels, group;
  int x_dims[3], y_dims[3];
  int kernel[3], pad[3], stride[3], dilation[3];
  int tf32;
  int deterministic;      /* only CUDNN_DETERMINISTIC algorithms */
  int rival;              /* the rival kernels' mode (0: none; see ct_cudnn_conv_rival) */
} ct_cudnn_conv_key;

/* Entries in the process-wide table of convolution algorithms (for tests).
 * GPU builds only. */
size_t ct_cudnn_conv_table_size(void);
/* The table as doubles, for processes that should run the algorithms this
 * one chose (data-parallel workers): writes the entries that fit in cap
 * values to out (out may be NULL) and returns how many values the whole
 * table takes.  GPU builds only. */
size_t ct_cudnn_conv_table_export(double *out, size_t cap);
/* Adds the entries of an exported table of n values that this table lacks
 * (entries already here stay) and returns how many it added; -1, with the
 * entries before the first bad one added, when in is not an export.  GPU
 * builds only. */
long ct_cudnn_conv_table_import(const double *in, size_t n);
/* The table in a file (CORTADO_CUDNN_ALGOS, see ct_cudnn_conv_find): read
 * adds the file's entries that the table lacks and returns how many, -1
 * when the file is not such a table (nothing added), -2 when it cannot be
 * opened; write replaces path atomically with the whole table (false, errno
 * set, when it cannot).  GPU builds only. */
long ct_cudnn_conv_table_read(const char *path);
bool ct_cudnn_conv_table_write(const char *path);
/* Values per entry of an export: the key's ints, then compute capability
 * (major * 10 + minor), SM count, the forward, backward-data and
 * backward-filter algorithms, their three math types, their three workspace
 * sizes in bytes, 1 when benchmarked (0: heuristics), and the three rival
 * choices (0: cuDNN's algorithm runs the direction).  GPU builds only. */
size_t ct_cudnn_conv_table_entry_values(void);

#ifdef __cplusplus
}
#endif

#ifdef __CUDACC__
#include <cudnn.h>

#include "gpu/gpu.h"

/* Checked cuDNN call in forward and backward: a failure there is a bug or a
 * device fault (the configuration was accepted at reshape), fatal through
 * ct_abort with the call, file and line. */
#define CT_CUDNN_CHECK(call)                                                           \
  do {                                                                                 \
    cudnnStatus_t ct_s_ = (call);                                                      \
    if (ct_s_ != CUDNN_STATUS_SUCCESS)                                                 \
      ct_abort(__FILE__, __LINE__, "cuDNN error %s (in %s)", cudnnGetErrorString(ct_s_), \
               #call);                                                                 \
  } while (0)

/* Checked cuDNN call at reshape: returns CT_ERR_DEVICE from the enclosing
 * function with the call named. */
#define CT_CUDNN_TRY(err, call)                                                       \
  do {                                                                                \
    cudnnStatus_t ct_s_ = (call);                                                     \
    if (ct_s_ != CUDNN_STATUS_SUCCESS)                                                \
      return ct_error_set((err), CT_ERR_DEVICE, "cuDNN error %s (in %s at %s:%d)",    \
                          cudnnGetErrorString(ct_s_), #call, __FILE__, __LINE__);     \
  } while (0)

/* Sets a fully packed float tensor descriptor of ndim (4 or 5) dims.
 * Returns the cuDNN status (BAD_PARAM for a dimension out of range). */
cudnnStatus_t ct_cudnn_set_tensor(cudnnTensorDescriptor_t desc, int ndim, const int *dims);
/* count packed values as (1, 1, 1, count), for elementwise operations
 * (whose shape does not matter; cuDNN runs them fastest as one packed row).
 * BAD_PARAM when count is 0 or over 2^31 - 1. */
cudnnStatus_t ct_cudnn_set_flat(cudnnTensorDescriptor_t desc, size_t count);

/* ---------------------------------------------------------------- convolution algorithms */

/* The chosen algorithms, their math types and workspace sizes. */
typedef struct ct_cudnn_conv_algos {
  cudnnConvolutionFwdAlgo_t fwd;
  cudnnConvolutionBwdDataAlgo_t bwd_data;
  cudnnConvolutionBwdFilterAlgo_t bwd_filter;
  cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
  size_t fwd_bytes, bwd_data_bytes, bwd_filter_bytes;
  bool benchmarked;       /* by the Find*Ex functions (false: heuristics) */
  /* Per direction, 0 when cuDNN's algorithm above runs it, else the rival
   * kernels' choice (>= 1) that beat it; the bytes are then the rival's. */
  int fwd_rival, bwd_data_rival, bwd_filter_rival;
  /* Per direction (forward, backward data, backward filter), the race's
   * milliseconds per call of cuDNN's algorithm and of the rival's best
   * choice; 0 where no race ran (for benchmarks: the table's export and
   * file leave them out, so an imported entry has 0). */
  float race_cudnn_ms[3], race_rival_ms[3];
} ct_cudnn_conv_algos;
/* Kernels outside cuDNN raced against its algorithms per direction (the
 * layers' own implicit GEMM, conv_igemm.h).  time() runs direction dir
 * (0 forward, 1 backward data, 2 backward filter) on the benchmark's
 * buffers and workspace, and returns true with its best choice (>= 1), its
 * milliseconds per call and the workspace bytes that choice needs, or false
 * when it cannot run dir.  With force the rival takes every direction it
 * can run, whatever the times (tests). */
typedef struct ct_cudnn_conv_rival {
  bool (*time)(void *user, int dir, void *x, void *w, void *y, void *ws, size_t ws_bytes,
               int *choice, float *ms, size_t *bytes);
  void *user;
  bool force;
} ct_cudnn_conv_rival;

/* The algorithms for key on ctx's device: from the process-wide table, or
 * benchmarked now with cudnnFind*AlgorithmEx on scratch buffers of the
 * descriptors' sizes (which this allocates and frees, so it synchronises)
 * within ct_cudnn_workspace_limit and stored.  When the scratch cannot be
 * allocated the heuristics (cudnnGet*Algorithm_v7) choose instead.  Of the
 * benchmarked results, those within 5% of the fastest count as a tie, which
 * goes to the least workspace: near-equal algorithms otherwise swap places
 * from run to run.  conv_desc
 * must carry key->tf32's math type (CUDNN_FMA_MATH when strict).  Thread-safe:
 * workers on several GPUs share the table (keyed by compute capability as
 * well).  With CORTADO_CUDNN_ALGOS=FILE in the environment the table
 * starts from FILE (when it exists and holds one; else a warning) and every
 * new choice rewrites FILE, so that separate runs on the same GPU model
 * (a 1-GPU run and the N-GPU run it is compared with) run the same
 * algorithms.  With a rival (not NULL; key->rival must then be non-zero)
 * each benchmarked direction also times the rival on the same buffers; it
 * runs that direction when it is faster by more than the tie fraction, or
 * ties with less workspace (or force is set).
 * Fails with CT_ERR_UNSUPPORTED when no algorithm runs the
 * convolution, or CT_ERR_DEVICE when cuDNN fails. */
ct_status ct_cudnn_conv_find(ct_context *ctx, const ct_cudnn_conv_key *key,
                             cudnnTensorDescriptor_t x_desc, cudnnFilterDescriptor_t w_desc,
                             cudnnConvolutionDescriptor_t conv_desc,
                             cudnnTensorDescriptor_t y_desc, const ct_cudnn_conv_rival *rival,
                             ct_cudnn_conv_algos *out, ct_error *err);

/* Short names for tables and logs ("IMPLICIT_PRECOMP_GEMM", ...). */
const char *ct_cudnn_fwd_algo_name(cudnnConvolutionFwdAlgo_t a);
const char *ct_cudnn_bwd_data_algo_name(cudnnConvolutionBwdDataAlgo_t a);
const char *ct_cudnn_bwd_filter_algo_name(cudnnConvolutionBwdFilterAlgo_t a);
#endif

#endif
