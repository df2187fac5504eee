/* Damaged databases are errors naming the database, never a signal and
 * never records lost without a word.  Real LMDB and LevelDB databases are
 * written by the test, then damaged the ways disks, copies and crashes do:
 *  - LMDB: data.mdb truncated (was SIGBUS in liblmdb), a leaf page's node
 *    offsets pointing past the file (was SIGBUS inside mdb_cursor_get), a
 *    value's size grown past the file (was SIGSEGV in the Datum decoder);
 *  - LevelDB: the write-ahead log cut inside a write (10,000 records became
 *    3,000) or overwritten in its middle (records skipped). */
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fault_guard.h"
#include "core/log.h"
#include "data/db.h"
#include "testutil.h"

static int setup(void **state) {
  (void)state;
  ct_log_set_level(CT_LOG_ERROR);
  return 0;
}

/* n records "00000000".. with values of vlen bytes. */
static void write_db(const char *path, ct_db_backend b, int n, size_t vlen) {
  ct_db *db;
  ct_error err;
  assert_int_equal(ct_db_open(&db, path, b, CT_DB_NEW, &err), CT_OK);
  char *val = malloc(vlen);
  for (int k = 0; k < n; k++) {
    char key[16];
    snprintf(key, sizeof key, "%08d", k);
    memset(val, 'a' + k % 26, vlen);
    assert_int_equal(ct_db_put(db, key, 8, val, vlen, &err), CT_OK);
  }
  free(val);
  assert_int_equal(ct_db_commit(db, &err), CT_OK);
  ct_db_close(db);
}

static char *file_in(const char *dir, const char *name) {
  static char path[8][4400];
  static int slot;
  char *p = path[slot++ % 8];
  snprintf(p, 4400, "%s/%s", dir, name);
  return p;
}

static void expect_open_error(const char *path, ct_db_backend b, const char *suffix) {
  ct_db *db = NULL;
  ct_error err;
  assert_int_equal(ct_db_open(&db, path, b, CT_DB_READ, &err), CT_ERR_IO);
  assert_null(db);
  char want[9000];
  snprintf(want, sizeof want, "%s: cannot open %s for reading: %s", path,
           b == CT_DB_LMDB ? "LMDB" : "LevelDB", suffix);
  assert_string_equal(err.msg, want);
}

/* ------------------------------------------------------------------ LMDB */

static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static void put16(unsigned char *p, uint16_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}

/* The page number of data.mdb's first leaf page (flags P_LEAF, 4096-byte
 * pages; meta pages are 0 and 1). */
static long first_leaf(const unsigned char *d, size_t len) {
  for (size_t p = 2; (p + 1) * 4096 <= len; p++)
    if (get16(d + p * 4096 + 10) == 0x02) return (long)p;
  return -1;
}

static unsigned char *read_mdb(const char *dir, size_t *len) {
  char *d = tu_read_file(file_in(dir, "data.mdb"), len);
  assert_non_null(d);
  return (unsigned char *)d;
}

static void write_mdb(const char *dir, const unsigned char *d, size_t len) {
  tu_write_file(file_in(dir, "data.mdb"), (const char *)d, len);
}

static void test_lmdb_truncated(void **state) {
  (void)state;
  const char *dir = tu_tmpdir("db_damage_lmdb_trunc");
  char path[4300];
  snprintf(path, sizeof path, "%s/db", dir);
  write_db(path, CT_DB_LMDB, 200, 3000);
  size_t len;
  unsigned char *d = read_mdb(path, &len);
  assert_true(len > 100000);
  assert_int_equal(truncate(file_in(path, "data.mdb"), 100000), 0);
  char want[256];
  snprintf(want, sizeof want,
           "data.mdb is truncated: 100000 bytes, but its last page (%zu, of 4096 bytes) ends at %zu bytes",
           len / 4096 - 1, len);
  expect_open_error(path, CT_DB_LMDB, want);
  /* a meta page overwritten */
  memset(d + 4096, 0x5a, 4096);
  write_mdb(path, d, len);
  expect_open_error(path, CT_DB_LMDB,
                    "data.mdb is damaged: meta page 1 has no LMDB magic number (not an LMDB file, or "
                    "overwritten)");
  free(d);
}

/* Node 0 of the first leaf page moved to offset 0xfff8, past the end of the
 * small file but inside the map: liblmdb reads its header there. */
static void test_lmdb_node_past_the_file(void **state) {
  (void)state;
  const char *dir = tu_tmpdir("db_damage_lmdb_node");
  char path[4300];
  snprintf(path, sizeof path, "%s/db", dir);
  write_db(path, CT_DB_LMDB, 20, 100);
  size_t len;
  unsigned char *d = read_mdb(path, &len);
  long leaf = first_leaf(d, len);
  assert_true(leaf >= 2);
  assert_true((size_t)leaf * 4096 + 0xfff8 > len);
  put16(d + leaf * 4096 + 16, 0xfff8);
  write_mdb(path, d, len);
  free(d);
  expect_open_error(path, CT_DB_LMDB,
                    "the database is damaged: reading the keys: mdb_cursor_get faulted inside liblmdb "
                    "with SIGBUS (a read past the end of a mapped file); rebuild it or restore a copy");
}

/* Record 3's value size (node fields mn_lo, mn_hi) set to 0x7fff0000
 * bytes: refused when the keys are scanned at open, and, when the damage
 * comes while the database is open, when the record is read. */
static void test_lmdb_value_past_the_file(void **state) {
  (void)state;
  const char *dir = tu_tmpdir("db_damage_lmdb_value");
  char path[4300];
  snprintf(path, sizeof path, "%s/db", dir);
  write_db(path, CT_DB_LMDB, 20, 100);
  size_t len;
  unsigned char *d = read_mdb(path, &len);
  long leaf = first_leaf(d, len);
  assert_true(leaf >= 2);
  unsigned char *page = d + leaf * 4096;
  unsigned char *node = page + get16(page + 16 + 2 * 3);
  assert_int_equal(get16(node), 100); /* mn_lo: the value's size */
  const long at = (long)(node - d);
  unsigned char bad[4] = {0, 0, 0xff, 0x7f};
  ct_db *db;
  ct_error err;
  assert_int_equal(ct_db_open(&db, path, CT_DB_LMDB, CT_DB_READ, &err), CT_OK);
  assert_int_equal(ct_db_count(db), 20);
  ct_db_reader *r;
  assert_int_equal(ct_db_reader_open(db, &r, &err), CT_OK);
  int fd = open(file_in(path, "data.mdb"), O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, bad, sizeof bad, at), (ssize_t)sizeof bad);
  const void *val;
  size_t vlen;
  assert_int_equal(ct_db_read_index(db, r, 2, &val, &vlen, &err), CT_OK);
  assert_int_equal(vlen, 100);
  assert_int_equal(ct_db_read_index(db, r, 3, &val, &vlen, &err), CT_ERR_IO);
  char want[4600];
  snprintf(want, sizeof want,
           "%s: record 00000003: the database is damaged: mdb_get returned a key or value that lies "
           "outside data.mdb; rebuild it or restore a copy",
           path);
  assert_string_equal(err.msg, want);
  /* the cursor (compute_image_mean's way) says the same */
  ct_db_cursor *c;
  assert_int_equal(ct_db_cursor_open(db, &c, &err), CT_OK);
  ct_status st = ct_db_cursor_first(c, &err);
  for (int i = 0; st == CT_OK && ct_db_cursor_valid(c) && i < 30; i++) st = ct_db_cursor_next(c, &err);
  assert_int_equal(st, CT_ERR_IO);
  snprintf(want, sizeof want,
           "%s: cursor: the database is damaged: mdb_cursor_get returned a key or value that lies "
           "outside data.mdb; rebuild it or restore a copy",
           path);
  assert_string_equal(err.msg, want);
  ct_db_cursor_close(c);
  ct_db_reader_close(r);
  ct_db_close(db);
  close(fd);
  free(d);
  expect_open_error(path, CT_DB_LMDB,
                    "the database is damaged: reading the keys: mdb_cursor_get returned a key or "
                    "value that lies outside data.mdb; rebuild it or restore a copy");
}

/* The guard only catches faults inside a guarded call: a fault elsewhere
 * still ends the process (with the sanitizer's report in ASan builds). */
static void fault_now(void *arg) { *(volatile int *)arg = 1; }

static void test_fault_guard_scope(void **state) {
  (void)state;
  ct_fault_guard_arm();
  /* a page that may not be touched (not NULL: UBSan would stop first) */
  void *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(none != MAP_FAILED);
  assert_int_equal(ct_fault_guard_run(fault_now, none), SIGSEGV);
  int x = 0;
  assert_int_equal(ct_fault_guard_run(fault_now, &x), 0);
  assert_int_equal(x, 1);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* no test harness handler to chain to: the default action */
    signal(SIGSEGV, SIG_DFL);
    ct_fault_guard_arm();
    fault_now(none); /* unguarded */
    _exit(0);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
  munmap(none, 4096);
}

/* --------------------------------------------------------------- LevelDB */

/* The path of the LevelDB's one write-ahead log, into buf. */
static void leveldb_log(const char *dir, char *buf, size_t cap) {
  char cmd[4600];
  snprintf(cmd, sizeof cmd, "ls '%s'/*.log", dir);
  char *out = NULL;
  int rc = tu_run(cmd, &out);
  if (rc != 0 || !out) fail_msg("no log in %s", dir);
  snprintf(buf, cap, "%.*s", (int)strcspn(out, "\n"), out);
  free(out);
}

/* 10,000 records in the write-ahead log (LevelDB keeps them there until its
 * 256 MiB write buffer fills), the log cut at a third: LevelDB alone reads
 * 3,000 and says nothing. */
static void test_leveldb_log_cut(void **state) {
  (void)state;
  const char *dir = tu_tmpdir("db_damage_leveldb_cut");
  char path[4300];
  snprintf(path, sizeof path, "%s/db", dir);
  write_db(path, CT_DB_LEVELDB, 10000, 80);
  char log[4600];
  leveldb_log(path, log, sizeof log);
  struct stat st;
  assert_int_equal(stat(log, &st), 0);
  const off_t cut = st.st_size / 3;
  assert_int_equal(truncate(log, cut), 0);
  const char *name = strrchr(log, '/') + 1;
  ct_db *db = NULL;
  ct_error err;
  assert_int_equal(ct_db_open(&db, path, CT_DB_LEVELDB, CT_DB_READ, &err), CT_ERR_IO);
  char want[9300];
  snprintf(want, sizeof want, "%s: cannot open LevelDB for reading: the database is damaged: its "
           "write-ahead log %s is cut inside a write (", path, name);
  if (strncmp(err.msg, want, strlen(want)) != 0) fail_msg("got: %s", err.msg);
  snprintf(want, sizeof want, " of %lld bytes whole); LevelDB would drop the records from byte ",
           (long long)cut);
  assert_non_null(strstr(err.msg, want));
}

/* Bytes in the middle of the log overwritten: LevelDB skipped the records
 * of the damaged block (10,000 became 9,000); paranoid checks refuse it. */
static void test_leveldb_log_overwritten(void **state) {
  (void)state;
  const char *dir = tu_tmpdir("db_damage_leveldb_garbage");
  char path[4300];
  snprintf(path, sizeof path, "%s/db", dir);
  write_db(path, CT_DB_LEVELDB, 10000, 80);
  char log[4600];
  leveldb_log(path, log, sizeof log);
  size_t len;
  char *d = tu_read_file(log, &len);
  for (size_t i = len / 3; i < len / 3 + 2000; i++) d[i] = (char)(i * 7919 % 251);
  tu_write_file(log, d, len);
  free(d);
  expect_open_error(path, CT_DB_LEVELDB, "the database is damaged: Corruption: checksum mismatch");
  /* an undamaged copy reads all */
  snprintf(path, sizeof path, "%s/whole", dir);
  write_db(path, CT_DB_LEVELDB, 10000, 80);
  ct_db *db;
  ct_error err;
  assert_int_equal(ct_db_open(&db, path, CT_DB_LEVELDB, CT_DB_READ, &err), CT_OK);
  assert_int_equal(ct_db_count(db), 10000);
  ct_db_close(db);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lmdb_truncated),
      cmocka_unit_test(test_lmdb_node_past_the_file),
      cmocka_unit_test(test_lmdb_value_past_the_file),
      cmocka_unit_test(test_fault_guard_scope),
      cmocka_unit_test(test_leveldb_log_cut),
      cmocka_unit_test(test_leveldb_log_overwritten),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
