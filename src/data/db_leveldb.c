/* The LevelDB back end of ct_db (leveldb/c.h), with Caffe's options: 64 KiB
 * blocks, a 256 MiB write buffer, at most 100 open files.  A reader is a
 * snapshot, so all reads of one reader see one state of the database.
 *
 * Damage is an error, never records silently lost: databases are opened
 * with paranoid checks (a corrupt write-ahead log record fails the open
 * instead of being skipped), reads verify block checksums, and before a
 * database is opened for reading its write-ahead logs are walked: one that
 * ends inside a record (cut by a crash of its writer or a copy) is
 * reported, since LevelDB drops that record and everything after it
 * without a word. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <leveldb/c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fault_guard.h"
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
  leveldb_readoptions_set_verify_checksums(ro, 1);
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

/* ---------------------------------------------------- write-ahead logs */

/* LevelDB's log format: 32 KiB blocks of physical records, each a 7-byte
 * header (crc32c, length, type) and its payload; a write batch is one FULL
 * record or FIRST, MIDDLE..., LAST; a block's last < 7 bytes are padding. */
#define LOG_BLOCK 32768
#define LOG_HEADER 7
enum { LOG_ZERO = 0, LOG_FULL = 1, LOG_FIRST = 2, LOG_MIDDLE = 3, LOG_LAST = 4 };

/* Where the log in buf (len bytes) stops being whole: len when it ends
 * after a complete batch, else the offset of the batch that is cut. */
static size_t log_whole_prefix(const unsigned char *buf, size_t len) {
  size_t pos = 0, batch_start = 0;
  bool in_batch = false;
  while (pos < len) {
    size_t left = LOG_BLOCK - pos % LOG_BLOCK;
    if (left < LOG_HEADER) {
      pos += left;
      continue;
    }
    if (len - pos < LOG_HEADER) return in_batch ? batch_start : pos;
    const size_t n = (size_t)buf[pos + 4] | (size_t)buf[pos + 5] << 8;
    const int type = buf[pos + 6];
    if (type == LOG_ZERO && n == 0) { /* preallocated space: the rest of the block */
      pos += left;
      continue;
    }
    if (LOG_HEADER + n > len - pos) return in_batch ? batch_start : pos;
    if (type == LOG_FULL || type == LOG_FIRST) {
      in_batch = type == LOG_FIRST;
      batch_start = pos;
    } else if (type == LOG_LAST) {
      in_batch = false;
    }
    pos += LOG_HEADER + n;
  }
  return in_batch ? batch_start : len;
}

typedef struct log_scan {
  const unsigned char *buf;
  size_t len, whole;
} log_scan;

static void run_log_scan(void *arg) {
  log_scan *l = arg;
  l->whole = log_whole_prefix(l->buf, l->len);
}

static bool is_log_name(const char *name) {
  size_t n = strlen(name), d = strspn(name, "0123456789");
  return d > 0 && n == d + 4 && strcmp(name + d, ".log") == 0;
}

/* Refuses a database whose write-ahead log was cut inside a batch. */
static ct_status check_logs(const char *path, ct_error *err) {
  DIR *dir = opendir(path);
  if (!dir) return CT_OK; /* LevelDB says why */
  ct_status s = CT_OK;
  struct dirent *e;
  while (s == CT_OK && (e = readdir(dir)) != NULL) {
    if (!is_log_name(e->d_name)) continue;
    char file[4400];
    if ((size_t)snprintf(file, sizeof file, "%s/%s", path, e->d_name) >= sizeof file) continue;
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0) continue;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      /* mapped, not read: a log can hold a 256 MiB write buffer */
      size_t len = (size_t)st.st_size;
      unsigned char *buf = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
      if (buf != MAP_FAILED) {
        /* under the fault guard: a log cut while it is read raises SIGBUS */
        log_scan scan = {buf, len, len};
        ct_fault_guard_arm();
        const int sig = ct_fault_guard_run(run_log_scan, &scan);
        const size_t whole = sig ? len : scan.whole;
        if (whole < len)
          s = ct_error_set(err, CT_ERR_IO,
                           "the database is damaged: its write-ahead log %s is cut inside a write "
                           "(%zu of %zu bytes whole); LevelDB would drop the records from byte %zu "
                           "on without a word",
                           e->d_name, whole, len, whole);
        munmap(buf, len);
      }
    }
    close(fd);
  }
  closedir(dir);
  return s;
}

/* A LevelDB error message: corruption says that the database is damaged. */
static ct_status leveldb_fail_open(ct_error *err, char *msg) {
  bool corrupt = strncmp(msg, "Corruption", 10) == 0;
  ct_status s = ct_error_set(err, CT_ERR_IO, "%s%s", corrupt ? "the database is damaged: " : "", msg);
  leveldb_free(msg);
  return s;
}

ct_status ct_db_leveldb_open(ct_db *db, ct_error *err) {
  if (db->mode == CT_DB_READ) CT_TRY(check_logs(db->path, err));
  leveldb_impl *l = ct_xcalloc(1, sizeof *l);
  l->opts = leveldb_options_create();
  leveldb_options_set_block_size(l->opts, 65536);
  leveldb_options_set_write_buffer_size(l->opts, 268435456);
  leveldb_options_set_max_open_files(l->opts, 100);
  leveldb_options_set_create_if_missing(l->opts, db->mode != CT_DB_READ);
  leveldb_options_set_error_if_exists(l->opts, db->mode == CT_DB_NEW);
  leveldb_options_set_paranoid_checks(l->opts, 1);
  char *msg = NULL;
  l->db = leveldb_open(l->opts, db->path, &msg);
  if (msg) {
    leveldb_options_destroy(l->opts);
    free(l);
    return leveldb_fail_open(err, msg);
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
  leveldb_readoptions_set_verify_checksums(r->ropts, 1);
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
  leveldb_readoptions_set_verify_checksums(lc->ropts, 1);
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
