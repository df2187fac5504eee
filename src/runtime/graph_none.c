/* CPU-only builds: no CUDA graphs (the program never asks for them there). */
#ifndef CORTADO_HAVE_CUDA
#include "runtime/graph.h"

ct_status ct_graph_capture_begin(ct_context *ctx, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "CUDA graphs need a CUDA build");
}
ct_status ct_graph_capture_end(ct_context *ctx, ct_graph **out, ct_error *err) {
  *out = NULL;
  return ct_error_set(err, CT_ERR_UNSUPPORTED, "CUDA graphs need a CUDA build");
}
void ct_graph_capture_abandon(ct_context *ctx) {}
void ct_graph_launch(ct_context *ctx, ct_graph *g) {
  ct_abort(__FILE__, __LINE__, "CUDA graph launch in a CPU-only build");
}
size_t ct_graph_nodes(const ct_graph *g) { return 0; }
void ct_graph_free(ct_graph *g) {}
#endif
