/* The "gloo" back end of ct_comm: host buffers over Gloo's TCP transport,
 * one rank per process (a Caffe2-style shard), connected through a
 * rendezvous store (gloo_shim.h).
 *
 * Every collective gives up after the communicator's timeout (Gloo's own
 * per-operation timeout, so a stopped peer cannot hang it); a dead peer
 * fails it at once (its connection closes).  Failures are CT_ERR_COMM
 * "gloo allreduce on rank 0: <Gloo's message>".
 *
 * Point to point too (send, recv, isend, irecv, probe: pipeline stages and
 * parameter servers): each message is a header (tag, length) and its floats
 * in slots of their own, so that probe can say who sent what before recv
 * takes it; one thread receives a tag at a time.  irecv posts both parts at
 * once (its count must be what the sender sends: a mismatch is named when
 * the header arrives, and the values' receive is dropped); a tag is
 * received by irecv or by recv/probe, not both. */
#ifndef CT_PARALLEL_COMM_GLOO_H
#define CT_PARALLEL_COMM_GLOO_H

#include "parallel/comm.h"
#include "parallel/gloo_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Connects rank `rank` of `size` through store (see ct_gloo_connect; store
 * stays open while the communicator is split: ct_comm_split connects
 * the groups through it): waits
 * up to connect_timeout_s for the others, then collectives time out after
 * timeout_s (<= 0: ct_comm_default_timeout()).  Free with ct_comm_free,
 * which closes the connections.  Errors: CT_ERR_COMM "gloo connect on rank
 * 1: ..."; CT_ERR_UNSUPPORTED in a build without Gloo. */
ct_status ct_comm_gloo_create(ct_comm **out, ct_gloo_store *store, int rank, int size,
                              const ct_gloo_bind *bind, double connect_timeout_s, double timeout_s,
                              ct_error *err);

/* Where the communicator listens: "127.0.0.1 (lo)" (address, interface). */
const char *ct_comm_gloo_address(const ct_comm *c);

#ifdef __cplusplus
}
#endif

#endif
