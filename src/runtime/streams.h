/* The priorities of the CUDA streams an iteration runs on, in one place
 * (streams.cu): the compute stream (the forward and the chain of bottom
 * gradients: the critical path), the gradient stream beside it (the weight
 * gradients, which should take the SMs the critical path leaves) and the
 * data-parallel communication stream (whose all-reduces should start as
 * soon as their bucket is final).  CUDA graphs keep these priorities per
 * node (graph.cu).  CORTADO_STREAM_PRIORITY=0 puts the compute stream at
 * the default priority too. */
#ifndef CT_RUNTIME_STREAMS_H
#define CT_RUNTIME_STREAMS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_stream_role {
  CT_STREAM_COMPUTE = 0, /* one step below the highest priority */
  CT_STREAM_GRADIENTS,   /* the lowest (the default) */
  CT_STREAM_COMM         /* the highest */
} ct_stream_role;

/* The priority to create a stream of the given role with on the current
 * device (0, the default, when the device reports no range). */
int ct_stream_priority(ct_stream_role role);

#ifdef __cplusplus
}
#endif

#endif
