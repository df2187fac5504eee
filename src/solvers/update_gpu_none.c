/* CPU-only builds: no GPU solver can be made, so reaching the fused kernel
 * is a bug. */
#ifndef CORTADO_HAVE_CUDA
#include "solvers/update.h"

void ct_update_fused_gpu(ct_context *ctx, const ct_update_fused *u, float *w, float *g, float *h0,
                         float *h1, const ct_update_step *step, ct_update_clip *clip,
                         double *partials, unsigned *counter) {
  ct_abort(__FILE__, __LINE__, "fused GPU update in a CPU-only build");
}
#endif
