#include "tools/tools_common.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  int rc = (flag == FTW_DP) ? rmdir(path) : unlink(path);
  if (rc != 0) LOG_WARNING("cannot remove %s: %s", path, strerror(errno));
  return 0; /* keep going: remove as much as possible */
}

void ct_tools_remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    if (unlink(path) != 0) LOG_WARNING("cannot remove %s: %s", path, strerror(errno));
    return;
  }
  if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
    LOG_WARNING("cannot remove %s: %s", path, strerror(errno));
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
