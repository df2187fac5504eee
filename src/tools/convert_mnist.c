#include "tools/convert_mnist.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/log.h"
#include "data/datum.h"
#include "tools/tools_common.h"

/* Largest image an idx file may declare (rows * cols), far above MNIST's 784. */
#define MAX_PIXELS (1u << 24)

/* One open idx file: zlib reads gzipped and plain files alike. */
typedef struct idx_file {
  const char *path;
  gzFile gz;
} idx_file;

static ct_status idx_open(idx_file *f, const char *path, ct_error *err) {
  f->path = path;
  errno = 0;
  f->gz = gzopen(path, "rb");
  if (!f->gz) {
    int e = errno;
    return ct_error_set(err, e == ENOENT ? CT_ERR_NOTFOUND : CT_ERR_IO, "%s: cannot open: %s",
                        path, e ? strerror(e) : "out of memory");
  }
  return CT_OK;
}

static void idx_close(idx_file *f) {
  if (f->gz) gzclose(f->gz);
  f->gz = NULL;
}

/* Reads up to len bytes; *got is how many came.  A zlib error (not a short
 * file) is an error; the caller reports short reads in its own words. */
static ct_status idx_read(idx_file *f, void *buf, size_t len, size_t *got, ct_error *err) {
  int n = gzread(f->gz, buf, (unsigned)len);
  if (n < 0) {
    int zerr;
    const char *msg = gzerror(f->gz, &zerr);
    return ct_error_set(err, zerr == Z_ERRNO ? CT_ERR_IO : CT_ERR_PARSE, "%s: cannot read: %s",
                        f->path, zerr == Z_ERRNO ? strerror(errno) : msg);
  }
  *got = (size_t)n;
  return CT_OK;
}

/* Reads the header's 32-bit big-endian words. */
static ct_status idx_read_header(idx_file *f, uint32_t *words, int n_words, ct_error *err) {
  uint8_t buf[16];
  size_t got = 0;
  CT_TRY(idx_read(f, buf, (size_t)n_words * 4, &got, err));
  if (got < (size_t)n_words * 4)
    return ct_error_set(err, CT_ERR_PARSE, "%s: truncated idx header (%zu bytes)", f->path, got);
  for (int i = 0; i < n_words; i++)
    words[i] = (uint32_t)buf[4 * i] << 24 | (uint32_t)buf[4 * i + 1] << 16 |
               (uint32_t)buf[4 * i + 2] << 8 | buf[4 * i + 3];
  return CT_OK;
}

static ct_status check_magic(const idx_file *f, uint32_t magic, uint32_t want, const char *kind,
                             ct_error *err) {
  if (magic == want) return CT_OK;
  const char *hint = "";
  if (want == CT_MNIST_IMAGES_MAGIC && magic == CT_MNIST_LABELS_MAGIC)
    hint = "; this is a label file: are the arguments swapped?";
  else if (want == CT_MNIST_LABELS_MAGIC && magic == CT_MNIST_IMAGES_MAGIC)
    hint = "; this is an image file: are the arguments swapped?";
  return ct_error_set(err, CT_ERR_PARSE,
                      "%s: not an idx %s file: magic number 0x%08" PRIx32
                      " (expected 0x%08" PRIx32 " = %" PRIu32 "%s)",
                      f->path, kind, magic, want, want, hint);
}

/* Logs a warning when the file goes on past its last record. */
static void warn_trailing(idx_file *f) {
  uint8_t buf[4096];
  size_t extra = 0;
  int n;
  while ((n = gzread(f->gz, buf, sizeof buf)) > 0) extra += (size_t)n;
  if (extra) LOG_WARNING("%s: %zu bytes after the last record (ignored)", f->path, extra);
}

/* Writes every record; the files are positioned after their headers. */
static ct_status write_records(idx_file *images, idx_file *labels, uint32_t count, uint32_t rows,
                               uint32_t cols, ct_db *db, ct_error *err) {
  size_t npix = (size_t)rows * cols;
  uint8_t *pixels = ct_xcalloc(npix, 1);
  ct_status st = CT_OK;
  for (uint32_t i = 0; i < count && st == CT_OK; i++) {
    size_t got = 0;
    uint8_t label;
    if ((st = idx_read(images, pixels, npix, &got, err)) != CT_OK) break;
    if (got < npix) {
      st = ct_error_set(err, CT_ERR_PARSE,
                        "%s: truncated: the header promises %" PRIu32 " images of %" PRIu32
                        "x%" PRIu32 " pixels but the file ends in image %" PRIu32,
                        images->path, count, rows, cols, i);
      break;
    }
    if ((st = idx_read(labels, &label, 1, &got, err)) != CT_OK) break;
    if (got < 1) {
      st = ct_error_set(err, CT_ERR_PARSE,
                        "%s: truncated: the header promises %" PRIu32
                        " labels but the file ends at label %" PRIu32,
                        labels->path, count, i);
      break;
    }
    uint8_t *value;
    size_t vlen;
    if ((st = ct_datum_encode_raw(pixels, 1, (int)rows, (int)cols, label, &value, &vlen, err)) !=
        CT_OK)
      break;
    char key[32];
    int klen = snprintf(key, sizeof key, "%08" PRIu32, i);
    st = ct_tools_put_owned(db, key, (size_t)klen, &value, vlen, err);
    if (st == CT_OK && (i + 1) % CT_TOOLS_PROGRESS_EVERY_BULK == 0)
      LOG_INFO("Processed %" PRIu32 " files.", i + 1);
  }
  free(pixels);
  if (st != CT_OK) return st;
  if (count % CT_TOOLS_PROGRESS_EVERY_BULK != 0) LOG_INFO("Processed %" PRIu32 " files.", count);
  warn_trailing(images);
  warn_trailing(labels);
  return CT_OK;
}

ct_status ct_convert_mnist(const char *images_path, const char *labels_path, const char *db_path,
                           ct_db_backend backend, ct_error *err) {
  idx_file images = {0}, labels = {0};
  ct_tools_out_db out = {0};
  ct_status st;
  uint32_t ih[4], lh[2];
  if ((st = idx_open(&images, images_path, err)) != CT_OK) goto done;
  if ((st = idx_open(&labels, labels_path, err)) != CT_OK) goto done;
  if ((st = idx_read_header(&images, ih, 1, err)) != CT_OK) goto done;
  if ((st = check_magic(&images, ih[0], CT_MNIST_IMAGES_MAGIC, "image", err)) != CT_OK) goto done;
  if ((st = idx_read_header(&labels, lh, 1, err)) != CT_OK) goto done;
  if ((st = check_magic(&labels, lh[0], CT_MNIST_LABELS_MAGIC, "label", err)) != CT_OK) goto done;
  if ((st = idx_read_header(&images, ih + 1, 3, err)) != CT_OK) goto done;
  if ((st = idx_read_header(&labels, lh + 1, 1, err)) != CT_OK) goto done;
  uint32_t count = ih[1], rows = ih[2], cols = ih[3];
  if (count != lh[1]) {
    st = ct_error_set(err, CT_ERR_INVALID,
                      "%s has %" PRIu32 " images but %s has %" PRIu32 " labels", images_path,
                      count, labels_path, lh[1]);
    goto done;
  }
  if (rows == 0 || cols == 0 || (uint64_t)rows * cols > MAX_PIXELS) {
    st = ct_error_set(err, CT_ERR_INVALID, "%s: bad image size %" PRIu32 "x%" PRIu32,
                      images_path, rows, cols);
    goto done;
  }
  LOG_INFO("A total of %" PRIu32 " items.", count);
  LOG_INFO("Rows: %" PRIu32 " Cols: %" PRIu32, rows, cols);
  if ((st = ct_tools_db_create(&out, db_path, backend, err)) != CT_OK) goto done;
  st = write_records(&images, &labels, count, rows, cols, out.db, err);
  st = ct_tools_db_finish(&out, st, err);

done:
  idx_close(&images);
  idx_close(&labels);
  return st;
}
