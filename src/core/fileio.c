#include "core/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------ read */

/* Appends everything left in fd to buf (capacity *cap, *used filled),
 * growing it; refuses to go past max_len bytes. */
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

ct_status ct_file_read_all(const char *path, char **data, size_t *len, size_t max_len,
                           ct_error *err) {
  CT_ASSERT(path && data && len);
  *data = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
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
  size_t cap = 1;
  if (S_ISREG(st.st_mode)) {
    if ((uintmax_t)st.st_size > max_len) {
      close(fd);
      return ct_error_set(err, CT_ERR_INVALID,
                          "%s: file too large (%jd bytes; the limit is %zu bytes)", path,
                          (intmax_t)st.st_size, max_len);
    }
    cap = (size_t)st.st_size + 2; /* +1 for the '\0', +1 to see EOF at once */
  }
  char *buf = ct_xcalloc(cap, 1);
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

/* fsync of the folder holding `path`, so that a rename into it is durable. */
static ct_status sync_parent(const char *path, ct_error *err) {
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

ct_status ct_file_write_atomic(const char *path, const void *data, size_t len, ct_error *err) {
  CT_ASSERT(path && (data || len == 0));
  size_t tmp_cap = strlen(path) + 64;
  char *tmp = ct_xcalloc(tmp_cap, 1);
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
    snprintf(tmp, tmp_cap, "%s.tmp.%ld.%u", path, (long)getpid(),
             atomic_fetch_add(&g_tmp_counter, 1));
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    ct_status s = ct_error_set(err, CT_ERR_IO, "%s: create failed: %s", path, strerror(errno));
    free(tmp);
    return s;
  }
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
  return sync_parent(path, err);
}
