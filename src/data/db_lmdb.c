/* The LMDB back end of ct_db (liblmdb), laid out as Caffe's: the path is a
 * folder holding data.mdb and lock.mdb, records live in the unnamed main
 * database.  The map starts small and doubles whenever a commit fills it.
 * Databases opened for reading share one environment per process. */
#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/db_internal.h"

#define LMDB_INITIAL_MAP ((size_t)64 << 20)
#define LMDB_MAX_READERS 1024

typedef struct lmdb_impl {
  MDB_env *env;
  MDB_dbi dbi;
} lmdb_impl;

typedef struct lmdb_cursor {
  MDB_txn *txn;
  MDB_cursor *cur;
} lmdb_cursor;

static ct_status lmdb_fail(ct_error *err, const char *call, int rc) {
  ct_status code = rc == ENOENT ? CT_ERR_NOTFOUND : CT_ERR_IO;
  return ct_error_set(err, code, "%s failed: %s", call, mdb_strerror(rc));
}

static ct_status scan_keys(ct_db *db, lmdb_impl *m, ct_error *err) {
  MDB_txn *txn;
  int rc = mdb_txn_begin(m->env, NULL, MDB_RDONLY, &txn);
  if (rc) return lmdb_fail(err, "mdb_txn_begin", rc);
  rc = mdb_dbi_open(txn, NULL, 0, &m->dbi);
  if (rc) {
    mdb_txn_abort(txn);
    return lmdb_fail(err, "mdb_dbi_open", rc);
  }
  MDB_cursor *cur;
  rc = mdb_cursor_open(txn, m->dbi, &cur);
  if (rc) {
    mdb_txn_abort(txn);
    return lmdb_fail(err, "mdb_cursor_open", rc);
  }
  MDB_val k, v;
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
    ct_db_index_add(db, k.mv_data, k.mv_size);
  mdb_cursor_close(cur);
  mdb_txn_abort(txn);
  if (rc != MDB_NOTFOUND) return lmdb_fail(err, "reading the keys: mdb_cursor_get", rc);
  return CT_OK;
}

/* Opens an environment at path (mode as ct_db's). */
static ct_status open_env(const char *path, ct_db_mode mode, MDB_env **out, ct_error *err) {
  unsigned flags = mode == CT_DB_READ ? MDB_RDONLY | MDB_NOTLS : 0;
  for (int attempt = 0;; attempt++) {
    MDB_env *env;
    int rc = mdb_env_create(&env);
    if (rc != 0) return lmdb_fail(err, "mdb_env_create", rc);
    mdb_env_set_maxreaders(env, LMDB_MAX_READERS);
    if (mode != CT_DB_READ) mdb_env_set_mapsize(env, LMDB_INITIAL_MAP);
    rc = mdb_env_open(env, path, flags, 0664);
    if (rc == 0) {
      *out = env;
      return CT_OK;
    }
    mdb_env_close(env);
    /* A database on a read-only medium cannot take the lock file: read it
     * without locking, as Caffe does. */
    if (attempt == 0 && mode == CT_DB_READ && (rc == EACCES || rc == EROFS)) {
      flags |= MDB_NOLOCK;
      continue;
    }
    return ct_error_set(err, rc == ENOENT ? CT_ERR_NOTFOUND : CT_ERR_IO, "%s", mdb_strerror(rc));
  }
}

/* LMDB allows one environment per database per process: a second
 * mdb_env_open of the same files in one process takes the lock file over
 * and resets the reader table under the first one's readers.  Readers in
 * one process (data layers of several nets, or of data-parallel workers
 * that are threads) therefore share one environment, counted here. */
typedef struct shared_env {
  char *key; /* the database's real path */
  MDB_env *env;
  int refs;
  struct shared_env *next;
} shared_env;

static pthread_mutex_t g_shared_mu = PTHREAD_MUTEX_INITIALIZER;
static shared_env *g_shared;

static ct_status acquire_read_env(const char *path, MDB_env **out, ct_error *err) {
  char *key = realpath(path, NULL);
  if (!key) key = ct_xstrdup(path);
  pthread_mutex_lock(&g_shared_mu);
  for (shared_env *e = g_shared; e; e = e->next)
    if (strcmp(e->key, key) == 0) {
      e->refs++;
      *out = e->env;
      pthread_mutex_unlock(&g_shared_mu);
      free(key);
      return CT_OK;
    }
  MDB_env *env;
  ct_status st = open_env(path, CT_DB_READ, &env, err);
  if (st == CT_OK) {
    shared_env *e = ct_xcalloc(1, sizeof *e);
    e->key = key;
    e->env = env;
    e->refs = 1;
    e->next = g_shared;
    g_shared = e;
    *out = env;
    key = NULL;
  }
  pthread_mutex_unlock(&g_shared_mu);
  free(key);
  return st;
}

static void release_read_env(MDB_env *env) {
  pthread_mutex_lock(&g_shared_mu);
  for (shared_env **pe = &g_shared; *pe; pe = &(*pe)->next) {
    shared_env *e = *pe;
    if (e->env != env) continue;
    if (--e->refs == 0) {
      *pe = e->next;
      mdb_env_close(e->env);
      free(e->key);
      free(e);
    }
    break;
  }
  pthread_mutex_unlock(&g_shared_mu);
}

ct_status ct_db_lmdb_open(ct_db *db, ct_error *err) {
  if (db->mode != CT_DB_READ) {
    if (mkdir(db->path, 0775) != 0 && !(errno == EEXIST && db->mode == CT_DB_WRITE))
      return ct_error_set(err, errno == ENOENT ? CT_ERR_NOTFOUND : CT_ERR_IO, "mkdir failed: %s",
                          strerror(errno));
  }
  lmdb_impl *m = ct_xcalloc(1, sizeof *m);
  ct_status st = db->mode == CT_DB_READ ? acquire_read_env(db->path, &m->env, err)
                                        : open_env(db->path, db->mode, &m->env, err);
  if (st != CT_OK) {
    free(m);
    return st;
  }
  db->impl = m;
  if (db->mode == CT_DB_READ) {
    st = scan_keys(db, m, err);
    if (st != CT_OK) {
      ct_db_lmdb_close(db);
      return st;
    }
  }
  return CT_OK;
}

void ct_db_lmdb_close(ct_db *db) {
  lmdb_impl *m = db->impl;
  if (!m) return;
  if (db->mode == CT_DB_READ) release_read_env(m->env);
  else mdb_env_close(m->env);
  free(m);
  db->impl = NULL;
}

/* One transaction with every pending put; a full map is doubled and the
 * whole transaction tried again. */
ct_status ct_db_lmdb_write(ct_db *db, ct_error *err) {
  lmdb_impl *m = db->impl;
  for (;;) {
    MDB_txn *txn;
    int rc = mdb_txn_begin(m->env, NULL, 0, &txn);
    if (rc) return lmdb_fail(err, "mdb_txn_begin", rc);
    const char *call = "mdb_dbi_open";
    rc = mdb_dbi_open(txn, NULL, 0, &m->dbi);
    for (size_t i = 0; rc == 0 && i < db->npending; i++) {
      MDB_val k = {db->pending[i].klen, db->pending[i].key};
      MDB_val v = {db->pending[i].vlen, db->pending[i].val};
      call = "mdb_put";
      rc = mdb_put(txn, m->dbi, &k, &v, 0);
    }
    if (rc == 0) {
      call = "mdb_txn_commit";
      rc = mdb_txn_commit(txn);
    } else {
      mdb_txn_abort(txn);
    }
    if (rc == 0) return CT_OK;
    if (rc != MDB_MAP_FULL) return lmdb_fail(err, call, rc);
    MDB_envinfo info;
    mdb_env_info(m->env, &info);
    rc = mdb_env_set_mapsize(m->env, info.me_mapsize * 2);
    if (rc) return lmdb_fail(err, "mdb_env_set_mapsize", rc);
  }
}

ct_status ct_db_lmdb_reader_open(ct_db *db, void **impl, ct_error *err) {
  lmdb_impl *m = db->impl;
  MDB_txn *txn;
  int rc = mdb_txn_begin(m->env, NULL, MDB_RDONLY, &txn);
  if (rc) return lmdb_fail(err, "mdb_txn_begin", rc);
  *impl = txn;
  return CT_OK;
}

void ct_db_lmdb_reader_close(ct_db *db, void *impl) {
  (void)db;
  if (impl) mdb_txn_abort(impl);
}

ct_status ct_db_lmdb_get(ct_db *db, void *impl, const void *key, size_t klen, const void **val,
                         size_t *vlen, ct_error *err) {
  lmdb_impl *m = db->impl;
  MDB_val k = {klen, (void *)key}, v;
  int rc = mdb_get(impl, m->dbi, &k, &v);
  if (rc == MDB_NOTFOUND)
    return ct_error_set(err, CT_ERR_NOTFOUND,
                        "not found (the database changed since it was opened?)");
  if (rc) return ct_error_set(err, CT_ERR_IO, "read failed: %s", mdb_strerror(rc));
  *val = v.mv_data;
  *vlen = v.mv_size;
  return CT_OK;
}

ct_status ct_db_lmdb_cursor_open(ct_db *db, ct_db_cursor *c, ct_error *err) {
  lmdb_impl *m = db->impl;
  if (!m || db->mode != CT_DB_READ)
    return ct_error_set(err, CT_ERR_INVALID, "cursors need a database opened for reading");
  lmdb_cursor *lc = ct_xcalloc(1, sizeof *lc);
  int rc = mdb_txn_begin(m->env, NULL, MDB_RDONLY, &lc->txn);
  if (rc == 0) {
    rc = mdb_cursor_open(lc->txn, m->dbi, &lc->cur);
    if (rc) mdb_txn_abort(lc->txn);
  }
  if (rc) {
    free(lc);
    return lmdb_fail(err, "mdb_cursor_open", rc);
  }
  c->impl = lc;
  return CT_OK;
}

void ct_db_lmdb_cursor_close(ct_db_cursor *c) {
  lmdb_cursor *lc = c->impl;
  mdb_cursor_close(lc->cur);
  mdb_txn_abort(lc->txn);
  free(lc);
}

ct_status ct_db_lmdb_cursor_move(ct_db_cursor *c, bool first, ct_error *err) {
  lmdb_cursor *lc = c->impl;
  MDB_val k, v;
  int rc = mdb_cursor_get(lc->cur, &k, &v, first ? MDB_FIRST : MDB_NEXT);
  if (rc == MDB_NOTFOUND) {
    c->valid = false;
    return CT_OK;
  }
  if (rc) return lmdb_fail(err, "mdb_cursor_get", rc);
  c->valid = true;
  c->key = k.mv_data;
  c->klen = k.mv_size;
  c->val = v.mv_data;
  c->vlen = v.mv_size;
  return CT_OK;
}
