/* InnerProduct's GPU side, for tests. */
#ifndef CT_LAYERS_INNER_PRODUCT_H
#define CT_LAYERS_INNER_PRODUCT_H

#include "core/context.h"
#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How many of an InnerProduct layer's three GEMMs (forward, weight
 * gradient, bottom gradient) run as cuBLASLt plans for its current shape
 * and math: 0 to 3, 0 before the first GPU reshape (for tests). */
int ct_ip_gpu_lt_products(const ct_layer *l);

#ifdef __cplusplus
}
#endif

#endif
