/* Convolutions through cuDNN's graph (backend) API, for the 16-bit layers.
 *
 * cuDNN 9's legacy calls (cudnnConvolutionForward and the Find searches of
 * conv_algos.h) offer few kernels for bfloat16 and float16 on Hopper: on an
 * H200, ResNet-50's 3x3 64-channel convolution at batch 128 ran its
 * forward in 1.43 ms and its backward data in 58 ms in bfloat16 channels-last
 * (TF32: 0.57 and 0.47 ms).  The graph API reaches the engines PyTorch and
 * cuDNN's frontend use.  For each direction (forward, backward data,
 * backward filter) ct_conv_graph_plan builds a one-node operation graph of
 * the layer's tensors (values in the type, in their memory order; products
 * accumulated in float32), asks cuDNN's heuristics (mode A) for engine
 * configurations, keeps those whose execution plan finalises within the
 * workspace limit and whose numerical notes allow it (never a reduced
 * precision reduction or down-converted inputs; only deterministic engines
 * when the context asks), and times up to CT_CONV_GRAPH_TRIALS of them on
 * scratch buffers, choosing the fastest.  The choice (the index in the
 * heuristics' list) is kept in a process-wide table by geometry, so that a
 * net's repeated convolutions are timed once.
 *
 * Execution (ct_conv_graph_run) enqueues the plan on the handle's stream
 * with a variant pack of the call's pointers (made again only when they
 * change, so replays of a recording see the same work).  GPU builds only. */
#ifndef CT_LAYERS_CONV_GRAPH_H
#define CT_LAYERS_CONV_GRAPH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "core/status.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CT_CONV_GRAPH_TRIALS 6

typedef enum ct_conv_graph_dir {
  CT_CONV_GRAPH_FWD = 0,        /* y = conv(x, w) */
  CT_CONV_GRAPH_BWD_DATA = 1,   /* dx = conv^T(dy, w) */
  CT_CONV_GRAPH_BWD_FILTER = 2, /* dw = the weight gradient of x and dy */
} ct_conv_graph_dir;

/* The geometry: x (n, c, spatial...), w (k, c / group, kernel...), y (n,
 * k, out...), 2 or 3 spatial axes, values of type in layout (w: NHWC is
 * (k, kernel..., c / group)). */
typedef struct ct_conv_graph_geom {
  int nd;
  int n, c, k, group;
  int in[3], out[3], kernel[3], pad[3], stride[3], dilation[3];
  ct_dtype type;
  ct_layout layout;
} ct_conv_graph_geom;

typedef struct ct_conv_graph ct_conv_graph;

/* Plans the three directions for g on ctx's device (times the candidates:
 * allocates and synchronises).  CT_ERR_UNSUPPORTED when some direction has
 * no engine within the workspace limit; *out NULL then. */
ct_status ct_conv_graph_plan(ct_context *ctx, const ct_conv_graph_geom *g, ct_conv_graph **out,
                             ct_error *err);
/* Workspace bytes of direction dir's plan. */
size_t ct_conv_graph_workspace(const ct_conv_graph *cg, ct_conv_graph_dir dir);
/* Enqueues direction dir on ctx's stream (its cuDNN handle): a is the
 * input, b the second input, out the output (forward: x, w, y; backward
 * data: dy, w, dx; backward filter: x, dy, dw), overwriting out; ws: at
 * least ct_conv_graph_workspace bytes. */
void ct_conv_graph_run(ct_context *ctx, ct_conv_graph *cg, ct_conv_graph_dir dir, const void *a,
                       const void *b, void *out, void *ws);
/* "engine E (heuristic #I)" of direction dir into buf. */
char *ct_conv_graph_describe(const ct_conv_graph *cg, ct_conv_graph_dir dir, char *buf,
                             size_t len);
void ct_conv_graph_free(ct_conv_graph *cg);

#ifdef __cplusplus
}
#endif

#endif
