/* The algorithms a convolution runs on a GPU (conv_algos.cu): a
 * process-wide table of benchmarked cuDNN algorithms, keyed by everything
 * that decides them, with Cortado's own kernels (conv_igemm.h) raced
 * against cuDNN's per direction; the table can be shared with other worker
 * processes and kept in a file (CORTADO_CUDNN_ALGOS). */
#ifndef CT_LAYERS_CONV_CONV_ALGOS_H
#define CT_LAYERS_CONV_CONV_ALGOS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

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
  int dtype;              /* the element type of x, w and y (ct_dtype) */
  int layout;             /* their memory order (ct_layout; the filter's too) */
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

#include "gpu/cudnn_util.h"

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
