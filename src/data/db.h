/* Key-value databases of Caffe records: LMDB (liblmdb) and LevelDB
 * (leveldb/c.h), in the on-disk layout Caffe's tools write and read.
 *
 * One ct_db is one opened database.  It is used in one of two ways:
 *
 *  - writing (modes CT_DB_NEW, CT_DB_WRITE): ct_db_put buffers records in
 *    memory and ct_db_commit writes the buffered ones in one transaction
 *    (LMDB) or one write batch (LevelDB).  ct_db_put also commits by itself
 *    every `batch` puts (ct_db_set_batch, default CT_DB_DEFAULT_BATCH), as
 *    Caffe's convert tools do every 1000 records.  An LMDB map that fills up
 *    is doubled and the transaction retried, so no map size has to be guessed.
 *
 *  - reading (mode CT_DB_READ): ct_db_open walks the keys once (values are
 *    not read) and keeps them, in the database's sorted key order, as an
 *    index; record i is the i-th key.  ct_db_count gives the number of
 *    records; ct_db_read_index reads record i through a ct_db_reader, which
 *    holds one read transaction (LMDB) or snapshot (LevelDB).  Each thread
 *    uses its own reader; the ct_db itself is shared read-only between them.
 *    A sequential cursor (ct_db_cursor_*) reads in key order without the
 *    index, for tools such as compute_image_mean.
 *
 * Every error message starts with the database path; errors about one
 * record also name its key, e.g.
 *   "/data/mnist_train_lmdb: record 00000012: mdb_get failed: ..." */
#ifndef CT_DATA_DB_H
#define CT_DATA_DB_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The values equal caffe.DataParameter.DB (LEVELDB = 0, LMDB = 1), so a
 * data_param.backend can be cast. */
typedef enum ct_db_backend { CT_DB_LEVELDB = 0, CT_DB_LMDB = 1 } ct_db_backend;

typedef enum ct_db_mode {
  CT_DB_READ = 0,  /* an existing database, read only */
  CT_DB_WRITE = 1, /* an existing database (created when missing), puts added */
  CT_DB_NEW = 2    /* a new database; fails if the path already exists */
} ct_db_mode;

#define CT_DB_DEFAULT_BATCH 1000

typedef struct ct_db ct_db;
typedef struct ct_db_reader ct_db_reader;
typedef struct ct_db_cursor ct_db_cursor;

/* "lmdb" -> CT_DB_LMDB, "leveldb" -> CT_DB_LEVELDB (case-insensitive).
 * Errors: CT_ERR_INVALID "unknown DB backend 'X' (expected lmdb or leveldb)". */
ct_status ct_db_parse_backend(const char *name, ct_db_backend *out, ct_error *err);
/* "lmdb" or "leveldb". */
const char *ct_db_backend_name(ct_db_backend backend);

/* Opens the database at `path` (a folder for both back ends, as in Caffe).
 *
 * READ builds the key index (one pass over the keys).  NEW creates the
 * folder (LMDB) or the database (LevelDB) and fails if it exists.  On success
 * *out owns the database; close it with ct_db_close.
 * Errors (*out is NULL; messages start with the path):
 *   CT_ERR_NOTFOUND  "PATH: cannot open LMDB for reading: No such file or directory"
 *   CT_ERR_IO        "PATH: cannot open LMDB for reading: <mdb_strerror>" (or LevelDB
 *                    with LevelDB's own message, e.g. a held lock or corruption)
 *   CT_ERR_INVALID   "PATH: cannot create LMDB: the path already exists" (NEW)
 *   CT_ERR_IO        "PATH: reading the keys failed: <reason>"  (READ) */
ct_status ct_db_open(ct_db **out, const char *path, ct_db_backend backend, ct_db_mode mode,
                     ct_error *err);
/* Closes the database.  Puts that were not committed are discarded (with a
 * warning in the log).  Readers and cursors must be closed first.  NULL is a
 * no-op. */
void ct_db_close(ct_db *db);
/* The path it was opened with (owned by db). */
const char *ct_db_path(const ct_db *db);

/* ---------------------------------------------------------------- writing */
/* Puts committed automatically once `batch` are buffered (>= 1). */
void ct_db_set_batch(ct_db *db, size_t batch);
/* Buffers the record (key, value) (both copied); commits when the buffer
 * holds `batch` records.  A later put of the same key replaces the value.
 * Errors: those of ct_db_commit; CT_ERR_INVALID for an empty key, a key longer
 * than the back end allows (LMDB: 511 bytes), or a db opened for READ. */
ct_status ct_db_put(ct_db *db, const void *key, size_t klen, const void *val, size_t vlen,
                    ct_error *err);
/* Writes the buffered records durably in one transaction / write batch.
 * Errors: CT_ERR_IO "PATH: commit of N records failed: <reason>" (nothing of
 * that batch is written then; the buffer is emptied). */
ct_status ct_db_commit(ct_db *db, ct_error *err);

/* ---------------------------------------------------------------- reading */
/* Number of records (READ mode: the size of the key index, fixed at open). */
size_t ct_db_count(const ct_db *db);
/* The key of record i (0 <= i < count) and its length; owned by db.  Keys
 * are not NUL-terminated in general (Caffe's are printable digits). */
const char *ct_db_key(const ct_db *db, size_t i, size_t *klen);
/* Writes a printable form of record i's key into buf (non-printable bytes as
 * \xNN, cut to fit), for messages; returns buf. */
char *ct_db_key_string(const ct_db *db, size_t i, char *buf, size_t len);

/* A reader: one read transaction (LMDB) or snapshot (LevelDB) for one thread
 * at a time.  Errors: CT_ERR_IO "PATH: cannot start a read transaction: ...". */
ct_status ct_db_reader_open(ct_db *db, ct_db_reader **out, ct_error *err);
void ct_db_reader_close(ct_db_reader *r);
/* Reads record i (0 <= i < ct_db_count) through reader r.
 *
 * On success *val and *len hold the value; the bytes stay valid until the next
 * call on r or ct_db_reader_close (they may point into the LMDB map: do not
 * write through them).  Errors:
 *   CT_ERR_INVALID  "PATH: record index I out of range (N records)"
 *   CT_ERR_NOTFOUND "PATH: record KEY: not found (the database changed since it was opened?)"
 *   CT_ERR_IO       "PATH: record KEY: read failed: <reason>" */
ct_status ct_db_read_index(ct_db *db, ct_db_reader *r, size_t i, const void **val, size_t *len,
                           ct_error *err);

/* A sequential cursor over all records in key order (READ mode).  Usage:
 *   for (st = ct_db_cursor_first(c, err); st == CT_OK && ct_db_cursor_valid(c);
 *        st = ct_db_cursor_next(c, err)) { ... ct_db_cursor_key / _value ... }
 * Keys and values stay valid until the next move or close. */
ct_status ct_db_cursor_open(ct_db *db, ct_db_cursor **out, ct_error *err);
void ct_db_cursor_close(ct_db_cursor *c);
/* Moves to the first record (valid() is false for an empty database). */
ct_status ct_db_cursor_first(ct_db_cursor *c, ct_error *err);
/* Moves to the next record (valid() becomes false past the last). */
ct_status ct_db_cursor_next(ct_db_cursor *c, ct_error *err);
bool ct_db_cursor_valid(const ct_db_cursor *c);
const void *ct_db_cursor_key(const ct_db_cursor *c, size_t *klen);
const void *ct_db_cursor_value(const ct_db_cursor *c, size_t *vlen);

#ifdef __cplusplus
}
#endif

#endif
