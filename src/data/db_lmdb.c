/* The LMDB back end of ct_db (liblmdb), laid out as Caffe's: the path is a
 * folder holding data.mdb and lock.mdb, records live in the unnamed main
 * database.  The map starts small and doubles whenever a commit fills it.
 * Databases opened for reading share one environment per process.
 *
 * A damaged data.mdb must be an error naming the database, not a signal
 * inside liblmdb: at open the meta pages are checked and the file's size
 * against the last page they name (a truncated file would raise SIGBUS
 * where the map goes past its end); every read runs under a fault guard
 * (garbage offsets in a page raise SIGSEGV), and every key and value handed
 * out must lie inside the file. */
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core/fault_guard.h"
#include "data/db_internal.h"

#define LMDB_INITIAL_MAP ((size_t)64 << 20)
#define LMDB_MAX_READERS 1024

/* Our codes beside liblmdb's (which are -30799 .. -30780). */
#define LMDB_FAULTED (-31000)  /* a read raised SIGSEGV or SIGBUS */
#define LMDB_OUTSIDE (-31001)  /* a key or value points outside data.mdb */

typedef struct lmdb_impl {
  MDB_env *env;
  MDB_dbi dbi;
  const char *map;   /* the map's first byte (reading) */
  int fd;            /* data.mdb (liblmdb's descriptor, reading) */
  size_t file_size;  /* data.mdb's size as last seen (atomic) */
} lmdb_impl;

typedef struct lmdb_cursor {
  MDB_txn *txn;
  MDB_cursor *cur;
} lmdb_cursor;

static int g_fault_sig; /* the signal of the latest fault (for its message) */

static ct_status lmdb_fail(ct_error *err, const char *call, int rc) {
  if (rc == LMDB_FAULTED)
    return ct_error_set(err, CT_ERR_IO,
                        "the database is damaged: %s faulted inside liblmdb with %s; rebuild it or "
                        "restore a copy",
                        call, ct_fault_guard_describe(__atomic_load_n(&g_fault_sig, __ATOMIC_RELAXED)));
  if (rc == LMDB_OUTSIDE)
    return ct_error_set(err, CT_ERR_IO,
                        "the database is damaged: %s returned a key or value that lies outside "
                        "data.mdb; rebuild it or restore a copy",
                        call);
  ct_status code = rc == ENOENT ? CT_ERR_NOTFOUND : CT_ERR_IO;
  return ct_error_set(err, code, "%s failed: %s", call, mdb_strerror(rc));
}

/* ------------------------------------------------------------ the checks */

/* Little-endian fields of a meta page (liblmdb's MDB_meta after the 16-byte
 * page header: magic, version, address, mapsize, the free and main MDB_db of
 * 48 bytes each, last page, transaction id). */
#define META_MAGIC 0xBEEFC0DEu
#define META_OFF_MAGIC 16
#define META_OFF_VERSION 20
#define META_OFF_PSIZE 40        /* the free DB's md_pad */
#define META_OFF_FREE_ROOT 80
#define META_OFF_MAIN_ROOT 128
#define META_OFF_LAST_PG 136
#define META_OFF_TXNID 144
#define META_BYTES 152

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

typedef struct meta {
  uint32_t magic, version, psize;
  uint64_t free_root, main_root, last_pg, txnid;
} meta;

static void meta_read(const unsigned char *b, meta *m) {
  m->magic = (uint32_t)le(b + META_OFF_MAGIC, 4);
  m->version = (uint32_t)le(b + META_OFF_VERSION, 4);
  m->psize = (uint32_t)le(b + META_OFF_PSIZE, 4);
  m->free_root = le(b + META_OFF_FREE_ROOT, 8);
  m->main_root = le(b + META_OFF_MAIN_ROOT, 8);
  m->last_pg = le(b + META_OFF_LAST_PG, 8);
  m->txnid = le(b + META_OFF_TXNID, 8);
}

/* What is wrong with meta page k of a file of `size` bytes ("" when it is
 * sound). */
static const char *meta_problem(const meta *m, uint64_t size, char *buf, size_t cap) {
  const uint64_t none = ~(uint64_t)0;
  if (m->magic != META_MAGIC) return "no LMDB magic number (not an LMDB file, or overwritten)";
  if (m->version != 1) {
    snprintf(buf, cap, "format version %u (liblmdb reads version 1)", m->version);
    return buf;
  }
  if (m->psize < 512 || m->psize > 65536 || (m->psize & (m->psize - 1))) {
    snprintf(buf, cap, "page size %u", m->psize);
    return buf;
  }
  if (m->last_pg < 1 || m->last_pg > size) {
    snprintf(buf, cap, "last page %llu", (unsigned long long)m->last_pg);
    return buf;
  }
  if ((m->main_root != none && (m->main_root < 2 || m->main_root > m->last_pg)) ||
      (m->free_root != none && (m->free_root < 2 || m->free_root > m->last_pg))) {
    snprintf(buf, cap, "a root page past the last page %llu", (unsigned long long)m->last_pg);
    return buf;
  }
  return "";
}

/* Checks data.mdb in folder path before liblmdb maps it: both meta pages
 * sound, and the file as long as the newer one's last page says. */
static ct_status check_data_file(const char *path, ct_error *err) {
  char file[4200];
  if ((size_t)snprintf(file, sizeof file, "%s/data.mdb", path) >= sizeof file) return CT_OK;
  int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return CT_OK; /* liblmdb says why */
  struct stat st;
  unsigned char b0[META_BYTES], b1[META_BYTES];
  ct_status s = CT_OK;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    s = ct_error_set(err, CT_ERR_IO, "data.mdb is not a regular file");
  } else if (pread(fd, b0, sizeof b0, 0) != (ssize_t)sizeof b0) {
    s = ct_error_set(err, CT_ERR_IO, "data.mdb is truncated: %lld bytes, too short for its meta pages",
                     (long long)st.st_size);
  }
  meta m[2];
  char why[2][160];
  if (s == CT_OK) {
    meta_read(b0, &m[0]);
    const uint32_t psize = m[0].psize >= 512 && m[0].psize <= 65536 ? m[0].psize : 4096;
    if (pread(fd, b1, sizeof b1, psize) != (ssize_t)sizeof b1)
      s = ct_error_set(err, CT_ERR_IO, "data.mdb is truncated: %lld bytes, too short for its meta pages",
                       (long long)st.st_size);
    else
      meta_read(b1, &m[1]);
  }
  close(fd);
  if (s != CT_OK) return s;
  const uint64_t size = (uint64_t)st.st_size;
  for (int k = 0; k < 2; k++) {
    const char *p = meta_problem(&m[k], size, why[k], sizeof why[k]);
    if (*p)
      return ct_error_set(err, CT_ERR_IO, "data.mdb is damaged: meta page %d has %s", k, p);
  }
  const meta *cur = m[1].txnid > m[0].txnid ? &m[1] : &m[0];
  const uint64_t need = (cur->last_pg + 1) * (uint64_t)cur->psize;
  if (size < need)
    return ct_error_set(err, CT_ERR_IO,
                        "data.mdb is truncated: %llu bytes, but its last page (%llu, of %u bytes) "
                        "ends at %llu bytes",
                        (unsigned long long)size, (unsigned long long)cur->last_pg, cur->psize,
                        (unsigned long long)need);
  return CT_OK;
}

/* Where this process maps the file st describes (liblmdb does not tell:
 * mdb_env_info's me_mapaddr is only set for MDB_FIXEDMAP), from
 * /proc/self/maps; NULL when it is not found (the bounds checks are then
 * skipped, the fault guard stays). */
static const char *find_map(const struct stat *st) {
  FILE *f = fopen("/proc/self/maps", "re");
  if (!f) return NULL;
  char line[4600];
  const char *found = NULL;
  while (!found && fgets(line, sizeof line, f)) {
    unsigned long long lo, hi, off, ino;
    unsigned maj, mnr;
    if (sscanf(line, "%llx-%llx %*s %llx %x:%x %llu", &lo, &hi, &off, &maj, &mnr, &ino) == 6 && off == 0 &&
        ino == (unsigned long long)st->st_ino && maj == major(st->st_dev) && mnr == minor(st->st_dev))
      found = (const char *)(uintptr_t)lo;
  }
  fclose(f);
  return found;
}

/* Whether the bytes of v lie inside data.mdb (its size is looked up again
 * before saying no: a database may grow while it is read). */
static bool in_file(lmdb_impl *m, const MDB_val *v) {
  if (!m->map) return true; /* writing: values are ours */
  const char *p = v->mv_data;
  for (int attempt = 0; attempt < 2; attempt++) {
    size_t size = __atomic_load_n(&m->file_size, __ATOMIC_RELAXED);
    if (p >= m->map && (size_t)(p - m->map) <= size && v->mv_size <= size - (size_t)(p - m->map))
      return true;
    struct stat st;
    if (attempt == 0 && fstat(m->fd, &st) == 0)
      __atomic_store_n(&m->file_size, (size_t)st.st_size, __ATOMIC_RELAXED);
  }
  return false;
}

/* ---------------------------------------------------------- guarded reads */

typedef struct read_call {
  MDB_cursor *cur;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_val *k, *v;
  MDB_cursor_op op;
  bool key_out; /* the key is an output (a cursor's) and must lie in the file */
  int rc;
} read_call;

static void run_cursor_get(void *arg) {
  read_call *c = arg;
  c->rc = mdb_cursor_get(c->cur, c->k, c->v, c->op);
}

static void run_get(void *arg) {
  read_call *c = arg;
  c->rc = mdb_get(c->txn, c->dbi, c->k, c->v);
}

/* mdb_cursor_get / mdb_get under the fault guard, with the key and value
 * checked to lie in the file. */
static int guarded(lmdb_impl *m, read_call *c, void (*fn)(void *)) {
  int sig = ct_fault_guard_run(fn, c);
  if (sig) {
    __atomic_store_n(&g_fault_sig, sig, __ATOMIC_RELAXED);
    return LMDB_FAULTED;
  }
  if (c->rc == 0 && ((c->key_out && !in_file(m, c->k)) || !in_file(m, c->v))) return LMDB_OUTSIDE;
  return c->rc;
}

static int cursor_get(lmdb_impl *m, MDB_cursor *cur, MDB_val *k, MDB_val *v, MDB_cursor_op op) {
  read_call c = {.cur = cur, .k = k, .v = v, .op = op, .key_out = true};
  return guarded(m, &c, run_cursor_get);
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
  for (rc = cursor_get(m, cur, &k, &v, MDB_FIRST); rc == 0; rc = cursor_get(m, cur, &k, &v, MDB_NEXT))
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
  if (db->mode == CT_DB_READ) {
    CT_TRY(check_data_file(db->path, err));
    ct_fault_guard_arm();
  }
  lmdb_impl *m = ct_xcalloc(1, sizeof *m);
  m->fd = -1;
  ct_status st = db->mode == CT_DB_READ ? acquire_read_env(db->path, &m->env, err)
                                        : open_env(db->path, db->mode, &m->env, err);
  if (st != CT_OK) {
    free(m);
    return st;
  }
  db->impl = m;
  if (db->mode == CT_DB_READ) {
    struct stat fst;
    if (mdb_env_get_fd(m->env, &m->fd) == 0 && fstat(m->fd, &fst) == 0) {
      m->map = find_map(&fst);
      m->file_size = (size_t)fst.st_size;
    }
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
  ct_fault_guard_arm();
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
  read_call c = {.txn = impl, .dbi = m->dbi, .k = &k, .v = &v};
  int rc = guarded(m, &c, run_get);
  if (rc == LMDB_FAULTED || rc == LMDB_OUTSIDE) return lmdb_fail(err, "mdb_get", rc);
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
  ct_fault_guard_arm();
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
  int rc = cursor_get(c->db->impl, lc->cur, &k, &v, first ? MDB_FIRST : MDB_NEXT);
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
