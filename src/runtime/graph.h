/* CUDA graphs as the runtime uses them: capture a context's stream into a
 * graph, instantiate it, replay it (graph.cu; graph_none.c refuses in a
 * CPU-only build).  Only the program (program.c) calls these. */
#ifndef CT_RUNTIME_GRAPH_H
#define CT_RUNTIME_GRAPH_H

#include <stddef.h>

#include "core/context.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_graph ct_graph;

/* Starts capturing ctx's stream (thread-local mode: only this thread's
 * calls are checked).  CT_ERR_DEVICE with CUDA's message on failure. */
ct_status ct_graph_capture_begin(ct_context *ctx, ct_error *err);
/* Ends the capture and instantiates the graph into *out (NULL when the
 * capture holds no work).  CT_ERR_DEVICE when the capture was invalidated
 * (an unsupported call was made while capturing) or instantiation failed. */
ct_status ct_graph_capture_end(ct_context *ctx, ct_graph **out, ct_error *err);
/* Ends a capture whose steps failed, discarding what was captured. */
void ct_graph_capture_abandon(ct_context *ctx);
/* Replays g on ctx's stream (asynchronous). */
void ct_graph_launch(ct_context *ctx, ct_graph *g);
/* Kernel, copy and other nodes in g. */
size_t ct_graph_nodes(const ct_graph *g);
void ct_graph_free(ct_graph *g);

#ifdef __cplusplus
}
#endif

#endif
