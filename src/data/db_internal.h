/* Shared by db.c and the back ends db_lmdb.c and db_leveldb.c. */
#ifndef CT_DATA_DB_INTERNAL_H
#define CT_DATA_DB_INTERNAL_H

#include "data/db.h"

typedef struct ct_db_pending {
  char *key, *val;
  size_t klen, vlen;
} ct_db_pending;

struct ct_db {
  char *path;
  ct_db_backend backend;
  ct_db_mode mode;
  void *impl;               /* the back end's handle */
  /* writing: puts not yet committed */
  ct_db_pending *pending;   /* (npending) */
  size_t npending, cap_pending, batch;
  /* reading: the key index, keys packed one after another in key_bytes */
  char *key_bytes;
  size_t key_bytes_len, key_bytes_cap;
  size_t *key_off;          /* (count + 1) offsets into key_bytes */
  size_t count, key_cap;
};

struct ct_db_reader {
  ct_db *db;
  void *impl;
};

struct ct_db_cursor {
  ct_db *db;
  void *impl;
  bool valid;
  const void *key, *val;
  size_t klen, vlen;
};

/* Appends a key to the index. */
void ct_db_index_add(ct_db *db, const void *key, size_t klen);

/* Each back end: open (fills db->impl; READ mode also scans the keys into the
 * index), close, write the pending puts, readers, point reads and cursors.
 * Messages do not carry the path: db.c puts it in front. */
#define CT_DB_BACKEND_DECL(name)                                                              \
  ct_status ct_db_##name##_open(ct_db *db, ct_error *err);                                   \
  void ct_db_##name##_close(ct_db *db);                                                      \
  ct_status ct_db_##name##_write(ct_db *db, ct_error *err);                                  \
  ct_status ct_db_##name##_reader_open(ct_db *db, void **impl, ct_error *err);               \
  void ct_db_##name##_reader_close(ct_db *db, void *impl);                                   \
  ct_status ct_db_##name##_get(ct_db *db, void *impl, const void *key, size_t klen,          \
                               const void **val, size_t *vlen, ct_error *err);               \
  ct_status ct_db_##name##_cursor_open(ct_db *db, ct_db_cursor *c, ct_error *err);           \
  void ct_db_##name##_cursor_close(ct_db_cursor *c);                                         \
  ct_status ct_db_##name##_cursor_move(ct_db_cursor *c, bool first, ct_error *err);
CT_DB_BACKEND_DECL(lmdb)
CT_DB_BACKEND_DECL(leveldb)
#undef CT_DB_BACKEND_DECL

#endif
