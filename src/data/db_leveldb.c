/* The LevelDB back end of ct_db (leveldb/c.h), with Caffe's options: 64 KiB
 * blocks, a 256 MiB write buffer, at most 100 open files.  A reader is a
 * snapshot, so all reads of one reader see one state of the database. */
#include <leveldb/c.h>
#include <stdlib.h>
#include <string.h>

#include "data/db_internal.h"

typedef struct leveldb_impl {
  leveldb_t *db;
  leveldb_options_t *opts;
} leveldb_impl;

typedef struct leveldb_reader {
  const leveldb_snapshot_t *snap;
  leveldb_readoptions_t *ropts;
  char *last; /* the value of the latest get, freed at the next one */
} leveldb_reader;

typedef struct leveldb_cursor {
  const leveldb_snapshot_t *snap;
  leveldb_readoptions_t *ropts;
  leveldb_iterator_t *it;
} leveldb_cursor;

/* Takes LevelDB's malloc'd message into err and frees it. */
static ct_status leveldb_fail(ct_error *err, const char *call, char *msg) {
  ct_status s = ct_error_set(err, CT_ERR_IO, "%s%s%s", call, call[0] ? ": " : "", msg);
  leveldb_free(msg);
  return s;
}

static ct_status scan_keys(ct_db *db, leveldb_impl *l, ct_error *err) {
  leveldb_readoptions_t *ro = leveldb_readoptions_create();
  leveldb_readoptions_set_fill_cache(ro, 0);
  leveldb_iterator_t *it = leveldb_create_iterator(l->db, ro);
  for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
    size_t klen;
    const char *k = leveldb_iter_key(it, &klen);
    ct_db_index_add(db, k, klen);
  }
  char *msg = NULL;
  leveldb_iter_get_error(it, &msg);
  leveldb_iter_destroy(it);
  leveldb_readoptions_destroy(ro);
  if (msg) return leveldb_fail(err, "reading the keys", msg);
  return CT_OK;
}

ct_status ct_db_leveldb_open(ct_db *db, ct_error *err) {
  leveldb_impl *l = ct_xcalloc(1, sizeof *l);
  l->opts = leveldb_options_create();
  leveldb_options_set_block_size(l->opts, 65536);
  leveldb_options_set_write_buffer_size(l->opts, 268435456);
  leveldb_options_set_max_open_files(l->opts, 100);
  leveldb_options_set_create_if_missing(l->opts, db->mode != CT_DB_READ);
  leveldb_options_set_error_if_exists(l->opts, db->mode == CT_DB_NEW);
  char *msg = NULL;
  l->db = leveldb_open(l->opts, db->path, &msg);
  if (msg) {
    leveldb_options_destroy(l->opts);
    free(l);
    return leveldb_fail(err, "", msg);
  }
  db->impl = l;
  if (db->mode == CT_DB_READ) {
    ct_status s = scan_keys(db, l, err);
    if (s != CT_OK) {
      ct_db_leveldb_close(db);
      return s;
    }
  }
  return CT_OK;
}

void ct_db_leveldb_close(ct_db *db) {
  leveldb_impl *l = db->impl;
  if (!l) return;
  leveldb_close(l->db);
  leveldb_options_destroy(l->opts);
  free(l);
  db->impl = NULL;
}

ct_status ct_db_leveldb_write(ct_db *db, ct_error *err) {
  leveldb_impl *l = db->impl;
  leveldb_writebatch_t *wb = leveldb_writebatch_create();
  for (size_t i = 0; i < db->npending; i++)
    leveldb_writebatch_put(wb, db->pending[i].key, db->pending[i].klen, db->pending[i].val,
                           db->pending[i].vlen);
  leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
  leveldb_writeoptions_set_sync(wo, 1);
  char *msg = NULL;
  leveldb_write(l->db, wo, wb, &msg);
  leveldb_writeoptions_destroy(wo);
  leveldb_writebatch_destroy(wb);
  if (msg) return leveldb_fail(err, "leveldb_write", msg);
  return CT_OK;
}

ct_status ct_db_leveldb_reader_open(ct_db *db, void **impl, ct_error *err) {
  (void)err;
  leveldb_impl *l = db->impl;
  leveldb_reader *r = ct_xcalloc(1, sizeof *r);
  r->snap = leveldb_create_snapshot(l->db);
  r->ropts = leveldb_readoptions_create();
  leveldb_readoptions_set_snapshot(r->ropts, r->snap);
  *impl = r;
  return CT_OK;
}

void ct_db_leveldb_reader_close(ct_db *db, void *impl) {
  leveldb_impl *l = db->impl;
  leveldb_reader *r = impl;
  if (!r) return;
  leveldb_free(r->last);
  leveldb_readoptions_destroy(r->ropts);
  leveldb_release_snapshot(l->db, r->snap);
  free(r);
}

ct_status ct_db_leveldb_get(ct_db *db, void *impl, const void *key, size_t klen, const void **val,
                            size_t *vlen, ct_error *err) {
  leveldb_impl *l = db->impl;
  leveldb_reader *r = impl;
  leveldb_free(r->last);
  r->last = NULL;
  char *msg = NULL;
  size_t n = 0;
  char *v = leveldb_get(l->db, r->ropts, key, klen, &n, &msg);
  if (msg) return leveldb_fail(err, "read failed", msg);
  if (!v)
    return ct_error_set(err, CT_ERR_NOTFOUND,
                        "not found (the database changed since it was opened?)");
  r->last = v;
  *val = v;
  *vlen = n;
  return CT_OK;
}

ct_status ct_db_leveldb_cursor_open(ct_db *db, ct_db_cursor *c, ct_error *err) {
  leveldb_impl *l = db->impl;
  if (db->mode != CT_DB_READ)
    return ct_error_set(err, CT_ERR_INVALID, "cursors need a database opened for reading");
  leveldb_cursor *lc = ct_xcalloc(1, sizeof *lc);
  lc->snap = leveldb_create_snapshot(l->db);
  lc->ropts = leveldb_readoptions_create();
  leveldb_readoptions_set_snapshot(lc->ropts, lc->snap);
  leveldb_readoptions_set_fill_cache(lc->ropts, 0);
  lc->it = leveldb_create_iterator(l->db, lc->ropts);
  c->impl = lc;
  return CT_OK;
}

void ct_db_leveldb_cursor_close(ct_db_cursor *c) {
  leveldb_impl *l = c->db->impl;
  leveldb_cursor *lc = c->impl;
  leveldb_iter_destroy(lc->it);
  leveldb_readoptions_destroy(lc->ropts);
  leveldb_release_snapshot(l->db, lc->snap);
  free(lc);
}

ct_status ct_db_leveldb_cursor_move(ct_db_cursor *c, bool first, ct_error *err) {
  leveldb_cursor *lc = c->impl;
  if (first)
    leveldb_iter_seek_to_first(lc->it);
  else
    leveldb_iter_next(lc->it);
  char *msg = NULL;
  leveldb_iter_get_error(lc->it, &msg);
  if (msg) return leveldb_fail(err, "iteration failed", msg);
  c->valid = leveldb_iter_valid(lc->it);
  if (c->valid) {
    c->key = leveldb_iter_key(lc->it, &c->klen);
    c->val = leveldb_iter_value(lc->it, &c->vlen);
  }
  return CT_OK;
}
