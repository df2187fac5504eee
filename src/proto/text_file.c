/* Text-format files: reading with checks for empty, binary and non-UTF-8
 * input, and writing through a temporary file and rename. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/text_internal.h"
#include "proto/textformat.h"

/* Prototxt files are small; anything past this is surely not one. */
#define MAX_TEXT_FILE_BYTES ((size_t)256 << 20)

static ct_status read_whole_file(const char *path, char **out, size_t *out_len, ct_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return ct_error_set(err, CT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 4096, len = 0;
  char *data = malloc(cap);
  ct_status st = CT_OK;
  while (data) {
    if (len == cap) {
      if (cap >= MAX_TEXT_FILE_BYTES) {
        st = ct_error_set(err, CT_ERR_PARSE, "%s: file is too large for a prototxt (over %zu MiB)",
                          path, MAX_TEXT_FILE_BYTES >> 20);
        break;
      }
      char *grown = realloc(data, cap * 2);
      if (!grown) break;
      data = grown;
      cap *= 2;
    }
    size_t n = fread(data + len, 1, cap - len, f);
    len += n;
    if (n == 0) {
      if (ferror(f)) st = ct_error_set(err, CT_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
      break;
    }
  }
  fclose(f);
  if (!data) return ct_error_set(err, CT_ERR_NOMEM, "%s: out of memory reading the file", path);
  if (st == CT_OK && len == cap) {
    char *grown = realloc(data, cap + 1);
    if (!grown) st = ct_error_set(err, CT_ERR_NOMEM, "%s: out of memory reading the file", path);
    else data = grown;
  }
  if (st != CT_OK) {
    free(data);
    return st;
  }
  data[len] = '\0';
  *out = data;
  *out_len = len;
  return CT_OK;
}

/* Rejects binary data (NUL or control bytes anywhere) and text that is not
 * UTF-8 (pointing at the first bad byte). */
static ct_status check_is_text(const char *path, const char *data, size_t len, ct_error *err) {
  const unsigned char *s = (const unsigned char *)data;
  int line = 1, bad_line = 0, bad_col = 0;
  size_t line_start = 0, bad_at = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = s[i];
    if (c == '\n') {
      line++;
      line_start = i + 1;
    } else if (c == 0 || (c < 0x20 && !strchr("\t\r\v\f", c))) {
      return ct_error_set(err, CT_ERR_PARSE,
                          "%s:1:1: this looks like a binary file, not a text prototxt "
                          "(a .caffemodel? use the binary reader)",
                          path);
    } else if (c >= 0x80) {
      size_t seq = ct_utf8_seq_len(s + i, len - i);
      if (seq) {
        i += seq - 1;
      } else if (!bad_line) {
        bad_line = line;
        bad_col = (int)(i - line_start) + 1;
        bad_at = i;
      }
    }
  }
  if (bad_line)
    return ct_error_set(err, CT_ERR_PARSE, "%s:%d:%d: invalid UTF-8 byte 0x%02X (save the file as UTF-8)",
                        path, bad_line, bad_col, s[bad_at]);
  return CT_OK;
}

/* Rejects a file without a single token. */
static ct_status check_not_empty(const char *path, const char *data, size_t len, ct_error *err) {
  ct_tlex lx;
  ct_ttoken tok;
  ct_tlex_init(&lx, path, data, len);
  if (ct_tlex_next(&lx, &tok, NULL) != CT_OK || tok.kind != CT_TTOKEN_EOF) return CT_OK;
  if (lx.line_start == lx.end && lx.line == 1)
    return ct_error_set(err, CT_ERR_PARSE, "%s: file is empty", path);
  return ct_error_set(err, CT_ERR_PARSE, "%s: file is empty (only whitespace and comments)", path);
}

ct_status ct_text_parse_file(const ProtobufCMessageDescriptor *desc, const char *path,
                             ProtobufCMessage **out, ct_error *err) {
  CT_ASSERT(desc && path && out);
  *out = NULL;
  char *data = NULL;
  size_t len = 0;
  CT_TRY(read_whole_file(path, &data, &len, err));
  ct_status st = check_is_text(path, data, len, err);
  if (st == CT_OK) st = check_not_empty(path, data, len, err);
  if (st == CT_OK) st = ct_text_parse(desc, data, len, path, out, err);
  free(data);
  return st;
}

static ct_status write_all(int fd, const char *data, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return CT_ERR_IO;
    data += n;
    len -= (size_t)n;
  }
  return CT_OK;
}

/* Best effort: makes the rename itself durable. */
static void sync_parent_dir(const char *path) {
  char *copy = strdup(path);
  if (!copy) return;
  int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  free(copy);
}

/* Writes data to path through PATH.tmp.XXXXXX, fsync and rename.  (A shared
 * atomic-write helper may replace this one.) */
static ct_status write_file_atomic(const char *path, const char *data, size_t len, ct_error *err) {
  size_t n = strlen(path);
  char *tmp = malloc(n + sizeof ".tmp.XXXXXX");
  if (!tmp) return ct_error_set(err, CT_ERR_NOMEM, "%s: out of memory", path);
  memcpy(tmp, path, n);
  memcpy(tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
  int fd = mkstemp(tmp);
  if (fd < 0) {
    ct_status st = ct_error_set(err, CT_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    free(tmp);
    return st;
  }
  const char *step = NULL;
  if (fchmod(fd, 0644) != 0) step = "chmod";
  if (!step && write_all(fd, data, len) != CT_OK) step = "write";
  if (!step && fsync(fd) != 0) step = "fsync";
  if (close(fd) != 0 && !step) step = "close";
  if (!step && rename(tmp, path) != 0) step = "rename";
  ct_status st = CT_OK;
  if (step) {
    st = ct_error_set(err, CT_ERR_IO, "%s: cannot write: %s failed: %s", path, step,
                      strerror(errno));
    unlink(tmp);
  } else {
    sync_parent_dir(path);
  }
  free(tmp);
  return st;
}

ct_status ct_text_write_file(const ProtobufCMessage *msg, const char *path, ct_error *err) {
  CT_ASSERT(msg && path);
  char *text = ct_text_print(msg);
  if (!text) return ct_error_set(err, CT_ERR_NOMEM, "%s: out of memory printing the message", path);
  ct_status st = write_file_atomic(path, text, strlen(text), err);
  free(text);
  return st;
}
