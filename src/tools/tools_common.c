#include "tools/tools_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/log.h"

ct_status ct_tools_db_create(ct_tools_out_db *o, const char *path, ct_db_backend backend,
                             ct_error *err) {
  memset(o, 0, sizeof *o);
  struct stat st;
  if (lstat(path, &st) == 0)
    return ct_error_set(err, CT_ERR_INVALID, "%s: cannot create %s: the path already exists", path,
                        backend == CT_DB_LMDB ? "LMDB" : "LevelDB");
  ct_file_remove_stale_temps(path);
  o->tmp = ct_file_temp_name(path);
  ct_status s = ct_db_open(&o->db, o->tmp, backend, CT_DB_NEW, err);
  if (s != CT_OK) {
    ct_file_remove_tree(o->tmp); /* what the open made before it failed */
    free(o->tmp);
    o->tmp = NULL;
    return s;
  }
  o->path = ct_xstrdup(path);
  return CT_OK;
}

ct_status ct_tools_db_finish(ct_tools_out_db *o, ct_status st, ct_error *err) {
  if (!o->db) return st;
  if (st == CT_OK) st = ct_db_commit(o->db, err);
  ct_db_close(o->db);
  o->db = NULL;
  if (st == CT_OK && rename(o->tmp, o->path) != 0) {
    int e = errno;
    st = ct_error_set(err, CT_ERR_IO, "%s: cannot move the finished database %s into place: %s",
                      o->path, o->tmp, e == ENOTEMPTY || e == EEXIST ? "the path already exists" : strerror(e));
  }
  if (st == CT_OK) st = ct_file_sync_parent(o->path, err);
  if (st != CT_OK) ct_file_remove_tree(o->tmp);
  free(o->tmp);
  free(o->path);
  o->tmp = o->path = NULL;
  return st;
}

static int file_in(const char *dir, const char *name) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) return 0;
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

ct_db_backend ct_tools_detect_backend(const char *path, ct_db_backend fallback) {
  if (file_in(path, "data.mdb")) return CT_DB_LMDB;
  if (file_in(path, "CURRENT")) return CT_DB_LEVELDB;
  return fallback;
}

ct_status ct_tools_put_owned(ct_db *db, const char *key, size_t klen, uint8_t **value,
                             size_t vlen, ct_error *err) {
  ct_status st = ct_db_put(db, key, klen, *value, vlen, err);
  free(*value);
  *value = NULL;
  return st;
}
