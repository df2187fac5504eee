/* The C face of the C++ Gloo library: rendezvous stores and a TCP context
 * with the three collectives the "gloo" communicator needs.  Only what
 * Cortado uses, as plain functions over opaque handles; every Gloo exception
 * becomes a ct_status with the exception's text in err.  One kind cannot:
 * an exception in Gloo's own network thread (a peer that sends what this
 * rank does not expect) ends the process through ct_fatal (status 1, the
 * exception's text) instead of std::terminate's abort.  Built only with
 * Gloo (CORTADO_HAVE_GLOO); comm_gloo_none.c answers CT_ERR_UNSUPPORTED
 * otherwise.
 *
 * Stores: a folder shared by every shard (gloo::rendezvous::FileStore, e.g.
 * on NFS) or a Redis server (our own store over hiredis: AUTH first, and
 * every key expires), each seen through gloo::rendezvous::PrefixStore with
 * the run id, so that runs sharing a folder or a server never read each
 * other's keys.  A store handle is used by one thread at a time. */
#ifndef CT_PARALLEL_GLOO_SHIM_H
#define CT_PARALLEL_GLOO_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_gloo_store ct_gloo_store;
typedef struct ct_gloo_context ct_gloo_context;

/* Opens the folder `dir` (which must exist) as the store of run `run_id`.
 * Errors: CT_ERR_IO "file store /x: realpath: No such file or directory". */
ct_status ct_gloo_store_open_file(ct_gloo_store **out, const char *dir, const char *run_id,
                                  ct_error *err);

/* Connects to Redis at host:port (within timeout_s), authenticates with
 * `password` when it is not NULL or empty, and opens the keys of run
 * `run_id`; every key it sets expires after expire_s seconds.  Replies wait
 * at most timeout_s.  Errors (CT_ERR_COMM): "redis 127.0.0.1:6380: cannot
 * connect: Connection refused", "redis 127.0.0.1:6380: authentication
 * failed: WRONGPASS ...". */
ct_status ct_gloo_store_open_redis(ct_gloo_store **out, const char *host, int port,
                                   const char *password, const char *run_id, int expire_s,
                                   double timeout_s, ct_error *err);

void ct_gloo_store_free(ct_gloo_store *s);

/* "file store /x" or "redis 127.0.0.1:6380" (owned by s). */
const char *ct_gloo_store_name(const ct_gloo_store *s);

/* Sets key (under the run's prefix) to len bytes (len >= 1).  A key is set
 * once: CT_ERR_INVALID "key 'shard/1' is already set" when a run with the
 * same id has written it already.  Other failures: CT_ERR_IO / CT_ERR_COMM
 * with the store's message. */
ct_status ct_gloo_store_set(ct_gloo_store *s, const char *key, const void *data, size_t len,
                            ct_error *err);

/* *present = whether key is set now (does not wait). */
ct_status ct_gloo_store_has(ct_gloo_store *s, const char *key, bool *present, ct_error *err);

/* Waits up to timeout_s for key, then returns its value in *data (malloc'd,
 * with a NUL after the *len bytes; the caller frees it).  CT_ERR_COMM
 * "... not set after 5 s" on timeout. */
ct_status ct_gloo_store_get(ct_gloo_store *s, const char *key, double timeout_s, void **data,
                            size_t *len, ct_error *err);

/* Where the TCP transport listens: a network interface (iface, e.g. "eth0")
 * or a host name / address (host); both NULL or empty: this machine's host
 * name. */
typedef struct ct_gloo_bind {
  const char *iface;
  const char *host;
} ct_gloo_bind;

/* Joins the full mesh of `size` ranks as `rank` over store s: each rank
 * publishes its TCP address in the store and connects to every other,
 * waiting up to connect_timeout_s.  Collectives then give up after
 * op_timeout_s.  Errors: CT_ERR_COMM with Gloo's
 * message. */
ct_status ct_gloo_connect(ct_gloo_context **out, ct_gloo_store *s, int rank, int size,
                          const ct_gloo_bind *bind, double connect_timeout_s, double op_timeout_s,
                          ct_error *err);

/* A mesh of some of parent's processes (a communicator split): `size` of
 * them, this one as `rank`, meeting through the keys under `prefix` of the
 * run in s (a prefix no other group of the run uses), on parent's TCP
 * device and with its operation timeout.  Every member calls it with the
 * same prefix and size.  Errors: as ct_gloo_connect's. */
ct_status ct_gloo_connect_group(ct_gloo_context **out, const ct_gloo_context *parent,
                                ct_gloo_store *s, const char *prefix, int rank, int size,
                                double connect_timeout_s, ct_error *err);

/* Where this rank's transport listens: "127.0.0.1 (lo)" (address, interface). */
const char *ct_gloo_context_address(const ct_gloo_context *c);

/* In place, on host memory: the sum over ranks of count floats / doubles. */
ct_status ct_gloo_allreduce_sum_f32(ct_gloo_context *c, float *buf, size_t count, ct_error *err);
ct_status ct_gloo_allreduce_sum_f64(ct_gloo_context *c, double *buf, size_t count, ct_error *err);
/* In place: buf becomes root's count floats. */
ct_status ct_gloo_broadcast_f32(ct_gloo_context *c, float *buf, size_t count, int root,
                                ct_error *err);
ct_status ct_gloo_barrier(ct_gloo_context *c, ct_error *err);

/* Point to point, host bytes, in Gloo slots of their own (no collective
 * uses them): messages from one rank to another in one slot arrive in the
 * order they were sent, and a receive must name the sent byte count.  Each
 * gives up after the context's operation timeout (CT_ERR_COMM "... Timed
 * out ...").  A send may wait until the receiver has posted its receive.
 * len 0 sends nothing. */
ct_status ct_gloo_recv(ct_gloo_context *c, void *buf, size_t len, int peer, uint64_t slot,
                       const int *cancel, ct_error *err);
/* The same from whichever other rank sends first; *peer gets it.
 * cancel (may be NULL), for both: a word that, once raised, ends the wait
 * within ~20 ms with CT_ERR_INTERRUPTED ("cancelled"), leaving the context
 * usable (a thread of the context watches it and aborts the wait, which
 * Gloo's own timeout cannot do without failing every pair; nor does a
 * receive posted after its peer's connection dropped ever end otherwise).
 * The receive stays posted: later messages in its slot land in memory the
 * context keeps for it until it is freed, not in buf. */
ct_status ct_gloo_recv_any(ct_gloo_context *c, void *buf, size_t len, uint64_t slot, int *peer,
                           const int *cancel, ct_error *err);
/* A send that returns at once: *req (NULL when len is 0) is completed and
 * freed by ct_gloo_send_wait; buf stays as it is until then. */
typedef struct ct_gloo_send_req ct_gloo_send_req;
ct_status ct_gloo_isend(ct_gloo_context *c, const void *buf, size_t len, int peer, uint64_t slot,
                        ct_gloo_send_req **req, ct_error *err);
ct_status ct_gloo_send_wait(ct_gloo_context *c, ct_gloo_send_req *req, ct_error *err);
/* A receive that returns at once: len bytes from rank peer in `slot` will
 * land in buf (left alone until ct_gloo_recv_wait); *req (NULL when len is
 * 0) is completed and freed by ct_gloo_recv_wait, which waits up to the
 * operation timeout.  Receives posted in one slot take its messages in the
 * order they were posted.  The sender must send exactly len bytes (Gloo
 * fails the connection otherwise).  Errors: CT_ERR_INVALID when a
 * cancelled receive of the slot is still posted (ct_gloo_recv). */
typedef struct ct_gloo_recv_req ct_gloo_recv_req;
ct_status ct_gloo_irecv(ct_gloo_context *c, void *buf, size_t len, int peer, uint64_t slot,
                        ct_gloo_recv_req **req, ct_error *err);
ct_status ct_gloo_recv_wait(ct_gloo_context *c, ct_gloo_recv_req *req, ct_error *err);
/* Frees req without waiting (an error path: a message still coming for it
 * lands nowhere). */
void ct_gloo_recv_free(ct_gloo_recv_req *req);

/* ct_gloo_recv_any no longer listens to rank peer. */
void ct_gloo_forget_peer(ct_gloo_context *c, int peer);

/* Closes the connections (peers blocked on this rank fail at once) and frees c. */
void ct_gloo_context_free(ct_gloo_context *c);

/* "Gloo 0.5.0" (a static string). */
const char *ct_gloo_version(void);

#ifdef __cplusplus
}
#endif

#endif
