/* Cortado's own convolution kernels: implicit GEMM for 2-D NCHW
 * convolutions with group 1, in strict FP32 (conv_igemm.cu, and
 * conv_igemm_fp32p.cu through a cp.async pipeline) and on TF32 tensor
 * cores (conv_igemm_tf32.cu), and Winograd F(2x2, 5x5) in strict FP32 for
 * 5x5 stride-1 forward and backward data (conv_winograd.cu), the
 * candidates that the algorithm
 * search (ct_cudnn_conv_find) races against cuDNN per direction.  They
 * exist for the small convolutions where cuDNN is slow: cifar10_quick's
 * 5x5 layers at 3 to 64 channels, where cuDNN's best choices
 * (IMPLICIT_GEMM, ALGO_0, FFT_TILING) run at 5-15 TFLOP/s, and are its
 * FP32 kernels even where TF32 is allowed.
 *
 * The three directions as GEMMs, with n = (image, output position) and
 * k = (input channel, ky, kx):
 *   forward        Y[m, n]  = sum_k W[m, k] X[k, n] (+ bias[m], then ReLU)
 *   backward data  dX[c, n'] = sum_k' W^T[c, k'] dY[k', n'] (stride 1 only),
 *                  k' = (output channel, ky, kx), n' = (image, input position)
 *   backward filter dW[m, k] += sum_n dY[m, n] X[k, n]
 * where X[k, n] (and dY[k', n']) are read in place through a per-k table of
 * offsets: no im2col buffer.  The filter gradient splits the sum over n
 * among blocks into a scratch of partial sums, then adds them into dW in a
 * fixed order: deterministic, like every kernel here.
 *
 * Tile shapes: a few configurations per direction, chosen by timing them
 * (ct_igemm_time) beside cuDNN's algorithms.  The TF32 configurations
 * round both operands to TF32 (10-bit mantissas, as cuDNN's tensor-op
 * math) and sum in FP32; they run only for plans made with TF32 allowed
 * (the context's --math=tf32), never for a strict FP32 one. */
#ifndef CT_LAYERS_CONV_IGEMM_H
#define CT_LAYERS_CONV_IGEMM_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The directions, as the algorithm table numbers them. */
typedef enum { CT_IGEMM_FWD = 0, CT_IGEMM_BWD_DATA = 1, CT_IGEMM_BWD_FILTER = 2 } ct_igemm_dir;

/* Tile configurations of forward and backward data, and of backward
 * filter: the strict FP32 register-prefetch ones first, then the TF32 ones,
 * then the strict FP32 pipelined ones, then the Winograd ones (forward and
 * backward data) and the direct forward ones, or the direct ones (backward
 * filter); each family after the earlier ones, so that those
 * keep their numbers in saved algorithm tables.  A choice is 1 + the
 * configuration's index (0: cuDNN). */
#define CT_IGEMM_GEMM_FP32_CONFIGS 8
#define CT_IGEMM_GEMM_TF32_CONFIGS 10
#define CT_IGEMM_GEMM_PIPE_CONFIGS 8
#define CT_IGEMM_GEMM_WINO_CONFIGS 5
#define CT_IGEMM_GEMM_FDIRECT_CONFIGS 3
#define CT_IGEMM_GEMM_CONFIGS                                                          \
  (CT_IGEMM_GEMM_FP32_CONFIGS + CT_IGEMM_GEMM_TF32_CONFIGS + CT_IGEMM_GEMM_PIPE_CONFIGS + \
   CT_IGEMM_GEMM_WINO_CONFIGS + CT_IGEMM_GEMM_FDIRECT_CONFIGS)
#define CT_IGEMM_WGRAD_FP32_CONFIGS 4
#define CT_IGEMM_WGRAD_TF32_CONFIGS 6
#define CT_IGEMM_WGRAD_PIPE_CONFIGS 6
#define CT_IGEMM_WGRAD_DIRECT_CONFIGS 4
#define CT_IGEMM_WGRAD_CONFIGS                                                            \
  (CT_IGEMM_WGRAD_FP32_CONFIGS + CT_IGEMM_WGRAD_TF32_CONFIGS + CT_IGEMM_WGRAD_PIPE_CONFIGS + \
   CT_IGEMM_WGRAD_DIRECT_CONFIGS)

/* A choice's name for logs and tables, in buf: "IGEMM_32x64x4" (tile rows,
 * columns, thread groups) for forward and backward data, "IGEMM_32x64"
 * for backward filter, "IGEMM_TF32_32x64x1" (rows, columns, warp groups;
 * "w64" after it for warps 64 columns wide instead of 32) for the TF32 ones
 * of any direction, "IGEMM_PIPE_32x64x4" (rows, columns, thread groups;
 * "t4" after it for threads of 4 x 8 outputs instead of 8 x 8) for the
 * pipelined FP32 ones of any direction, "IGEMM_WINO_16x32_8x8c8" (2x2
 * tiles x output channels per block, tiles x channels per thread, input
 * channels per step) for the Winograd ones, "IGEMM_DIRECT5_16x2_4x16r16"
 * (filter width, lanes along a row x output channels per thread, input x
 * output channels per block, rows per unit) for the direct filter-gradient
 * ones, "IGEMM_FDIRECT5_r4" (output rows per block) for the direct forward
 * ones, "?" out of range.  Every name of a
 * direction is its own.  Returns buf. */
const char *ct_igemm_choice_name(ct_igemm_dir dir, int choice, char *buf, size_t len);
/* Whether choice (1-based) of direction dir is a TF32 configuration (false
 * for 0 and out of range). */
bool ct_igemm_choice_tf32(ct_igemm_dir dir, int choice);

/* Whether the algorithm search races these kernels against cuDNN:
 * CT_IGEMM_OFF leaves cuDNN alone; CT_IGEMM_RACE (the default) times both
 * per direction and keeps the faster; CT_IGEMM_FORCE runs these kernels
 * wherever they can (tests).  On an H100, with each net's algorithms fixed
 * by an algorithm file: cifar10_quick 0.484 -> 0.377 ms per iteration in
 * tf32 (the TF32 kernels win every direction but conv1's data gradient,
 * which the net does not run) and 0.512 -> 0.509 in fp32; LeNet 0.196 ->
 * 0.153 (tf32) and 0.209 -> 0.168 ms (fp32).  (In session 9, before the
 * pipelined kernels, LeNet's FP32 race picked kernels that won alone and
 * lost in the iteration, 0.220 -> 0.240 ms on an H200, and the race was
 * off by default.)  With the Winograd kernels (session 11) the strict-FP32
 * race runs them for cifar10_quick's conv2 and conv3 forward and backward
 * data.  CORTADO_OWN_CONV=0|1|force in the environment sets the
 * mode; ct_igemm_set_mode overrides it for layers reshaped afterwards (not
 * thread-safe: set it before building layers). */
typedef enum { CT_IGEMM_OFF = 0, CT_IGEMM_RACE = 1, CT_IGEMM_FORCE = 2 } ct_igemm_mode_t;
ct_igemm_mode_t ct_igemm_mode(void);
void ct_igemm_set_mode(ct_igemm_mode_t mode);

/* A 2-D convolution: X (n, c, h, w) -> Y (n, m, oh, ow), W (m, c, kh, kw). */
typedef struct ct_igemm_geom {
  int n, c, h, w;
  int m, oh, ow;
  int kh, kw, sh, sw, ph, pw, dh, dw;
} ct_igemm_geom;

/* A plan: the geometry and its device offset tables. */
typedef struct ct_igemm ct_igemm;

/* Why the kernels cannot run direction dir of g, or NULL: every tensor,
 * the filter and the padded image must hold at most 2^30 values, and
 * backward data needs stride 1. */
const char *ct_igemm_unsupported(const ct_igemm_geom *g, ct_igemm_dir dir);

/* A plan for g on ctx's device (small device tables, allocated here).  g
 * must be supported in the forward direction.  tf32 allows the TF32
 * configurations (pass ctx->tf32 as the layer read it at reshape): a
 * strict plan never times or runs them. */
ct_igemm *ct_igemm_new(ct_context *ctx, const ct_igemm_geom *g, bool tf32);
void ct_igemm_free(ct_igemm *p);

/* Whether configuration `choice` (1-based) can run direction dir of p's
 * geometry: the direction is supported, the math allows the choice (a
 * TF32 one only on a TF32 plan), and a Winograd one has its 5x5 stride-1
 * convolution. */
bool ct_igemm_choice_runs(const ct_igemm *p, ct_igemm_dir dir, int choice);

/* Workspace bytes of direction dir with configuration `choice` (1-based):
 * the partial sums of backward filter (split by the plan's device's
 * multiprocessor count), the transformed filters of a Winograd one, 0 for
 * the others. */
size_t ct_igemm_workspace(const ct_igemm *p, ct_igemm_dir dir, int choice);

/* Bytes of the work of direction dir with configuration `choice` that
 * depends on the weights only and that ct_igemm_prepare can do ahead of the
 * call (a Winograd configuration's transformed filters); 0 when it has
 * none. */
size_t ct_igemm_prepared_bytes(const ct_igemm *p, ct_igemm_dir dir, int choice);
/* That work for weights w into prep (ct_igemm_prepared_bytes of them),
 * asynchronous on ctx's stream: a call of the same direction and choice
 * given prep skips it (and does not read w), so that it may run on another
 * stream, beside the layers below (conv_cudnn.cu). */
void ct_igemm_prepare(ct_context *ctx, const ct_igemm *p, ct_igemm_dir dir, int choice,
                      const float *w, float *prep);

/* y = conv(x, w) (+ bias when bias is not NULL, then max(., 0) when relu),
 * overwriting y.  Asynchronous on ctx's stream.  prep: NULL, or
 * ct_igemm_prepare's output for w and this choice when it has one.  Here
 * and below, choice must be a configuration that can run the direction
 * (ct_igemm_choice_runs), and ws must hold at least
 * ct_igemm_workspace(p, dir, choice) bytes: anything else is a bug
 * (CT_ASSERT). */
void ct_igemm_forward(ct_context *ctx, const ct_igemm *p, int choice, const float *x,
                      const float *w, const float *prep, const float *bias, bool relu, float *ws,
                      size_t ws_bytes, float *y);
/* dx = conv^T(dy, w), overwriting dx (stride 1 only); prep as above. */
void ct_igemm_backward_data(ct_context *ctx, const ct_igemm *p, int choice, const float *dy,
                            const float *w, const float *prep, float *ws, size_t ws_bytes,
                            float *dx);
/* dw += the weight gradient for x and dy; ws holds at least
 * ct_igemm_workspace(p, CT_IGEMM_BWD_FILTER, choice) bytes. */
void ct_igemm_backward_filter(ct_context *ctx, const ct_igemm *p, int choice, const float *x,
                              const float *dy, float *ws, size_t ws_bytes, float *dw);

/* Times direction dir on the given device buffers (x and y of the
 * geometry's sizes, w the filter's, ws of ws_bytes; their contents are
 * overwritten), every configuration that can run it and whose workspace
 * fits: writes the fastest one's choice (1-based) and its
 * milliseconds per call.  A configuration with weight-only work
 * (ct_igemm_prepared_bytes) is timed without it, as a net runs it.  False
 * (nothing written) when dir is unsupported or no configuration fits.
 * Synchronises ctx's stream. */
bool ct_igemm_time(ct_context *ctx, const ct_igemm *p, ct_igemm_dir dir, float *x, float *w,
                   float *y, float *ws, size_t ws_bytes, int *choice, float *ms);
/* The same, writing each configuration's milliseconds per call to
 * ms[choice - 1] (CT_IGEMM_GEMM_CONFIGS or CT_IGEMM_WGRAD_CONFIGS values),
 * -1 for those not timed (one that cannot run, or too much workspace).  For benchmarks. */
void ct_igemm_time_each(ct_context *ctx, const ct_igemm *p, ct_igemm_dir dir, float *x, float *w,
                        float *y, float *ws, size_t ws_bytes, float *ms);

#ifdef __cplusplus
}
#endif

#endif
