/* Helpers shared by the net's source files; not part of the public API. */
#ifndef CT_NET_NET_INTERNAL_H
#define CT_NET_NET_INTERNAL_H

#include <stddef.h>

#include "caffe.pb-c.h"
#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A deep copy (through pack and unpack), freed with protobuf_c_message_free_unpacked. */
Caffe__NetParameter *ct_net_param_clone(const Caffe__NetParameter *p);

/* net_gpu.cu (abort in a CPU-only build; only called for GPU nets), all
 * enqueued on ctx's stream: */
/* *sum = 0 */
void ct_net_loss_zero_gpu(ct_context *ctx, double *sum);
/* *sum += dot(data, diff) over n values, in double, in a fixed order. */
void ct_net_loss_add_gpu(ct_context *ctx, size_t n, const float *data, const float *diff,
                         double *sum);

#ifdef __cplusplus
}
#endif

#endif
