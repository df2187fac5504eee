/* Shards without MPI: N separate `cortado train` processes meeting through a
 * file store or a real Redis server (started here, with a password) train
 * as one data-parallel job with gradients through Gloo over TCP, and end
 * with the same parameters as one process with N times the batch.  The
 * rendezvous names the shards that never arrived, refuses a reused run id
 * and a wrong Redis password at once, and a failing shard ends the others. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#include "dp_fixture.h"

#define REDIS_PASSWORD "c0rtado-test"

static int g_redis_port;           /* 0: no Redis server (tests that need one skip) */
static char g_redis_dir[4200];

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A TCP port that was free a moment ago. */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    fail_msg("cannot find a free port");
  close(fd);
  return ntohs(a.sin_port);
}

static bool port_open(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  if (fd >= 0) close(fd);
  return ok;
}

/* Starts Debian's redis-server on a free port with a password, no
 * persistence, in a scratch folder; tests that need it skip without it. */
static int start_redis(void **state) {
  if (access("/usr/bin/redis-server", X_OK) != 0) {
    fprintf(stderr, "redis-server not installed: the Redis tests skip\n");
    return 0;
  }
  snprintf(g_redis_dir, sizeof g_redis_dir, "%s", tu_tmpdir("dp_gloo_redis"));
  const int port = free_port();
  char cmd[14000];
  snprintf(cmd, sizeof cmd,
           "/usr/bin/redis-server --port %d --bind 127.0.0.1 --requirepass %s --save '' "
           "--appendonly no --dir %s --daemonize yes --pidfile %s/redis.pid --logfile %s/redis.log",
           port, REDIS_PASSWORD, g_redis_dir, g_redis_dir, g_redis_dir);
  char *out = NULL;
  int rc = tu_run(cmd, &out);
  if (rc != 0) fail_msg("redis-server did not start (%d):\n%s", rc, out);
  free(out);
  for (int i = 0; i < 200 && !port_open(port); i++) usleep(25000);
  if (!port_open(port)) fail_msg("redis-server does not listen on port %d", port);
  g_redis_port = port;
  return 0;
}

static int stop_redis(void **state) {
  if (!g_redis_port) return 0;
  char path[4300];
  snprintf(path, sizeof path, "%s/redis.pid", g_redis_dir);
  char *pid = tu_read_file(path, NULL);
  if (pid && atoi(pid) > 0) kill((pid_t)atoi(pid), SIGTERM);
  free(pid);
  g_redis_port = 0;
  return 0;
}

static void need_redis(void) {
  if (!g_redis_port) skip();
}

/* Starts `cortado train --solver=solver <flags> --shard_id=K` for each K in
 * `ids` (e.g. "0 1 2") as separate processes, with stdout and stderr in
 * logdir/shardK.log; waits for all.  Returns 0 when all succeeded. */
static int run_shards(const char *ids, const char *solver, const char *flags, const char *env,
                      const char *logdir) {
  char cmd[24000];
  snprintf(cmd, sizeof cmd,
           "pids=; for k in %s; do %s %s train --solver=%s %s --shard_id=$k >%s/shard$k.log 2>&1 & "
           "pids=\"$pids $!\"; done; rc=0; for p in $pids; do wait $p || rc=1; done; exit $rc",
           ids, env ? env : "", tu_cortado_bin(), solver, flags, logdir);
  return tu_run(cmd, NULL);
}

static char *shard_log(const char *logdir, int k) {
  char path[4300];
  snprintf(path, sizeof path, "%s/shard%d.log", logdir, k);
  char *log = tu_read_file(path, NULL);
  if (!log) fail_msg("no log %s", path);
  return log;
}

static void dump_logs(const char *logdir, int n) {
  for (int k = 0; k < n; k++) {
    char path[4300];
    snprintf(path, sizeof path, "%s/shard%d.log", logdir, k);
    char *log = tu_read_file(path, NULL);
    fprintf(stderr, "---- shard %d:\n%s\n", k, log ? log : "(none)");
    free(log);
  }
}

/* n shards of batch b through `store_flags` against one process of batch
 * n*b on the same records: the parameters after 6 iterations agree up to
 * the order of the sums. */
static void check_equivalence(const char *name, int n, int b, const char *extra, const char *store_flags,
                              const char *env) {
  dpf_equiv e;
  dpf_equiv_setup(&e, name, n * b, b, extra);
  const char *base = e.base;
  char flags[9000], ids[64] = "";
  char *out = NULL;
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "%s train --solver=%s", tu_cortado_bin(), e.ref_solver);
  int rc = tu_run(cmd, &out);
  if (rc != 0) fail_msg("reference run failed (%d):\n%s", rc, out);
  free(out);
  for (int k = 0; k < n; k++) snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%d ", k);
  snprintf(flags, sizeof flags, "--num_shards=%d --run_id=%s --gloo_iface=lo --rendezvous_timeout=60 %s", n,
           name, store_flags);
  const double t0 = now_seconds();
  rc = run_shards(ids, e.dp_solver, flags, env, base);
  const double secs = now_seconds() - t0;
  if (rc != 0) {
    dump_logs(base, n);
    fail_msg("a shard failed");
  }
  char *log0 = shard_log(base, 0);
  char want[512];
  snprintf(want, sizeof want, "Data-parallel training: 1 node, %d ranks (%d shards of run '%s' (", n, n, name);
  if (!strstr(log0, want)) fail_msg("no '%s' in:\n%s", want, log0);
  assert_non_null(strstr(log0, "), CPU; transport Gloo 0.5.0 over TCP, rank 0 at 127.0.0.1 (lo)"));
  dpf_effective_batch(want, sizeof want, n, b, "workers", extra);
  if (!strstr(log0, want)) fail_msg("no '%s' in:\n%s", want, log0);
  free(log0);
  /* only shard 0 logs the iterations */
  for (int k = 1; k < n; k++) {
    char *log = shard_log(base, k);
    assert_null(strstr(log, "Iteration 1 "));
    assert_non_null(strstr(log, "Optimization Done."));
    free(log);
  }
  double err = dpf_equiv_err(&e);
  printf("%s: %d shards x batch %d vs batch %d: max rel err %.3g (shards took %.2f s)\n", name, n, b, n * b,
         err, secs);
  assert_true(err < 5e-5);
}

static void test_file_store_3_shards_equal_triple_batch(void **state) {
  char flags[4400];
  snprintf(flags, sizeof flags, "--file_store_path=%s", tu_tmpdir("dp_gloo_store3"));
  check_equivalence("dp_gloo_file3", 3, 3, NULL, flags, NULL);
}

static void test_file_store_2_shards_iter_size(void **state) {
  char flags[4400];
  snprintf(flags, sizeof flags, "--file_store_path=%s --bucket_mb=0.000244140625", tu_tmpdir("dp_gloo_store2"));
  check_equivalence("dp_gloo_file2_iter_size", 2, 3, "iter_size: 2", flags, NULL);
}

/* 8 shards (an 8-GPU machine's rank count, here on the CPU) with 256-byte
 * buckets: Gloo's ring over 8 processes with several all-reduces in flight. */
static void test_file_store_8_shards_small_buckets(void **state) {
  char flags[4400];
  snprintf(flags, sizeof flags, "--file_store_path=%s --bucket_mb=0.000244140625", tu_tmpdir("dp_gloo_store8"));
  check_equivalence("dp_gloo_file8", 8, 2, NULL, flags, NULL);
}

/* Shard 0 gives the password as a flag, the others through REDIS_PASSWORD. */
static void test_redis_3_shards_equal_triple_batch(void **state) {
  need_redis();
  char flags[256], env[128];
  snprintf(flags, sizeof flags, "--redis_host=127.0.0.1 --redis_port=%d $([ $k = 0 ] && echo --redis_password=%s)",
           g_redis_port, REDIS_PASSWORD);
  snprintf(env, sizeof env, "REDIS_PASSWORD=%s", REDIS_PASSWORD);
  check_equivalence("dp_gloo_redis3", 3, 3, NULL, flags, env);
}

/* 3 shards, shard 1 never starts: both others give up after the timeout,
 * naming it. */
static void test_redis_missing_shard_is_named(void **state) {
  need_redis();
  const char *base = tu_tmpdir("dp_gloo_missing");
  char lmdb[4200], solver[4300], flags[512];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 12, -1);
  dpf_write_solver(base, lmdb, 2, 3, 0, NULL);
  snprintf(solver, sizeof solver, "%s/solver.prototxt", base);
  snprintf(flags, sizeof flags,
           "--num_shards=3 --run_id=missing1 --redis_host=127.0.0.1 --redis_port=%d --rendezvous_timeout=2",
           g_redis_port);
  char env[128];
  snprintf(env, sizeof env, "REDIS_PASSWORD=%s", REDIS_PASSWORD);
  const double t0 = now_seconds();
  int rc = run_shards("0 2", solver, flags, env, base);
  const double secs = now_seconds() - t0;
  assert_int_not_equal(rc, 0);
  char want[256];
  snprintf(want, sizeof want,
           "cortado: error: rendezvous run 'missing1' (redis 127.0.0.1:%d): timed out after 2 s waiting for "
           "shard 1 of 3 (",
           g_redis_port);
  for (int k = 0; k <= 2; k += 2) {
    char *log = shard_log(base, k);
    if (!strstr(log, want)) fail_msg("shard %d does not name the missing shard:\n%s", k, log);
    free(log);
  }
  printf("missing shard named after %.2f s\n", secs);
  assert_true(secs < 20.0);
}

static void test_redis_wrong_password_fails_at_once(void **state) {
  need_redis();
  const char *base = tu_tmpdir("dp_gloo_wrongpass");
  char lmdb[4200], solver[4300], cmd[9000];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 12, -1);
  dpf_write_solver(base, lmdb, 2, 3, 0, NULL);
  snprintf(solver, sizeof solver, "%s/solver.prototxt", base);
  snprintf(cmd, sizeof cmd,
           "%s train --solver=%s --num_shards=2 --shard_id=0 --run_id=wp --redis_host=127.0.0.1 "
           "--redis_port=%d --redis_password=not-it --rendezvous_timeout=300",
           tu_cortado_bin(), solver, g_redis_port);
  char *out = NULL;
  const double t0 = now_seconds();
  int rc = tu_run(cmd, &out);
  const double secs = now_seconds() - t0;
  assert_int_equal(rc, 1);
  char want[256];
  snprintf(want, sizeof want,
           "cortado: error: rendezvous run 'wp': redis 127.0.0.1:%d: authentication failed: WRONGPASS",
           g_redis_port);
  if (!strstr(out, want)) fail_msg("no '%s' in:\n%s", want, out);
  free(out);
  printf("wrong password reported after %.2f s\n", secs);
  assert_true(secs < 5.0);
}

/* A run id is used once per store: a second run with it stops at once. */
static void test_file_store_refuses_a_reused_run_id(void **state) {
  const char *base = tu_tmpdir("dp_gloo_reuse");
  char lmdb[4200], solver[4300], store[4300], flags[9000];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 12, -1);
  dpf_write_solver(base, lmdb, 2, 2, 0, NULL);
  snprintf(solver, sizeof solver, "%s/solver.prototxt", base);
  snprintf(store, sizeof store, "%s/store", base);
  mkdir(store, 0755);
  snprintf(flags, sizeof flags, "--num_shards=2 --run_id=once --file_store_path=%s --gloo_iface=lo", store);
  if (run_shards("0 1", solver, flags, NULL, base) != 0) {
    dump_logs(base, 2);
    fail_msg("the first run failed");
  }
  assert_int_not_equal(run_shards("0", solver, flags, NULL, base), 0);
  char *log = shard_log(base, 0);
  char want[9000];
  snprintf(want, sizeof want,
           "cortado: error: rendezvous run 'once' (file store %s): this run id was used before in this "
           "store; give each run a new --run_id: file store %s: key 'once/shard/0' is already set",
           store, store);
  if (!strstr(log, want)) fail_msg("no '%s' in:\n%s", want, log);
  free(log);
}

/* Shard 1 reads record 5 (label out of range) at iteration 1: it fails
 * naming the cause, and shard 0 fails at once through Gloo (the dead
 * shard's connection closes). */
static void test_failing_shard_ends_the_others(void **state) {
  const char *base = tu_tmpdir("dp_gloo_fail");
  char lmdb[4200], dir[4200], solver[4300], store[4300], flags[9000];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 20, 5);
  snprintf(dir, sizeof dir, "%s/run", base);
  mkdir(dir, 0755);
  dpf_write_solver(dir, lmdb, 2, 50, 1, NULL);
  snprintf(solver, sizeof solver, "%s/solver.prototxt", dir);
  snprintf(store, sizeof store, "%s/store", base);
  mkdir(store, 0755);
  snprintf(flags, sizeof flags, "--num_shards=2 --run_id=fail --file_store_path=%s --gloo_iface=lo", store);
  const double t0 = now_seconds();
  int rc = run_shards("0 1", solver, flags, NULL, base);
  const double secs = now_seconds() - t0;
  assert_int_not_equal(rc, 0);
  char *log1 = shard_log(base, 1), *log0 = shard_log(base, 0);
  if (!strstr(log1, "cortado: error: shard 1 of 2: worker 1 (CPU) failed at iteration 1: layer 'loss' "
                    "(SoftmaxWithLoss): label 7 at index 0 is out of range [0, 3)\n"))
    fail_msg("shard 1 does not name its failure:\n%s", log1);
  if (!strstr(log0, "cortado: error: shard 0 of 2: worker 0 (CPU) failed at iteration 1: gloo allreduce") ||
      !strstr(log0, "on rank 0: "))
    fail_msg("shard 0 does not name the failed collective:\n%s", log0);
  printf("failing shard: both ended after %.2f s\n", secs);
  free(log0);
  free(log1);
  assert_true(secs < 60.0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_store_3_shards_equal_triple_batch),
      cmocka_unit_test(test_file_store_2_shards_iter_size),
      cmocka_unit_test(test_file_store_8_shards_small_buckets),
      cmocka_unit_test(test_redis_3_shards_equal_triple_batch),
      cmocka_unit_test(test_redis_missing_shard_is_named),
      cmocka_unit_test(test_redis_wrong_password_fails_at_once),
      cmocka_unit_test(test_file_store_refuses_a_reused_run_id),
      cmocka_unit_test(test_failing_shard_ends_the_others),
  };
  return cmocka_run_group_tests(tests, start_redis, stop_redis);
}
