/* Host MAX and AVE pooling over the planes of (N, C, H, W), the planes
 * spread over the host's threads (core/parallel.h).  Caffe's semantics: MAX
 * keeps the first maximum of each window in (h, w) order (strict >) and its
 * index in the plane; AVE divides by the window clipped to the padded input.
 * The window tables are pooling.c's, per output row ph and column pw.
 * x, y, dy and dx are of `type`, float32 or bfloat16 (the values compared
 * and summed in float32, each output rounded once); the index planes are
 * float32. */
#ifndef CT_LAYERS_POOLING_CPU_H
#define CT_LAYERS_POOLING_CPU_H

#include "layers/pooling.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_pool_windows {
  const int *hlo, *hhi; /* (PH) input rows [hlo, hhi) of output row ph */
  const int *hext;      /* (PH) rows of the window clipped to the padded input */
  const int *wext;      /* (PW) the same for columns */
  const int *wlo, *whi; /* (PW) input columns [wlo, whi) of output column pw */
} ct_pool_windows;

/* y (N, C, PH, PW) = window maxima of x; mask (same shape) = their index
 * in the plane as float, -1 for a window with no input. */
void ct_pool_max_forward_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                             const void *x, void *y, float *mask);
/* y = window sums of x / (hext * wext). */
void ct_pool_ave_forward_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                             const void *x, void *y);
/* dx (overwritten) = every window's dy / size spread over its inputs. */
void ct_pool_ave_backward_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                              const void *dy, void *dx);
/* dx (overwritten) = sum of dy over the outputs whose idx (an index in the
 * plane, negative: none) points at each input (MAX, STOCHASTIC train). */
void ct_pool_scatter_backward_cpu(const ct_pool_geom *g, ct_dtype type, const void *dy,
                                  const float *idx, void *dx);

/* The same four over channels-last tensors (N, H, W, C): x, y, dy and dx
 * in that order, and MAX's argmax of each output value (in y's order) as
 * the GPU's typed kernels keep it, ct_pool_typed_arg_bytes(g) bytes each
 * (pooling.h; pooling_nhwc_cpu.c). */
void ct_pool_max_forward_nhwc_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                                  const void *x, void *y, void *mask);
void ct_pool_ave_forward_nhwc_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                                  const void *x, void *y);
void ct_pool_ave_backward_nhwc_cpu(const ct_pool_geom *g, const ct_pool_windows *w, ct_dtype type,
                                   const void *dy, void *dx);
void ct_pool_scatter_backward_nhwc_cpu(const ct_pool_geom *g, ct_dtype type, const void *dy,
                                       const void *idx, void *dx);

#ifdef __cplusplus
}
#endif

#endif
