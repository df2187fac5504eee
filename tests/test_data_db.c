/* ct_db on real LMDB and LevelDB databases made under the test's scratch
 * folder: batched writes, the key index, random access by index, cursors,
 * map growth, and the errors for missing, existing and corrupt databases. */
#include <stdio.h>
#include <sys/stat.h>

#include "data/db.h"
#include "testutil.h"

static const ct_db_backend k_backends[] = {CT_DB_LMDB, CT_DB_LEVELDB};

static void write_records(const char *path, ct_db_backend b, int n, size_t batch) {
  ct_db *db;
  ct_error err;
  assert_int_equal(ct_db_open(&db, path, b, CT_DB_NEW, &err), CT_OK);
  ct_db_set_batch(db, batch);
  /* written out of key order: the index must come out sorted */
  for (int k = n - 1; k >= 0; k--) {
    char key[16], val[64];
    snprintf(key, sizeof key, "%08d", k);
    int vlen = snprintf(val, sizeof val, "value-%d", k * 7);
    assert_int_equal(ct_db_put(db, key, 8, val, (size_t)vlen, &err), CT_OK);
  }
  assert_int_equal(ct_db_commit(db, &err), CT_OK);
  ct_db_close(db);
}

static void test_db_parse_backend(void **state) {
  ct_db_backend b;
  ct_error err;
  assert_int_equal(ct_db_parse_backend("lmdb", &b, &err), CT_OK);
  assert_int_equal(b, CT_DB_LMDB);
  assert_int_equal(ct_db_parse_backend("LevelDB", &b, &err), CT_OK);
  assert_int_equal(b, CT_DB_LEVELDB);
  assert_int_equal(ct_db_parse_backend("rocksdb", &b, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "unknown DB backend 'rocksdb' (expected lmdb or leveldb)");
  assert_string_equal(ct_db_backend_name(CT_DB_LMDB), "lmdb");
  /* the enum matches caffe.DataParameter.DB */
  assert_int_equal(CT_DB_LMDB, 1);
  assert_int_equal(CT_DB_LEVELDB, 0);
}

static void test_db_round_trip_by_index_and_cursor(void **state) {
  const char *dir = tu_tmpdir("data_db_round_trip");
  for (int bi = 0; bi < 2; bi++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, ct_db_backend_name(k_backends[bi]));
    write_records(path, k_backends[bi], 25, 4);
    ct_db *db;
    ct_error err;
    assert_int_equal(ct_db_open(&db, path, k_backends[bi], CT_DB_READ, &err), CT_OK);
    assert_int_equal(ct_db_count(db), 25);
    ct_db_reader *r1, *r2;
    assert_int_equal(ct_db_reader_open(db, &r1, &err), CT_OK);
    assert_int_equal(ct_db_reader_open(db, &r2, &err), CT_OK);
    /* random order through two readers */
    for (int j = 0; j < 25; j++) {
      size_t i = (size_t)((j * 11) % 25), klen, vlen;
      const char *key = ct_db_key(db, i, &klen);
      char want_key[16], want_val[64], kbuf[64];
      snprintf(want_key, sizeof want_key, "%08zu", i);
      snprintf(want_val, sizeof want_val, "value-%zu", i * 7);
      assert_int_equal(klen, 8);
      assert_memory_equal(key, want_key, 8);
      assert_string_equal(ct_db_key_string(db, i, kbuf, sizeof kbuf), want_key);
      const void *val;
      assert_int_equal(ct_db_read_index(db, j % 2 ? r1 : r2, i, &val, &vlen, &err), CT_OK);
      assert_int_equal(vlen, strlen(want_val));
      assert_memory_equal(val, want_val, vlen);
    }
    const void *val;
    size_t vlen;
    assert_int_equal(ct_db_read_index(db, r1, 25, &val, &vlen, &err), CT_ERR_INVALID);
    char want[4400];
    snprintf(want, sizeof want, "%s: record index 25 out of range (25 records)", path);
    assert_string_equal(err.msg, want);
    ct_db_reader_close(r1);
    ct_db_reader_close(r2);

    ct_db_cursor *c;
    assert_int_equal(ct_db_cursor_open(db, &c, &err), CT_OK);
    int n = 0;
    ct_status s;
    for (s = ct_db_cursor_first(c, &err); s == CT_OK && ct_db_cursor_valid(c);
         s = ct_db_cursor_next(c, &err), n++) {
      size_t klen;
      const char *k = ct_db_cursor_key(c, &klen);
      char want_key[16];
      snprintf(want_key, sizeof want_key, "%08d", n);
      assert_memory_equal(k, want_key, 8);
      ct_db_cursor_value(c, &vlen);
      assert_true(vlen >= 7);
    }
    assert_int_equal(s, CT_OK);
    assert_int_equal(n, 25);
    ct_db_cursor_close(c);
    ct_db_close(db);
  }
}

static void test_db_write_mode_adds_and_replaces(void **state) {
  const char *dir = tu_tmpdir("data_db_write_mode");
  for (int bi = 0; bi < 2; bi++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, ct_db_backend_name(k_backends[bi]));
    write_records(path, k_backends[bi], 3, 1000);
    ct_db *db;
    ct_error err;
    assert_int_equal(ct_db_open(&db, path, k_backends[bi], CT_DB_WRITE, &err), CT_OK);
    assert_int_equal(ct_db_put(db, "00000001", 8, "new", 3, &err), CT_OK);
    assert_int_equal(ct_db_put(db, "00000009", 8, "nine", 4, &err), CT_OK);
    assert_int_equal(ct_db_commit(db, &err), CT_OK);
    /* uncommitted puts are dropped at close */
    assert_int_equal(ct_db_put(db, "00000005", 8, "lost", 4, &err), CT_OK);
    ct_db_close(db);
    assert_int_equal(ct_db_open(&db, path, k_backends[bi], CT_DB_READ, &err), CT_OK);
    assert_int_equal(ct_db_count(db), 4);
    ct_db_reader *r;
    assert_int_equal(ct_db_reader_open(db, &r, &err), CT_OK);
    const void *val;
    size_t vlen;
    assert_int_equal(ct_db_read_index(db, r, 1, &val, &vlen, &err), CT_OK);
    assert_int_equal(vlen, 3);
    assert_memory_equal(val, "new", 3);
    assert_int_equal(ct_db_read_index(db, r, 3, &val, &vlen, &err), CT_OK);
    assert_memory_equal(val, "nine", 4);
    assert_int_equal(ct_db_put(db, "x", 1, "y", 1, &err), CT_ERR_INVALID);
    ct_db_reader_close(r);
    ct_db_close(db);
  }
}

static void test_db_lmdb_map_grows(void **state) {
  const char *dir = tu_tmpdir("data_db_map_grows");
  char path[4200];
  snprintf(path, sizeof path, "%s/big_lmdb", dir);
  ct_db *db;
  ct_error err;
  assert_int_equal(ct_db_open(&db, path, CT_DB_LMDB, CT_DB_NEW, &err), CT_OK);
  ct_db_set_batch(db, 20);
  size_t vlen = (size_t)2 << 20; /* 40 x 2 MiB > the initial 64 MiB map */
  char *val = malloc(vlen);
  for (int k = 0; k < 40; k++) {
    memset(val, 'a' + k % 26, vlen);
    char key[16];
    snprintf(key, sizeof key, "%08d", k);
    assert_int_equal(ct_db_put(db, key, 8, val, vlen, &err), CT_OK);
  }
  assert_int_equal(ct_db_commit(db, &err), CT_OK);
  ct_db_close(db);
  assert_int_equal(ct_db_open(&db, path, CT_DB_LMDB, CT_DB_READ, &err), CT_OK);
  assert_int_equal(ct_db_count(db), 40);
  ct_db_reader *r;
  assert_int_equal(ct_db_reader_open(db, &r, &err), CT_OK);
  const void *v;
  size_t n;
  assert_int_equal(ct_db_read_index(db, r, 39, &v, &n, &err), CT_OK);
  assert_int_equal(n, vlen);
  assert_int_equal(((const char *)v)[vlen - 1], 'a' + 39 % 26);
  ct_db_reader_close(r);
  ct_db_close(db);
  free(val);
}

static void test_db_open_errors(void **state) {
  const char *dir = tu_tmpdir("data_db_open_errors");
  char path[4200], want[8400];
  ct_db *db;
  ct_error err;
  snprintf(path, sizeof path, "%s/missing_lmdb", dir);
  assert_int_equal(ct_db_open(&db, path, CT_DB_LMDB, CT_DB_READ, &err), CT_ERR_NOTFOUND);
  assert_null(db);
  snprintf(want, sizeof want, "%s: cannot open LMDB for reading: No such file or directory", path);
  assert_string_equal(err.msg, want);
  assert_int_equal(ct_db_open(&db, path, CT_DB_LEVELDB, CT_DB_READ, &err), CT_ERR_NOTFOUND);
  snprintf(want, sizeof want, "%s: cannot open LevelDB for reading: No such file or directory", path);
  assert_string_equal(err.msg, want);

  /* NEW refuses an existing path */
  snprintf(path, sizeof path, "%s/exists", dir);
  write_records(path, CT_DB_LMDB, 1, 10);
  assert_int_equal(ct_db_open(&db, path, CT_DB_LMDB, CT_DB_NEW, &err), CT_ERR_INVALID);
  snprintf(want, sizeof want, "%s: cannot create LMDB: the path already exists", path);
  assert_string_equal(err.msg, want);

  /* a folder whose data.mdb is not an LMDB file */
  snprintf(path, sizeof path, "%s/corrupt_lmdb", dir);
  mkdir(path, 0775);
  char file[4300];
  snprintf(file, sizeof file, "%s/data.mdb", path);
  char junk[16384];
  memset(junk, 0x5a, sizeof junk);
  tu_write_file(file, junk, sizeof junk);
  assert_int_equal(ct_db_open(&db, path, CT_DB_LMDB, CT_DB_READ, &err), CT_ERR_IO);
  snprintf(want, sizeof want,
           "%s: cannot open LMDB for reading: data.mdb is damaged: meta page 0 has no LMDB magic "
           "number (not an LMDB file, or overwritten)",
           path);
  assert_string_equal(err.msg, want);

  /* a folder that is no LevelDB */
  snprintf(path, sizeof path, "%s/empty_dir", dir);
  mkdir(path, 0775);
  assert_int_equal(ct_db_open(&db, path, CT_DB_LEVELDB, CT_DB_READ, &err), CT_ERR_IO);
  snprintf(want, sizeof want,
           "%s: cannot open LevelDB for reading: a folder, but not a LevelDB database (no CURRENT in it); "
           "the folder is empty",
           path);
  assert_string_equal(err.msg, want);

  /* a plain file */
  snprintf(path, sizeof path, "%s/plain", dir);
  tu_write_file(path, "x", 1);
  assert_int_equal(ct_db_open(&db, path, CT_DB_LMDB, CT_DB_READ, &err), CT_ERR_IO);
  snprintf(want, sizeof want, "%s: cannot open LMDB for reading: not a folder (LMDB databases are folders)",
           path);
  assert_string_equal(err.msg, want);
}

static void test_db_empty_and_bad_puts(void **state) {
  const char *dir = tu_tmpdir("data_db_bad_puts");
  for (int bi = 0; bi < 2; bi++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, ct_db_backend_name(k_backends[bi]));
    ct_db *db;
    ct_error err;
    assert_int_equal(ct_db_open(&db, path, k_backends[bi], CT_DB_NEW, &err), CT_OK);
    assert_int_equal(ct_db_put(db, "", 0, "v", 1, &err), CT_ERR_INVALID);
    char want[4400];
    snprintf(want, sizeof want, "%s: put with an empty key", path);
    assert_string_equal(err.msg, want);
    ct_db_close(db);
    assert_int_equal(ct_db_open(&db, path, k_backends[bi], CT_DB_READ, &err), CT_OK);
    assert_int_equal(ct_db_count(db), 0);
    ct_db_close(db);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_db_parse_backend),
      cmocka_unit_test(test_db_round_trip_by_index_and_cursor),
      cmocka_unit_test(test_db_write_mode_adds_and_replaces),
      cmocka_unit_test(test_db_lmdb_map_grows),
      cmocka_unit_test(test_db_open_errors),
      cmocka_unit_test(test_db_empty_and_bad_puts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
