/* Caffe2-style shards: N processes (on one or many machines) that find each
 * other without MPI, through a rendezvous store: a folder every shard can
 * see (e.g. on NFS) or a Redis server.  Each run has an id; its keys live
 * under that id, so runs sharing a store do not mix.
 *
 * Joining: shard K sets the key "shard/K" (its host name and GPU count),
 * then waits up to the rendezvous timeout for shards 0..N-1; on timeout the
 * error names the shards that never arrived.  Afterwards the store carries
 * what the shards must share (the NCCL id, Gloo's addresses).
 *
 * Built with Gloo (its FileStore, PrefixStore and TCP transport); without it
 * every function here returns CT_ERR_UNSUPPORTED. */
#ifndef CT_PARALLEL_SHARDS_H
#define CT_PARALLEL_SHARDS_H

#include <stddef.h>

#include "core/status.h"
#include "parallel/gloo_shim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a shard finds the others (the train flags of the same names). */
typedef struct ct_shard_opts {
  int num_shards;               /* N >= 1 */
  int shard_id;                 /* 0 <= K < N */
  const char *run_id;           /* non-empty; the same for every shard of a run */
  const char *file_store_path;  /* a shared folder, or NULL ... */
  const char *redis_host;       /* ... a Redis server (exactly one of the two) */
  int redis_port;               /* 0: 6379 */
  const char *redis_password;   /* NULL or "": no AUTH */
  double rendezvous_timeout_s;  /* > 0 */
  const char *gloo_iface;       /* Gloo TCP: listen on this interface's address, or */
  const char *gloo_host;        /* on this host name / address; both NULL: the host name */
} ct_shard_opts;

/* A joined run. */
typedef struct ct_shard_session {
  ct_gloo_store *store;
  int num_shards, shard_id;
  int hosts;             /* distinct host names among the shards */
  int gpus_per_shard;    /* the same on every shard (0: CPU) */
  double timeout_s;      /* the rendezvous timeout */
  char where[512];       /* "run 'r1' (file store /x)" */
} ct_shard_session;

/* Opens the store of o, announces this shard (driving gpus_per_shard GPUs,
 * 0 for the CPU) and waits for all N shards; then every shard publishes
 * `agreement` (what the shards must agree on: parallel/dp_agree.h; NULL:
 * nothing) and compares shard 0's with each shard's, so that every shard
 * fails alike, naming the first shard that differs and what differs.
 * *out is freed with ct_shard_free.  Errors: CT_ERR_INVALID for
 * inconsistent options or when the run id was used before in this store
 * ("... key 'r1/shard/0' is already set: give each run a new --run_id") or
 * when the shards disagree on the GPU count or their agreements ("shard 0
 * and shard 1 do not train alike: solver base_lr is 0.01 on shard 0 but
 * 0.02 on shard 1"); CT_ERR_COMM "rendezvous run 'r1' (file store /x):
 * timed out after 5 s waiting for shard 2 of 3 ..."; the store's own
 * errors (a wrong Redis password, an unreachable server, a missing folder),
 * prefixed "rendezvous run 'r1': ". */
ct_status ct_shard_join(ct_shard_session **out, const ct_shard_opts *o, int gpus_per_shard,
                        const char *agreement, ct_error *err);

/* Publishes len bytes under key from `maker` (that shard only, with its
 * status: when maker_status is not CT_OK the others get "shard 0 failed:
 * <maker_msg>"), and gives every other shard a copy within the rendezvous
 * timeout.  data holds len bytes in and out. */
ct_status ct_shard_share(ct_shard_session *s, const char *key, int maker, ct_status maker_status,
                         const char *maker_msg, void *data, size_t len, ct_error *err);

void ct_shard_free(ct_shard_session *s);

#ifdef __cplusplus
}
#endif

#endif
