/* CPU-only builds: the net's GPU helpers are never reached (no GPU net can
 * be built), so reaching one is a bug. */
#ifndef CORTADO_HAVE_CUDA
#include "net/net_internal.h"

void ct_net_loss_zero_gpu(ct_context *ctx, double *sum) {
  ct_abort(__FILE__, __LINE__, "GPU loss in a CPU-only build");
}
void ct_net_loss_add_gpu(ct_context *ctx, size_t n, const float *data, const float *diff,
                         double *sum) {
  ct_abort(__FILE__, __LINE__, "GPU loss in a CPU-only build");
}
#endif
