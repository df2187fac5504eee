#include "tools/convert_cifar.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"
#include "core/log.h"
#include "data/datum.h"
#include "tools/tools_common.h"

#define N_BATCHES (CT_CIFAR_TRAIN_BATCHES + 1) /* the training batches, then the test batch */

typedef struct batch_file {
  char path[4096];
  size_t records;
} batch_file;

/* Fills in batch i's path and record count, checking the file's size. */
static ct_status probe_batch(const char *input_folder, int i, batch_file *b, ct_error *err) {
  if (i < CT_CIFAR_TRAIN_BATCHES)
    snprintf(b->path, sizeof b->path, "%s/data_batch_%d.bin", input_folder, i + 1);
  else
    snprintf(b->path, sizeof b->path, "%s/test_batch.bin", input_folder);
  struct stat st;
  if (stat(b->path, &st) != 0) {
    int e = errno;
    return ct_error_set(err, e == ENOENT ? CT_ERR_NOTFOUND : CT_ERR_IO, "%s: cannot open: %s",
                        b->path, strerror(e));
  }
  if (!S_ISREG(st.st_mode))
    return ct_error_set(err, CT_ERR_IO, "%s: not a regular file", b->path);
  size_t size = (size_t)st.st_size;
  if (size == 0 || size % CT_CIFAR_RECORD_BYTES != 0)
    return ct_error_set(err, CT_ERR_PARSE,
                        "%s: %zu bytes is not a whole number of %d-byte records "
                        "(1 label byte + 3x32x32 pixels)",
                        b->path, size, CT_CIFAR_RECORD_BYTES);
  b->records = size / CT_CIFAR_RECORD_BYTES;
  return CT_OK;
}

/* Appends the records of one batch file to db, numbering them from *index. */
static ct_status copy_batch(const batch_file *b, ct_db *db, size_t *index, ct_error *err) {
  FILE *f = fopen(b->path, "rb");
  if (!f) return ct_error_set(err, CT_ERR_IO, "%s: cannot open: %s", b->path, strerror(errno));
  uint8_t rec[CT_CIFAR_RECORD_BYTES];
  ct_status st = CT_OK;
  for (size_t i = 0; i < b->records && st == CT_OK; i++) {
    if (fread(rec, 1, sizeof rec, f) != sizeof rec) {
      st = ct_error_set(err, CT_ERR_IO, "%s: read failed at record %zu: %s", b->path, i,
                        ferror(f) ? strerror(errno) : "the file got shorter");
      break;
    }
    uint8_t *value;
    size_t vlen;
    st = ct_datum_encode_raw(rec + 1, 3, CT_CIFAR_SIDE, CT_CIFAR_SIDE, rec[0], &value, &vlen, err);
    if (st != CT_OK) break;
    char key[32];
    int klen = snprintf(key, sizeof key, "%05zu", *index);
    st = ct_tools_put_owned(db, key, (size_t)klen, &value, vlen, err);
    if (st == CT_OK && ++*index % CT_TOOLS_PROGRESS_EVERY_BULK == 0)
      LOG_INFO("Processed %zu files.", *index);
  }
  fclose(f);
  return st;
}

/* Writes batches [first, last) into a new database at db_path. */
static ct_status write_db(const char *db_path, ct_db_backend backend, const batch_file *batches,
                          int first, int last, ct_error *err) {
  ct_tools_out_db out;
  CT_TRY(ct_tools_db_create(&out, db_path, backend, err));
  size_t index = 0;
  ct_status st = CT_OK;
  for (int i = first; i < last && st == CT_OK; i++) {
    if (i < CT_CIFAR_TRAIN_BATCHES) LOG_INFO("Training Batch %d", i + 1);
    st = copy_batch(&batches[i], out.db, &index, err);
  }
  st = ct_tools_db_finish(&out, st, err);
  if (st == CT_OK && index % CT_TOOLS_PROGRESS_EVERY_BULK != 0)
    LOG_INFO("Processed %zu files.", index);
  return st;
}

ct_status ct_convert_cifar(const char *input_folder, const char *output_folder,
                           ct_db_backend backend, ct_error *err) {
  batch_file *batches = ct_xcalloc(N_BATCHES, sizeof *batches);
  char train_path[4096], test_path[4096];
  snprintf(train_path, sizeof train_path, "%s/cifar10_train_%s", output_folder,
           ct_db_backend_name(backend));
  snprintf(test_path, sizeof test_path, "%s/cifar10_test_%s", output_folder,
           ct_db_backend_name(backend));
  ct_status st = CT_OK;
  for (int i = 0; i < N_BATCHES && st == CT_OK; i++)
    st = probe_batch(input_folder, i, &batches[i], err);
  const char *outs[2] = {train_path, test_path};
  for (int i = 0; i < 2 && st == CT_OK; i++) {
    struct stat sb;
    if (lstat(outs[i], &sb) == 0)
      st = ct_error_set(err, CT_ERR_INVALID, "%s: the path already exists", outs[i]);
  }
  if (st == CT_OK) {
    LOG_INFO("Writing Training data");
    st = write_db(train_path, backend, batches, 0, CT_CIFAR_TRAIN_BATCHES, err);
  }
  if (st == CT_OK) {
    LOG_INFO("Writing Testing data");
    st = write_db(test_path, backend, batches, CT_CIFAR_TRAIN_BATCHES, N_BATCHES, err);
    if (st != CT_OK) ct_file_remove_tree(train_path);
  }
  free(batches);
  return st;
}
