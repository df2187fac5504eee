/* convert_mnist_data and convert_cifar_data: small idx and CIFAR batch files
 * written here, converted, and read back record by record against the bytes
 * Caffe's tools write. */
#include "testutil.h"

#include <stdio.h>
#include <zlib.h>

#include "tools/convert_cifar.h"
#include "tools/convert_mnist.h"
#include "tools_db_helpers.h"

#define N_IMAGES 5
#define ROWS 4
#define COLS 3

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* The test's MNIST-like data: pixel (i, k) = 7*i + 13*k mod 256, label 9 - i
 * (image 4 gets label 200 to check that labels are read unsigned). */
static uint8_t pixel(int i, int k) { return (uint8_t)(7 * i + 13 * k + 1); }
static int label_of(int i) { return i == 4 ? 200 : 9 - i; }

/* Builds the images idx file (header claims n_claimed images, holds n_held). */
static size_t make_images(uint8_t *buf, uint32_t magic, uint32_t n_claimed, int n_held) {
  put_be32(buf, magic);
  put_be32(buf + 4, n_claimed);
  put_be32(buf + 8, ROWS);
  put_be32(buf + 12, COLS);
  size_t n = 16;
  for (int i = 0; i < n_held; i++)
    for (int k = 0; k < ROWS * COLS; k++) buf[n++] = pixel(i, k);
  return n;
}

static size_t make_labels(uint8_t *buf, uint32_t magic, uint32_t count) {
  put_be32(buf, magic);
  put_be32(buf + 4, count);
  for (uint32_t i = 0; i < count; i++) buf[8 + i] = (uint8_t)label_of((int)i);
  return 8 + count;
}

static void write_gz(const char *path, const uint8_t *data, size_t len) {
  gzFile gz = gzopen(path, "wb");
  assert_non_null(gz);
  assert_int_equal(gzwrite(gz, data, (unsigned)len), (int)len);
  assert_int_equal(gzclose(gz), Z_OK);
}

/* Writes the idx pair under dir (gzipped when gz); paths into images/labels. */
static void write_pair(const char *dir, bool gz, char *images, char *labels) {
  uint8_t ibuf[16 + N_IMAGES * ROWS * COLS], lbuf[8 + N_IMAGES];
  size_t ilen = make_images(ibuf, CT_MNIST_IMAGES_MAGIC, N_IMAGES, N_IMAGES);
  size_t llen = make_labels(lbuf, CT_MNIST_LABELS_MAGIC, N_IMAGES);
  sprintf(images, "%s/images-idx3-ubyte%s", dir, gz ? ".gz" : "");
  sprintf(labels, "%s/labels-idx1-ubyte%s", dir, gz ? ".gz" : "");
  if (gz) {
    write_gz(images, ibuf, ilen);
    write_gz(labels, lbuf, llen);
  } else {
    tu_write_file(images, (const char *)ibuf, ilen);
    tu_write_file(labels, (const char *)lbuf, llen);
  }
}

/* Every record has Caffe's key and exactly Caffe's bytes. */
static void check_mnist_db(const char *db_path, ct_db_backend backend) {
  th_db d = th_db_read(db_path, backend);
  assert_int_equal(d.n, N_IMAGES);
  for (int i = 0; i < N_IMAGES; i++) {
    char key[16];
    snprintf(key, sizeof key, "%08d", i);
    assert_string_equal(d.rec[i].key, key);
    uint8_t pix[ROWS * COLS], want[ROWS * COLS + 32];
    for (int k = 0; k < ROWS * COLS; k++) pix[k] = pixel(i, k);
    size_t wlen = th_caffe_raw_datum(want, 1, ROWS, COLS, pix, label_of(i));
    assert_int_equal(d.rec[i].vlen, wlen);
    assert_memory_equal(d.rec[i].val, want, wlen);
  }
  th_db_free(&d);
}

static void test_mnist_plain_lmdb(void **state) {
  const char *dir = tu_tmpdir("tools_mnist_plain");
  char images[4096], labels[4096], db[4096];
  write_pair(dir, false, images, labels);
  snprintf(db, sizeof db, "%s/db", dir);
  ct_error err;
  if (ct_convert_mnist(images, labels, db, CT_DB_LMDB, &err) != CT_OK) fail_msg("%s", err.msg);
  check_mnist_db(db, CT_DB_LMDB);
}

static void test_mnist_gzip_leveldb(void **state) {
  const char *dir = tu_tmpdir("tools_mnist_gz");
  char images[4096], labels[4096], db[4096];
  write_pair(dir, true, images, labels);
  snprintf(db, sizeof db, "%s/db", dir);
  ct_error err;
  if (ct_convert_mnist(images, labels, db, CT_DB_LEVELDB, &err) != CT_OK) fail_msg("%s", err.msg);
  check_mnist_db(db, CT_DB_LEVELDB);
}

/* Runs a conversion expected to fail; checks the code, that the message has
 * `want`, and that no database was left behind. */
static void expect_mnist_failure(const char *images, const char *labels, const char *db,
                                 ct_status code, const char *want) {
  ct_error err;
  ct_status st = ct_convert_mnist(images, labels, db, CT_DB_LMDB, &err);
  assert_int_equal(st, code);
  if (!strstr(err.msg, want)) fail_msg("message '%s' lacks '%s'", err.msg, want);
  assert_false(th_exists(db));
}

static void test_mnist_errors(void **state) {
  const char *dir = tu_tmpdir("tools_mnist_errors");
  char images[4096], labels[4096], db[4096], path[4096], want[9000];
  write_pair(dir, false, images, labels);
  snprintf(db, sizeof db, "%s/db", dir);

  /* Swapped arguments: the image file's magic is a label file's. */
  snprintf(want, sizeof want,
           "%s: not an idx image file: magic number 0x00000801 (expected 0x00000803 = 2051; "
           "this is a label file: are the arguments swapped?)",
           labels);
  expect_mnist_failure(labels, images, db, CT_ERR_PARSE, want);

  /* A label file with a wrong magic. */
  uint8_t buf[16 + 8 * ROWS * COLS];
  size_t n = make_labels(buf, 0x12345678, N_IMAGES);
  snprintf(path, sizeof path, "%s/bad-labels", dir);
  tu_write_file(path, (const char *)buf, n);
  snprintf(want, sizeof want,
           "%s: not an idx label file: magic number 0x12345678 (expected 0x00000801 = 2049)", path);
  expect_mnist_failure(images, path, db, CT_ERR_PARSE, want);

  /* Counts that differ. */
  n = make_labels(buf, CT_MNIST_LABELS_MAGIC, N_IMAGES - 1);
  tu_write_file(path, (const char *)buf, n);
  snprintf(want, sizeof want, "%s has 5 images but %s has 4 labels", images, path);
  expect_mnist_failure(images, path, db, CT_ERR_INVALID, want);

  /* An image file that ends early: the partial database is removed. */
  n = make_images(buf, CT_MNIST_IMAGES_MAGIC, N_IMAGES, 3);
  snprintf(path, sizeof path, "%s/short-images", dir);
  tu_write_file(path, (const char *)buf, n);
  snprintf(want, sizeof want,
           "%s: truncated: the header promises 5 images of 4x3 pixels but the file ends in "
           "image 3",
           path);
  expect_mnist_failure(path, labels, db, CT_ERR_PARSE, want);

  /* A header cut short. */
  tu_write_file(path, (const char *)buf, 10);
  snprintf(want, sizeof want, "%s: truncated idx header (6 bytes)", path);
  expect_mnist_failure(path, labels, db, CT_ERR_PARSE, want);

  /* A missing file. */
  snprintf(path, sizeof path, "%s/nope.gz", dir);
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
  expect_mnist_failure(path, labels, db, CT_ERR_NOTFOUND, want);

  /* An existing database is not overwritten. */
  ct_error err;
  assert_int_equal(ct_convert_mnist(images, labels, db, CT_DB_LMDB, &err), CT_OK);
  assert_int_not_equal(ct_convert_mnist(images, labels, db, CT_DB_LMDB, &err), CT_OK);
  if (!strstr(err.msg, db)) fail_msg("message '%s' does not name %s", err.msg, db);
  check_mnist_db(db, CT_DB_LMDB);
}

/* ---------------------------------------------------------------- CIFAR */

/* Record r of batch b: label (b + r) % 10, pixels k -> (b * 31 + r * 7 + k) mod 256. */
static void cifar_record(int b, int r, uint8_t *rec) {
  rec[0] = (uint8_t)((b + r) % 10);
  for (int k = 0; k < CT_CIFAR_IMAGE_BYTES; k++) rec[1 + k] = (uint8_t)(b * 31 + r * 7 + k);
}

/* Writes the six batch files with per_batch records each. */
static void write_cifar(const char *dir, int per_batch) {
  uint8_t *buf = malloc((size_t)per_batch * CT_CIFAR_RECORD_BYTES);
  for (int b = 0; b < 6; b++) {
    for (int r = 0; r < per_batch; r++) cifar_record(b, r, buf + (size_t)r * CT_CIFAR_RECORD_BYTES);
    char path[4096];
    if (b < 5) snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, b + 1);
    else snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    tu_write_file(path, (const char *)buf, (size_t)per_batch * CT_CIFAR_RECORD_BYTES);
  }
  free(buf);
}

static void check_cifar_db(const char *path, int first_batch, int n_batches, int per_batch) {
  th_db d = th_db_read(path, CT_DB_LMDB);
  assert_int_equal(d.n, n_batches * per_batch);
  uint8_t rec[CT_CIFAR_RECORD_BYTES], want[CT_CIFAR_RECORD_BYTES + 32];
  for (int i = 0; i < (int)d.n; i++) {
    char key[16];
    snprintf(key, sizeof key, "%05d", i);
    assert_string_equal(d.rec[i].key, key);
    cifar_record(first_batch + i / per_batch, i % per_batch, rec);
    size_t wlen = th_caffe_raw_datum(want, 3, 32, 32, rec + 1, rec[0]);
    assert_int_equal(d.rec[i].vlen, wlen);
    assert_memory_equal(d.rec[i].val, want, wlen);
  }
  th_db_free(&d);
}

static void test_cifar(void **state) {
  const char *dir = tu_tmpdir("tools_cifar");
  write_cifar(dir, 3);
  ct_error err;
  if (ct_convert_cifar(dir, dir, CT_DB_LMDB, &err) != CT_OK) fail_msg("%s", err.msg);
  char path[4096];
  snprintf(path, sizeof path, "%s/cifar10_train_lmdb", dir);
  check_cifar_db(path, 0, 5, 3);
  snprintf(path, sizeof path, "%s/cifar10_test_lmdb", dir);
  check_cifar_db(path, 5, 1, 3);

  /* Both outputs exist now: a second run refuses before writing anything. */
  assert_int_equal(ct_convert_cifar(dir, dir, CT_DB_LMDB, &err), CT_ERR_INVALID);
  char want[9000];
  snprintf(want, sizeof want, "%s/cifar10_train_lmdb: the path already exists", dir);
  assert_string_equal(err.msg, want);
}

static void test_cifar_errors(void **state) {
  const char *dir = tu_tmpdir("tools_cifar_errors");
  char path[4096], want[9000], train[4096];
  snprintf(train, sizeof train, "%s/cifar10_train_leveldb", dir);
  ct_error err;

  write_cifar(dir, 2);
  snprintf(path, sizeof path, "%s/data_batch_3.bin", dir);
  remove(path);
  assert_int_equal(ct_convert_cifar(dir, dir, CT_DB_LEVELDB, &err), CT_ERR_NOTFOUND);
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
  assert_string_equal(err.msg, want);
  assert_false(th_exists(train));

  write_cifar(dir, 2);
  snprintf(path, sizeof path, "%s/test_batch.bin", dir);
  tu_write_file(path, "xyz", 3);
  assert_int_equal(ct_convert_cifar(dir, dir, CT_DB_LEVELDB, &err), CT_ERR_PARSE);
  snprintf(want, sizeof want,
           "%s: 3 bytes is not a whole number of 3073-byte records (1 label byte + 3x32x32 "
           "pixels)",
           path);
  assert_string_equal(err.msg, want);
  assert_false(th_exists(train));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mnist_plain_lmdb),
      cmocka_unit_test(test_mnist_gzip_leveldb),
      cmocka_unit_test(test_mnist_errors),
      cmocka_unit_test(test_cifar),
      cmocka_unit_test(test_cifar_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
