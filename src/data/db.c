/* The back-end independent half of ct_db: buffered puts, the key index,
 * readers and cursors, and the path in every message. */
#include "data/db.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/log.h"
#include "data/db_internal.h"

ct_status ct_db_parse_backend(const char *name, ct_db_backend *out, ct_error *err) {
  if (name && strcasecmp(name, "lmdb") == 0) {
    *out = CT_DB_LMDB;
    return CT_OK;
  }
  if (name && strcasecmp(name, "leveldb") == 0) {
    *out = CT_DB_LEVELDB;
    return CT_OK;
  }
  return ct_error_set(err, CT_ERR_INVALID, "unknown DB backend '%s' (expected lmdb or leveldb)",
                      name ? name : "");
}

const char *ct_db_backend_name(ct_db_backend backend) {
  return backend == CT_DB_LMDB ? "lmdb" : "leveldb";
}

static const char *display_name(ct_db_backend backend) {
  return backend == CT_DB_LMDB ? "LMDB" : "LevelDB";
}

void ct_db_index_add(ct_db *db, const void *key, size_t klen) {
  if (db->count + 2 > db->key_cap) {
    db->key_cap = db->key_cap ? 2 * db->key_cap : 1024;
    db->key_off = ct_xrealloc(db->key_off, db->key_cap * sizeof *db->key_off);
  }
  /* allocated with the first key, even an empty one (ct_db_key offsets into it) */
  if (!db->key_bytes || db->key_bytes_len + klen > db->key_bytes_cap) {
    size_t cap = db->key_bytes_cap ? 2 * db->key_bytes_cap : 16384;
    while (cap < db->key_bytes_len + klen) cap *= 2;
    db->key_bytes = ct_xrealloc(db->key_bytes, cap);
    db->key_bytes_cap = cap;
  }
  if (db->count == 0) db->key_off[0] = 0;
  memcpy(db->key_bytes + db->key_bytes_len, key, klen);
  db->key_bytes_len += klen;
  db->count++;
  db->key_off[db->count] = db->key_bytes_len;
}

static bool has_file(const char *dir, const char *name) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* A folder to read that holds no database of the backend's kind: what it
 * holds instead (the other kind, nothing, other files). */
static ct_status not_a_database(const char *path, ct_db_backend backend, ct_error *err) {
  const bool lmdb = backend == CT_DB_LMDB;
  const char *marker = lmdb ? "data.mdb" : "CURRENT";
  if (has_file(path, marker)) return CT_OK;
  char what[160] = "";
  DIR *d = opendir(path);
  bool empty = true;
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = false;
  if (d) closedir(d);
  if (has_file(path, lmdb ? "CURRENT" : "data.mdb"))
    snprintf(what, sizeof what, "; it holds %s database: give --backend=%s", lmdb ? "a LevelDB" : "an LMDB",
             lmdb ? "leveldb" : "lmdb");
  else if (empty)
    snprintf(what, sizeof what, "; the folder is empty");
  return ct_error_set(err, CT_ERR_IO, "a folder, but not %s database (no %s in it)%s",
                      lmdb ? "an LMDB" : "a LevelDB", marker, what);
}

ct_status ct_db_open(ct_db **out, const char *path, ct_db_backend backend, ct_db_mode mode,
                     ct_error *err) {
  *out = NULL;
  CT_ASSERT(backend == CT_DB_LMDB || backend == CT_DB_LEVELDB);
  ct_db *db = ct_xcalloc(1, sizeof *db);
  db->path = ct_xstrdup(path);
  db->backend = backend;
  db->mode = mode;
  db->batch = CT_DB_DEFAULT_BATCH;
  const char *what = mode == CT_DB_NEW ? "create" : "open";
  const char *suffix = mode == CT_DB_READ ? " for reading" : mode == CT_DB_WRITE ? " for writing" : "";
  struct stat st;
  ct_status s = CT_OK;
  if (mode == CT_DB_READ && stat(path, &st) != 0) {
    s = ct_error_set(err, errno == ENOENT ? CT_ERR_NOTFOUND : CT_ERR_IO, "%s", strerror(errno));
  } else if (mode == CT_DB_NEW && stat(path, &st) == 0) {
    s = ct_error_set(err, CT_ERR_INVALID, "the path already exists");
  } else if (mode == CT_DB_READ && !S_ISDIR(st.st_mode)) {
    s = ct_error_set(err, CT_ERR_IO, "not a folder (%s databases are folders)",
                     display_name(backend));
  } else {
    if (mode == CT_DB_READ) s = not_a_database(path, backend, err);
    if (s == CT_OK) s = backend == CT_DB_LMDB ? ct_db_lmdb_open(db, err) : ct_db_leveldb_open(db, err);
  }
  if (s != CT_OK) {
    ct_error_prefix(err, "%s: cannot %s %s%s", db->path, what, display_name(backend), suffix);
    free(db->path);
    free(db->key_bytes);
    free(db->key_off);
    free(db);
    return s;
  }
  *out = db;
  return CT_OK;
}

static void drop_pending(ct_db *db) {
  for (size_t i = 0; i < db->npending; i++) {
    free(db->pending[i].key);
    free(db->pending[i].val);
  }
  db->npending = 0;
}

void ct_db_close(ct_db *db) {
  if (!db) return;
  if (db->npending)
    LOG_WARNING("%s: closing with %zu uncommitted records (they are dropped; call ct_db_commit)",
                db->path, db->npending);
  drop_pending(db);
  free(db->pending);
  if (db->backend == CT_DB_LMDB)
    ct_db_lmdb_close(db);
  else
    ct_db_leveldb_close(db);
  free(db->key_bytes);
  free(db->key_off);
  free(db->path);
  free(db);
}

const char *ct_db_path(const ct_db *db) { return db->path; }
/* ---------------------------------------------------------------- writing */
void ct_db_set_batch(ct_db *db, size_t batch) { db->batch = batch ? batch : 1; }

ct_status ct_db_put(ct_db *db, const void *key, size_t klen, const void *val, size_t vlen,
                    ct_error *err) {
  if (db->mode == CT_DB_READ)
    return ct_error_set(err, CT_ERR_INVALID, "%s: put on a database opened for reading", db->path);
  if (klen == 0) return ct_error_set(err, CT_ERR_INVALID, "%s: put with an empty key", db->path);
  if (db->backend == CT_DB_LMDB && klen > 511)
    return ct_error_set(err, CT_ERR_INVALID, "%s: key of %zu bytes is longer than LMDB's 511",
                        db->path, klen);
  if (db->npending == db->cap_pending) {
    db->cap_pending = db->cap_pending ? 2 * db->cap_pending : 256;
    db->pending = ct_xrealloc(db->pending, db->cap_pending * sizeof *db->pending);
  }
  ct_db_pending *p = &db->pending[db->npending++];
  p->key = ct_xcalloc(1, klen);
  memcpy(p->key, key, klen);
  p->val = ct_xcalloc(1, vlen ? vlen : 1);
  if (vlen) memcpy(p->val, val, vlen);
  p->klen = klen;
  p->vlen = vlen;
  if (db->npending >= db->batch) return ct_db_commit(db, err);
  return CT_OK;
}

ct_status ct_db_commit(ct_db *db, ct_error *err) {
  if (db->mode == CT_DB_READ)
    return ct_error_set(err, CT_ERR_INVALID, "%s: commit on a database opened for reading",
                        db->path);
  if (db->npending == 0) return CT_OK;
  size_t n = db->npending;
  ct_status s = db->backend == CT_DB_LMDB ? ct_db_lmdb_write(db, err) : ct_db_leveldb_write(db, err);
  drop_pending(db);
  if (s != CT_OK) ct_error_prefix(err, "%s: commit of %zu records failed", db->path, n);
  return s;
}

/* ---------------------------------------------------------------- reading */
size_t ct_db_count(const ct_db *db) { return db->count; }

const char *ct_db_key(const ct_db *db, size_t i, size_t *klen) {
  CT_ASSERT(i < db->count);
  *klen = db->key_off[i + 1] - db->key_off[i];
  return db->key_bytes + db->key_off[i];
}

char *ct_db_key_string(const ct_db *db, size_t i, char *buf, size_t len) {
  size_t klen;
  const char *k = ct_db_key(db, i, &klen);
  size_t o = 0;
  buf[0] = 0;
  for (size_t j = 0; j < klen && o + 5 < len; j++) {
    unsigned char ch = (unsigned char)k[j];
    if (isprint(ch))
      buf[o++] = (char)ch;
    else
      o += (size_t)snprintf(buf + o, len - o, "\\x%02x", ch);
  }
  buf[o < len ? o : len - 1] = 0;
  return buf;
}

ct_status ct_db_reader_open(ct_db *db, ct_db_reader **out, ct_error *err) {
  *out = NULL;
  ct_db_reader *r = ct_xcalloc(1, sizeof *r);
  r->db = db;
  ct_status s = db->backend == CT_DB_LMDB ? ct_db_lmdb_reader_open(db, &r->impl, err)
                                          : ct_db_leveldb_reader_open(db, &r->impl, err);
  if (s != CT_OK) {
    free(r);
    return ct_error_prefix(err, "%s: cannot start a read transaction", db->path);
  }
  *out = r;
  return CT_OK;
}

void ct_db_reader_close(ct_db_reader *r) {
  if (!r) return;
  if (r->db->backend == CT_DB_LMDB)
    ct_db_lmdb_reader_close(r->db, r->impl);
  else
    ct_db_leveldb_reader_close(r->db, r->impl);
  free(r);
}

ct_status ct_db_read_index(ct_db *db, ct_db_reader *r, size_t i, const void **val, size_t *len,
                           ct_error *err) {
  *val = NULL;
  *len = 0;
  if (i >= db->count)
    return ct_error_set(err, CT_ERR_INVALID, "%s: record index %zu out of range (%zu records)",
                        db->path, i, db->count);
  size_t klen;
  const char *key = ct_db_key(db, i, &klen);
  ct_status s = db->backend == CT_DB_LMDB ? ct_db_lmdb_get(db, r->impl, key, klen, val, len, err)
                                          : ct_db_leveldb_get(db, r->impl, key, klen, val, len, err);
  if (s != CT_OK) {
    char kbuf[128];
    ct_error_prefix(err, "%s: record %s", db->path, ct_db_key_string(db, i, kbuf, sizeof kbuf));
  }
  return s;
}

ct_status ct_db_cursor_open(ct_db *db, ct_db_cursor **out, ct_error *err) {
  *out = NULL;
  ct_db_cursor *c = ct_xcalloc(1, sizeof *c);
  c->db = db;
  ct_status s = db->backend == CT_DB_LMDB ? ct_db_lmdb_cursor_open(db, c, err)
                                          : ct_db_leveldb_cursor_open(db, c, err);
  if (s != CT_OK) {
    free(c);
    return ct_error_prefix(err, "%s: cannot open a cursor", db->path);
  }
  *out = c;
  return CT_OK;
}

void ct_db_cursor_close(ct_db_cursor *c) {
  if (!c) return;
  if (c->db->backend == CT_DB_LMDB)
    ct_db_lmdb_cursor_close(c);
  else
    ct_db_leveldb_cursor_close(c);
  free(c);
}

static ct_status cursor_move(ct_db_cursor *c, bool first, ct_error *err) {
  ct_status s = c->db->backend == CT_DB_LMDB ? ct_db_lmdb_cursor_move(c, first, err)
                                             : ct_db_leveldb_cursor_move(c, first, err);
  if (s != CT_OK) {
    c->valid = false;
    ct_error_prefix(err, "%s: cursor", c->db->path);
  }
  return s;
}

ct_status ct_db_cursor_first(ct_db_cursor *c, ct_error *err) { return cursor_move(c, true, err); }
ct_status ct_db_cursor_next(ct_db_cursor *c, ct_error *err) {
  if (!c->valid) return CT_OK;
  return cursor_move(c, false, err);
}
bool ct_db_cursor_valid(const ct_db_cursor *c) { return c->valid; }
const void *ct_db_cursor_key(const ct_db_cursor *c, size_t *klen) {
  CT_ASSERT(c->valid);
  *klen = c->klen;
  return c->key;
}
const void *ct_db_cursor_value(const ct_db_cursor *c, size_t *vlen) {
  CT_ASSERT(c->valid);
  *vlen = c->vlen;
  return c->val;
}
