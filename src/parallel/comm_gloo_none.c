/* Builds without Gloo: shards and the "gloo" communicator are unsupported. */
#ifndef CORTADO_HAVE_GLOO
#include "parallel/comm_gloo.h"
#include "parallel/shards.h"

#define CT_NO_GLOO                                                                              \
  "this build of Cortado has no Gloo, which shards (--num_shards) need (install libgloo-dev " \
  "and libhiredis-dev, or run scripts/install-deps.sh, and rebuild)"

ct_status ct_comm_gloo_create(ct_comm **out, ct_gloo_store *store, int rank, int size,
                              const ct_gloo_bind *bind, double connect_timeout_s, double timeout_s,
                              ct_error *err) {
  *out = NULL;
  return ct_error_set(err, CT_ERR_UNSUPPORTED, CT_NO_GLOO);
}

const char *ct_comm_gloo_address(const ct_comm *c) { return "none"; }

ct_status ct_shard_join(ct_shard_session **out, const ct_shard_opts *o, int gpus_per_shard,
                        const char *agreement, ct_error *err) {
  *out = NULL;
  return ct_error_set(err, CT_ERR_UNSUPPORTED, CT_NO_GLOO);
}

ct_status ct_shard_share(ct_shard_session *s, const char *key, int maker, ct_status maker_status,
                         const char *maker_msg, void *data, size_t len, ct_error *err) {
  return ct_error_set(err, CT_ERR_UNSUPPORTED, CT_NO_GLOO);
}

void ct_shard_free(ct_shard_session *s) {}

const char *ct_gloo_store_name(const ct_gloo_store *s) { return "none"; }

const char *ct_gloo_version(void) { return "none"; }
#endif
