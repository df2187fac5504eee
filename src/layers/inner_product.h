/* GPU launchers of InnerProduct (inner_product.cu), on ctx's stream. */
#ifndef CT_LAYERS_INNER_PRODUCT_H
#define CT_LAYERS_INNER_PRODUCT_H

#include "core/context.h"
#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most rows ct_ip_bias_grad_gpu takes: past it one block per column
 * (ct_conv_backend_gpu's bias_grad) spreads the rows better. */
#define CT_IP_BIAS_GRAD_MAX_ROWS 1024

/* dbias (N) += the column sums of dy (M, N) row-major (M at most
 * CT_IP_BIAS_GRAD_MAX_ROWS): one kernel, each column summed in a fixed
 * order (the same bits on every run), coalesced across columns. */
void ct_ip_bias_grad_gpu(ct_context *ctx, const float *dy, int M, int N, float *dbias);

/* How many of an InnerProduct layer's three GEMMs (forward, weight
 * gradient, bottom gradient) run as cuBLASLt plans for its current shape
 * and math: 0 to 3, 0 before the first GPU reshape (for tests). */
int ct_ip_gpu_lt_products(const ct_layer *l);

#ifdef __cplusplus
}
#endif

#endif
