/* Shard rendezvous over a Gloo store (see shards.h). */
#include "parallel/shards.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/log.h"
#include "parallel/dp_agree.h"

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static ct_status check_opts(const ct_shard_opts *o, ct_error *err) {
  if (o->num_shards < 1)
    return ct_error_set(err, CT_ERR_INVALID, "--num_shards must be at least 1 (got %d)", o->num_shards);
  if (o->shard_id < 0 || o->shard_id >= o->num_shards)
    return ct_error_set(err, CT_ERR_INVALID, "--shard_id=%d is not in [0, %d) (--num_shards=%d)",
                        o->shard_id, o->num_shards, o->num_shards);
  if (!o->run_id || !*o->run_id) return ct_error_set(err, CT_ERR_INVALID, "shards need a --run_id");
  const int file = o->file_store_path && *o->file_store_path, redis = o->redis_host && *o->redis_host;
  if (file == redis)
    return ct_error_set(err, CT_ERR_INVALID,
                        "shards need exactly one rendezvous store: --file_store_path=DIR or "
                        "--redis_host=HOST (got %s)", file ? "both" : "neither");
  if (!(o->rendezvous_timeout_s > 0))
    return ct_error_set(err, CT_ERR_INVALID, "--rendezvous_timeout must be positive");
  return CT_OK;
}

/* Keys of a finished run expire after this long (Redis), at least a day. */
static int expire_seconds(double timeout_s) {
  double t = 2.0 * timeout_s;
  return t > 86400.0 ? (int)t : 86400;
}

static ct_status open_store(ct_shard_session *s, const ct_shard_opts *o, ct_error *err) {
  if (o->file_store_path && *o->file_store_path)
    return ct_gloo_store_open_file(&s->store, o->file_store_path, o->run_id, err);
  return ct_gloo_store_open_redis(&s->store, o->redis_host, o->redis_port > 0 ? o->redis_port : 6379,
                                  o->redis_password, o->run_id, expire_seconds(o->rendezvous_timeout_s),
                                  o->rendezvous_timeout_s, err);
}

/* "shard 2" / "shards 1, 2" for the ids with missing[i] set. */
static void list_missing(const bool *missing, int n, char *buf, size_t size) {
  int count = 0;
  for (int i = 0; i < n; i++) count += missing[i];
  int len = snprintf(buf, size, "shard%s ", count == 1 ? "" : "s");
  for (int i = 0, k = 0; i < n && len < (int)size; i++)
    if (missing[i]) len += snprintf(buf + len, size - (size_t)len, "%s%d", k++ ? ", " : "", i);
}

/* Waits for the keys shard/0..N-1, polling every 50 ms. */
static ct_status wait_for_shards(ct_shard_session *s, ct_error *err) {
  const int n = s->num_shards;
  bool *missing = ct_xcalloc((size_t)n, sizeof *missing);
  const double deadline = ct_monotonic_s() + s->timeout_s;
  ct_status st = CT_OK;
  for (;;) {
    int left = 0;
    for (int i = 0; i < n && st == CT_OK; i++) {
      char key[32];
      snprintf(key, sizeof key, "shard/%d", i);
      bool present = false;
      st = ct_gloo_store_has(s->store, key, &present, err);
      missing[i] = !present;
      left += !present;
    }
    if (st != CT_OK || left == 0) break;
    if (ct_monotonic_s() >= deadline) {
      char who[256];
      list_missing(missing, n, who, sizeof who);
      st = ct_error_set(err, CT_ERR_COMM,
                        "rendezvous %s: timed out after %g s waiting for %s of %d (never started, "
                        "or started with another --run_id, --num_shards or store?)",
                        s->where, s->timeout_s, who, n);
      break;
    }
    sleep_ms(50);
  }
  free(missing);
  return st;
}

/* Reads every shard's "host=NAME gpus=G" and checks that they agree. */
static ct_status read_shards(ct_shard_session *s, ct_error *err) {
  const int n = s->num_shards;
  char (*hosts)[256] = ct_xcalloc((size_t)n, sizeof *hosts);
  ct_status st = CT_OK;
  s->hosts = 0;
  for (int i = 0; i < n && st == CT_OK; i++) {
    char key[32];
    snprintf(key, sizeof key, "shard/%d", i);
    void *data = NULL;
    size_t len = 0;
    st = ct_gloo_store_get(s->store, key, s->timeout_s, &data, &len, err);
    if (st != CT_OK) break;
    int gpus = -1;
    if (sscanf((const char *)data, "host=%255s gpus=%d", hosts[i], &gpus) != 2) {
      st = ct_error_set(err, CT_ERR_INVALID, "rendezvous %s: shard %d announced '%s', not 'host=H gpus=G'",
                        s->where, i, (const char *)data);
    } else if (gpus != s->gpus_per_shard) {
      st = ct_error_set(err, CT_ERR_INVALID,
                        "rendezvous %s: shard %d trains on %d GPU%s but shard %d on %d: every shard "
                        "must drive the same number of GPUs (0: the CPU)",
                        s->where, i, gpus, gpus == 1 ? "" : "s", s->shard_id, s->gpus_per_shard);
    } else {
      bool seen = false;
      for (int j = 0; j < i; j++) seen = seen || strcmp(hosts[j], hosts[i]) == 0;
      s->hosts += !seen;
    }
    free(data);
  }
  free(hosts);
  return st;
}

/* Publishes this shard's agreement and compares shard 0's with every
 * shard's (each shard the same way, so that all fail alike). */
static ct_status agree(ct_shard_session *s, const char *agreement, ct_error *err) {
  char key[32];
  snprintf(key, sizeof key, "agree/%d", s->shard_id);
  const size_t n = strlen(agreement);
  CT_TRY(ct_gloo_store_set(s->store, key, n ? agreement : "\n", n ? n : 1, err));
  void *first = NULL;
  size_t len = 0;
  ct_status st = ct_gloo_store_get(s->store, "agree/0", s->timeout_s, &first, &len, err);
  for (int i = 1; i < s->num_shards && st == CT_OK; i++) {
    snprintf(key, sizeof key, "agree/%d", i);
    void *other = NULL;
    st = ct_gloo_store_get(s->store, key, s->timeout_s, &other, &len, err);
    char me[32], them[32];
    snprintf(me, sizeof me, "shard 0");
    snprintf(them, sizeof them, "shard %d", i);
    if (st == CT_OK) st = ct_dp_agreement_compare(first, me, other, them, err);
    if (st != CT_OK && err && err->code == CT_ERR_INVALID)
      ct_error_prefix(err, "rendezvous %s", s->where);
    free(other);
  }
  free(first);
  return st;
}

ct_status ct_shard_join(ct_shard_session **out, const ct_shard_opts *o, int gpus_per_shard,
                        const char *agreement, ct_error *err) {
  *out = NULL;
  CT_TRY(check_opts(o, err));
  ct_shard_session *s = ct_xcalloc(1, sizeof *s);
  s->num_shards = o->num_shards;
  s->shard_id = o->shard_id;
  s->gpus_per_shard = gpus_per_shard;
  s->timeout_s = o->rendezvous_timeout_s;
  ct_status st = open_store(s, o, err);
  if (st != CT_OK) {
    ct_error_prefix(err, "rendezvous run '%s'", o->run_id);
    free(s);
    return st;
  }
  snprintf(s->where, sizeof s->where, "run '%s' (%s)", o->run_id, ct_gloo_store_name(s->store));
  char host[200] = "unknown", info[256], key[32];
  if (gethostname(host, sizeof host - 1) != 0 || !*host) snprintf(host, sizeof host, "unknown");
  for (char *p = host; *p; p++)
    if (*p == ' ') *p = '_';
  snprintf(info, sizeof info, "host=%s gpus=%d", host, gpus_per_shard);
  snprintf(key, sizeof key, "shard/%d", o->shard_id);
  LOG_INFO("Shard %d of %d joining %s; waiting up to %g s for the others", o->shard_id, o->num_shards,
           s->where, s->timeout_s);
  st = ct_gloo_store_set(s->store, key, info, strlen(info), err);
  if (st == CT_ERR_INVALID)
    ct_error_prefix(err, "rendezvous %s: this run id was used before in this store; give each run a "
                         "new --run_id", s->where);
  else if (st != CT_OK)
    ct_error_prefix(err, "rendezvous %s", s->where);
  if (st == CT_OK) st = wait_for_shards(s, err);
  if (st == CT_OK) st = read_shards(s, err);
  if (st == CT_OK && agreement) st = agree(s, agreement, err);
  if (st != CT_OK) {
    ct_shard_free(s);
    return st;
  }
  LOG_INFO("All %d shards of %s arrived (%d host%s)", s->num_shards, s->where, s->hosts,
           s->hosts == 1 ? "" : "s");
  *out = s;
  return CT_OK;
}

ct_status ct_shard_share(ct_shard_session *s, const char *key, int maker, ct_status maker_status,
                         const char *maker_msg, void *data, size_t len, ct_error *err) {
  /* the value: one status byte, then the data (ok) or the maker's message */
  if (s->shard_id == maker) {
    const char *msg = maker_msg ? maker_msg : "";
    size_t n = maker_status == CT_OK ? len : strlen(msg);
    char *buf = ct_xcalloc(n + 1, 1);
    buf[0] = maker_status == CT_OK ? 'k' : 'e';
    memcpy(buf + 1, maker_status == CT_OK ? data : (const void *)msg, n);
    ct_status st = ct_gloo_store_set(s->store, key, buf, n + 1, err);
    free(buf);
    if (st != CT_OK) return ct_error_prefix(err, "rendezvous %s: sharing '%s'", s->where, key);
    return CT_OK;
  }
  void *value = NULL;
  size_t n = 0;
  if (ct_gloo_store_get(s->store, key, s->timeout_s, &value, &n, err) != CT_OK)
    return ct_error_prefix(err, "rendezvous %s: waiting for '%s' from shard %d", s->where, key, maker);
  const char *v = value;
  ct_status st = CT_OK;
  if (n >= 1 && v[0] == 'e')
    st = ct_error_set(err, CT_ERR_COMM, "shard %d could not make '%s': %.*s", maker, key, (int)(n - 1), v + 1);
  else if (n != len + 1 || v[0] != 'k')
    st = ct_error_set(err, CT_ERR_COMM, "rendezvous %s: '%s' holds %zu bytes, expected %zu", s->where, key,
                      n, len + 1);
  else
    memcpy(data, v + 1, len);
  free(value);
  return st;
}

void ct_shard_free(ct_shard_session *s) {
  if (!s) return;
  ct_gloo_store_free(s->store);
  free(s);
}
