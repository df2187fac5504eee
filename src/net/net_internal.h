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

/* net_memory.c: blob values as the net is built and run.
 *   ct_net_release_begin   before the first layer: what the NetParameter
 *                          says of the blobs' last readers;
 *   ct_net_note_values     after layer li is set up (or reshaped): records
 *                          which storage its tops' values are (and with r,
 *                          when that storage may go);
 *   ct_net_release_values  after that: frees the storages whose readers
 *                          are all set up (their blobs become shapes until
 *                          the plan gives them a place in the pool);
 *   ct_net_detach_values   before a reshape: the pooled blobs lose their
 *                          place (the layers' reshapes give them storage
 *                          of their own until the net plans again);
 *   ct_net_poison_step     at the end of a step (net.h's numbering): with
 *                          CORTADO_POOL_POISON, fills the pool ranges it
 *                          ends with NaN. */
typedef struct ct_value_release ct_value_release;
struct ct_net;
ct_value_release *ct_net_release_begin(const struct ct_net *net);
void ct_net_note_values(struct ct_net *net, ct_value_release *r, int li);
void ct_net_release_values(struct ct_net *net, ct_value_release *r, int li);
void ct_net_release_end(ct_value_release *r);
void ct_net_detach_values(struct ct_net *net);
void ct_net_poison_step(struct ct_net *net, int step);

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
