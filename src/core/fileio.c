#include "core/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"

/* ------------------------------------------------------------------ read */

/* Appends everything left in fd to buf (capacity *cap, *used filled),
 * growing it; refuses to go past max_len bytes (a file that grows while it
 * is read). */
static ct_status read_rest(int fd, const char *path, char **buf, size_t *cap, size_t *used,
                           size_t max_len, ct_error *err) {
  for (;;) {
    if (*cap - *used < 2) {
      size_t grow = *cap < 65536 ? 65536 : *cap;
      *buf = ct_xrealloc(*buf, *cap + grow);
      *cap += grow;
    }
    ssize_t n = read(fd, *buf + *used, *cap - *used - 1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ct_error_set(err, CT_ERR_IO, "%s: read failed: %s", path, strerror(errno));
    }
    if (n == 0) return CT_OK;
    *used += (size_t)n;
    if (*used > max_len)
      return ct_error_set(err, CT_ERR_INVALID,
                          "%s: file too large (more than %zu bytes; the limit is %zu bytes)",
                          path, max_len, max_len);
  }
}

const char *ct_file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

ct_status ct_file_read_all(const char *path, char **data, size_t *len, size_t max_len,
                           ct_error *err) {
  CT_ASSERT(path && data && len);
  *data = NULL;
  *len = 0;
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused
   * below, before anything is read (regular files ignore the flag). */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int e = errno;
    return ct_error_set(err, e == ENOENT ? CT_ERR_NOTFOUND : CT_ERR_IO, "%s: cannot open: %s",
                        path, strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return ct_error_set(err, CT_ERR_IO, "%s: cannot open: %s", path, strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    return ct_error_set(err, CT_ERR_IO, "%s: is a directory", path);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return ct_error_set(err, CT_ERR_IO, "%s: not a regular file (it is %s); refused before reading",
                        path, ct_file_kind((unsigned)st.st_mode));
  }
  if ((uintmax_t)st.st_size > max_len) {
    close(fd);
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: file too large (%jd bytes; the limit is %zu bytes)", path,
                        (intmax_t)st.st_size, max_len);
  }
  size_t cap = (size_t)st.st_size + 2; /* +1 for the '\0', +1 to see EOF at once */
  char *buf = malloc(cap);
  if (!buf) {
    close(fd);
    return ct_error_set(err, CT_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, cap - 2);
  }
  size_t used = 0;
  ct_status s = read_rest(fd, path, &buf, &cap, &used, max_len, err);
  close(fd);
  if (s != CT_OK) {
    free(buf);
    return s;
  }
  buf[used] = '\0';
  *data = buf;
  *len = used;
  return CT_OK;
}

/* ----------------------------------------------------------------- write */

static ct_status write_all(int fd, const char *path, const void *data, size_t len,
                           ct_error *err) {
  const char *p = data;
  while (len > 0) {
    size_t chunk = len > (1u << 30) ? (1u << 30) : len;
    ssize_t n = write(fd, p, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ct_error_set(err, CT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    p += n;
    len -= (size_t)n;
  }
  return CT_OK;
}

ct_status ct_file_sync_parent(const char *path, ct_error *err) {
  char *copy = ct_xstrdup(path);
  const char *dir = dirname(copy);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ct_status s = CT_OK;
  if (fd < 0) {
    s = ct_error_set(err, CT_ERR_IO, "%s: fsync folder failed: %s", path, strerror(errno));
  } else {
    if (fsync(fd) != 0 && errno != EINVAL)  /* some file systems cannot sync folders */
      s = ct_error_set(err, CT_ERR_IO, "%s: fsync folder failed: %s", path, strerror(errno));
    close(fd);
  }
  free(copy);
  return s;
}

static atomic_uint g_tmp_counter;

char *ct_file_temp_name(const char *path) {
  size_t cap = strlen(path) + 64;
  char *tmp = ct_xcalloc(cap, 1);
  snprintf(tmp, cap, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&g_tmp_counter, 1));
  return tmp;
}

ct_status ct_file_write_atomic(const char *path, const void *data, size_t len, ct_error *err) {
  CT_ASSERT(path && (data || len == 0));
  ct_file_remove_stale_temps(path);
  char *tmp = NULL;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
    free(tmp);
    tmp = ct_file_temp_name(path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    ct_status s = ct_error_set(err, CT_ERR_IO, "%s: create failed: %s", path, strerror(errno));
    free(tmp);
    return s;
  }
  /* held while the data goes in: ct_file_remove_stale_temps leaves a
   * locked temporary alone, whichever machine writes it */
  (void)flock(fd, LOCK_EX | LOCK_NB);
  ct_status s = write_all(fd, path, data, len, err);
  if (s == CT_OK && fsync(fd) != 0)
    s = ct_error_set(err, CT_ERR_IO, "%s: fsync failed: %s", path, strerror(errno));
  if (close(fd) != 0 && s == CT_OK)
    s = ct_error_set(err, CT_ERR_IO, "%s: close failed: %s", path, strerror(errno));
  if (s == CT_OK && rename(tmp, path) != 0)
    s = ct_error_set(err, CT_ERR_IO, "%s: rename failed: %s", path, strerror(errno));
  if (s != CT_OK) {
    unlink(tmp);
    free(tmp);
    return s;
  }
  free(tmp);
  return ct_file_sync_parent(path, err);
}

/* ---------------------------------------------------------------- cleanup */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  int rc = (flag == FTW_DP) ? rmdir(path) : unlink(path);
  if (rc != 0) LOG_WARNING("cannot remove %s: %s", path, strerror(errno));
  return 0; /* keep going: remove as much as possible */
}

void ct_file_remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    if (unlink(path) != 0) LOG_WARNING("cannot remove %s: %s", path, strerror(errno));
    return;
  }
  if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
    LOG_WARNING("cannot remove %s: %s", path, strerror(errno));
}

/* The writer's process id when name is "<base...>.tmp.<pid>.<n>" and starts
 * with base; else 0. */
static long temp_owner(const char *name, const char *base) {
  size_t nb = strlen(base);
  if (strncmp(name, base, nb) != 0) return 0;
  const char *t = NULL;
  for (const char *p = strstr(name + nb, ".tmp."); p; p = strstr(p + 1, ".tmp.")) t = p;
  if (!t) return 0;
  const char *d = t + 5;
  char *end;
  errno = 0;
  long pid = strtol(d, &end, 10);
  if (end == d || *end != '.' || pid <= 0 || errno) return 0;
  const char *n = end + 1;
  if (!*n) return 0;
  for (; *n; n++)
    if (*n < '0' || *n > '9') return 0;
  return pid;
}

/* A regular file that some process (on any machine sharing the folder)
 * holds a lock on is being written. */
static bool file_locked(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  struct stat st;
  bool locked = false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
    locked = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return locked;
}

int ct_file_remove_stale_temps(const char *path_prefix) {
  char *copy = ct_xstrdup(path_prefix);
  char *copy2 = ct_xstrdup(path_prefix);
  const char *dir = dirname(copy), *base = basename(copy2);
  int removed = 0;
  DIR *d = *base ? opendir(dir) : NULL;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    long pid = temp_owner(e->d_name, base);
    if (pid == 0 || pid == (long)getpid()) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to ask) */
    /* named as the caller names the folder ("x.tmp.1.0", not "./x.tmp.1.0") */
    const char *slash = strrchr(path_prefix, '/');
    const int dirlen = slash ? (int)(slash - path_prefix) + 1 : 0;
    size_t n = (size_t)dirlen + strlen(e->d_name) + 1;
    char *full = ct_xcalloc(n, 1);
    snprintf(full, n, "%.*s%s", dirlen, path_prefix, e->d_name);
    if (!file_locked(full)) {
      LOG_INFO("Removing %s, left unfinished by process %ld, which no longer runs", full, pid);
      ct_file_remove_tree(full);
      removed++;
    }
    free(full);
  }
  if (d) closedir(d);
  free(copy);
  free(copy2);
  return removed;
}
