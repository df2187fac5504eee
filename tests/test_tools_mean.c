/* compute_image_mean, db_info and make_synthetic_db on databases written
 * here record by record, checked against values computed in the test. */
#include "testutil.h"

#include <stdio.h>

#include "core/rng.h"
#include "data/image.h"
#include "tools/db_info.h"
#include "tools/image_mean.h"
#include "tools/synthetic_db.h"
#include "tools_db_helpers.h"

/* Writes n records (serialized Datums in vals) with keys %08d. */
static void write_db(const char *path, ct_db_backend backend, uint8_t **vals, size_t *lens,
                     size_t n) {
  ct_db *db;
  ct_error err;
  if (ct_db_open(&db, path, backend, CT_DB_NEW, &err) != CT_OK) fail_msg("%s", err.msg);
  for (size_t i = 0; i < n; i++) {
    char key[16];
    snprintf(key, sizeof key, "%08zu", i);
    if (ct_db_put(db, key, 8, vals[i], lens[i], &err) != CT_OK) fail_msg("%s", err.msg);
    free(vals[i]);
  }
  if (ct_db_commit(db, &err) != CT_OK) fail_msg("%s", err.msg);
  ct_db_close(db);
}

enum { C = 3, HH = 4, WW = 5, N = 7, DIM = C * HH * WW };

/* Pixel k of record i. */
static uint8_t px(size_t i, int k) { return (uint8_t)((i * 37 + (size_t)k * 11) % 256); }

static const char *make_raw_db(const char *dir) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/raw", dir);
  uint8_t *vals[N], chw[DIM];
  size_t lens[N];
  ct_error err;
  for (size_t i = 0; i < N; i++) {
    for (int k = 0; k < DIM; k++) chw[k] = px(i, k);
    if (ct_datum_encode_raw(chw, C, HH, WW, (int)(i % 3), &vals[i], &lens[i], &err) != CT_OK)
      fail_msg("%s", err.msg);
  }
  write_db(path, CT_DB_LMDB, vals, lens, N);
  return path;
}

static void test_mean_raw_exact(void **state) {
  const char *dir = tu_tmpdir("tools_mean_raw");
  const char *db = make_raw_db(dir);
  ct_image_mean m;
  ct_error err;
  if (ct_compute_image_mean(db, CT_DB_LMDB, &m, &err) != CT_OK) fail_msg("%s", err.msg);
  assert_int_equal(m.channels, C);
  assert_int_equal(m.height, HH);
  assert_int_equal(m.width, WW);
  assert_int_equal(m.count, N);
  float want[DIM];
  for (int k = 0; k < DIM; k++) {
    unsigned sum = 0;
    for (size_t i = 0; i < N; i++) sum += px(i, k);
    want[k] = (float)sum / (float)N; /* Caffe's float division */
    if (m.data[k] != want[k]) fail_msg("mean[%d] = %.9g, want %.9g", k, m.data[k], want[k]);
  }
  for (int c = 0; c < C; c++) {
    double s = 0;
    for (int k = 0; k < HH * WW; k++) s += want[c * HH * WW + k];
    assert_float_equal(ct_image_mean_channel(&m, c), s / (HH * WW), 1e-9);
  }

  /* The binaryproto: num 1 and the legacy shape fields, the data in CHW. */
  char path[4096];
  snprintf(path, sizeof path, "%s/mean.binaryproto", dir);
  if (ct_image_mean_write_binaryproto(&m, path, &err) != CT_OK) fail_msg("%s", err.msg);
  size_t len;
  char *bytes = tu_read_file(path, &len);
  assert_non_null(bytes);
  Caffe__BlobProto *b = caffe__blob_proto__unpack(NULL, len, (const uint8_t *)bytes);
  assert_non_null(b);
  assert_true(b->has_num && b->has_channels && b->has_height && b->has_width);
  assert_int_equal(b->num, 1);
  assert_int_equal(b->channels, C);
  assert_int_equal(b->height, HH);
  assert_int_equal(b->width, WW);
  assert_null(b->shape);
  assert_int_equal(b->n_data, DIM);
  assert_memory_equal(b->data, want, sizeof want);
  /* Caffe's field order: num, channels, height, width, then packed data
   * (240 bytes: the varint f0 01). */
  const uint8_t head[] = {0x08, 1, 0x10, C, 0x18, HH, 0x20, WW, 0x2a, 0xf0, 0x01};
  assert_memory_equal(bytes, head, sizeof head);
  assert_int_equal(len, sizeof head + DIM * 4);
  caffe__blob_proto__free_unpacked(b, NULL);
  free(bytes);
  ct_image_mean_free(&m);
}

static void test_mean_encoded_and_float(void **state) {
  const char *dir = tu_tmpdir("tools_mean_encoded");
  char path[4096];
  snprintf(path, sizeof path, "%s/mixed", dir);
  /* Two PNG records (lossless, so their pixels are known) and one float. */
  uint8_t *vals[3];
  size_t lens[3];
  ct_error err;
  ct_image img[2];
  for (int r = 0; r < 2; r++) {
    ct_image_alloc(&img[r], HH, WW, C);
    for (int k = 0; k < DIM; k++) img[r].data[k] = (uint8_t)(r * 50 + k * 3);
    if (ct_datum_encode_image(&img[r], CT_IMAGE_PNG, 0, r, &vals[r], &lens[r], &err) != CT_OK)
      fail_msg("%s", err.msg);
  }
  float fl[DIM];
  for (int k = 0; k < DIM; k++) fl[k] = 0.25f * k;
  assert_int_equal(ct_datum_encode_float(fl, C, HH, WW, 2, &vals[2], &lens[2], &err), CT_OK);
  write_db(path, CT_DB_LEVELDB, vals, lens, 3);

  ct_image_mean m;
  if (ct_compute_image_mean(path, CT_DB_LEVELDB, &m, &err) != CT_OK) fail_msg("%s", err.msg);
  assert_int_equal(m.count, 3);
  uint8_t chw[2][DIM];
  for (int r = 0; r < 2; r++) ct_image_hwc_to_chw(img[r].data, HH, WW, C, chw[r]);
  for (int k = 0; k < DIM; k++) {
    float want = (float)((double)chw[0][k] + chw[1][k] + fl[k]) / 3.0f;
    if (m.data[k] != want) fail_msg("mean[%d] = %.9g, want %.9g", k, m.data[k], want);
  }
  ct_image_mean_free(&m);
  ct_image_free(&img[0]);
  ct_image_free(&img[1]);
}

static void test_mean_errors(void **state) {
  const char *dir = tu_tmpdir("tools_mean_errors");
  char path[4096], want[9000];
  ct_error err;
  ct_image_mean m;

  snprintf(path, sizeof path, "%s/empty", dir);
  write_db(path, CT_DB_LMDB, NULL, NULL, 0);
  assert_int_equal(ct_compute_image_mean(path, CT_DB_LMDB, &m, &err), CT_ERR_INVALID);
  snprintf(want, sizeof want, "%s: the database is empty", path);
  assert_string_equal(err.msg, want);

  snprintf(path, sizeof path, "%s/shapes", dir);
  uint8_t *vals[2], pix[DIM] = {0};
  size_t lens[2];
  assert_int_equal(ct_datum_encode_raw(pix, C, HH, WW, 0, &vals[0], &lens[0], &err), CT_OK);
  assert_int_equal(ct_datum_encode_raw(pix, C, WW, HH, 0, &vals[1], &lens[1], &err), CT_OK);
  write_db(path, CT_DB_LMDB, vals, lens, 2);
  assert_int_equal(ct_compute_image_mean(path, CT_DB_LMDB, &m, &err), CT_ERR_INVALID);
  snprintf(want, sizeof want,
           "record 00000001 of %s: shape 3x5x4 differs from the first record's 3x4x5", path);
  assert_string_equal(err.msg, want);

  snprintf(path, sizeof path, "%s/missing", dir);
  assert_int_not_equal(ct_compute_image_mean(path, CT_DB_LMDB, &m, &err), CT_OK);
  if (!strstr(err.msg, path)) fail_msg("message '%s' does not name %s", err.msg, path);
}

/* ---------------------------------------------------------------- db_info */

static void test_db_info(void **state) {
  const char *dir = tu_tmpdir("tools_db_info");
  const char *db = make_raw_db(dir);
  ct_db_info info;
  ct_error err;
  if (ct_db_info_scan(db, CT_DB_LMDB, 0, &info, &err) != CT_OK) fail_msg("%s", err.msg);
  assert_int_equal(info.records, N);
  assert_int_equal(info.scanned, N);
  assert_int_equal(info.n_raw, N);
  assert_int_equal(info.n_jpeg + info.n_png + info.n_float + info.n_invalid, 0);
  assert_int_equal(info.n_shapes, 1);
  assert_int_equal(info.shapes[0].c, C);
  assert_int_equal(info.shapes[0].h, HH);
  assert_int_equal(info.shapes[0].w, WW);
  assert_int_equal(info.shapes[0].count, N);
  assert_int_equal(info.label_lo, 0);
  assert_int_equal(info.label_hi, 2);
  assert_int_equal(info.label_counts[0], 3); /* records 0, 3, 6 */
  assert_int_equal(info.label_counts[1], 2);
  assert_int_equal(info.label_counts[2], 2);
  assert_string_equal(info.first_keys[0], "00000000");
  assert_string_equal(info.last_key, "00000006");
  ct_db_info_free(&info);

  /* --max_records reads only the first ones. */
  if (ct_db_info_scan(db, CT_DB_LMDB, 2, &info, &err) != CT_OK) fail_msg("%s", err.msg);
  assert_int_equal(info.records, N);
  assert_int_equal(info.scanned, 2);
  assert_int_equal(info.n_raw, 2);
  ct_db_info_free(&info);

  char path[4096];
  snprintf(path, sizeof path, "%s/info.txt", dir);
  FILE *f = fopen(path, "w");
  if (ct_db_info_print(db, CT_DB_LMDB, 0, 2, f, &err) != CT_OK) fail_msg("%s", err.msg);
  fclose(f);
  char *text = tu_read_file(path, NULL);
  char want[9000];
  snprintf(want, sizeof want,
           "db: %s (lmdb)\n"
           "records: 7\n"
           "keys: 00000000, 00000001, 00000002, ..., 00000006\n"
           "scanned: 7\n"
           "storage: raw 7\n"
           "shape (CxHxW): 3x4x5 7\n"
           "labels: 3 distinct, 0..2\n"
           "  0: 3\n"
           "  1: 2\n"
           "  ... (1 more labels)\n",
           db);
  assert_string_equal(text, want);
  free(text);
}

static void test_db_info_mixed(void **state) {
  const char *dir = tu_tmpdir("tools_db_info_mixed");
  char path[4096];
  snprintf(path, sizeof path, "%s/mixed", dir);
  uint8_t *vals[4];
  size_t lens[4];
  ct_error err;
  ct_image img;
  ct_image_alloc(&img, 6, 7, 1);
  assert_int_equal(ct_datum_encode_image(&img, CT_IMAGE_JPEG, 90, -5, &vals[0], &lens[0], &err),
                   CT_OK);
  assert_int_equal(ct_datum_encode_image(&img, CT_IMAGE_PNG, 0, 1000, &vals[1], &lens[1], &err),
                   CT_OK);
  ct_image_free(&img);
  float fl[2] = {1, 2};
  assert_int_equal(ct_datum_encode_float(fl, 1, 1, 2, 7, &vals[2], &lens[2], &err), CT_OK);
  vals[3] = (uint8_t *)strdup("\xff\xff\xff");
  lens[3] = 3;
  write_db(path, CT_DB_LMDB, vals, lens, 4);

  ct_db_info info;
  if (ct_db_info_scan(path, CT_DB_LMDB, 0, &info, &err) != CT_OK) fail_msg("%s", err.msg);
  assert_int_equal(info.n_jpeg, 1);
  assert_int_equal(info.n_png, 1);
  assert_int_equal(info.n_float, 1);
  assert_int_equal(info.n_invalid, 1);
  assert_non_null(strstr(info.first_error, "record 00000003 of "));
  assert_int_equal(info.n_shapes, 2);
  assert_int_equal(info.shapes[0].c * 100 + info.shapes[0].h * 10 + info.shapes[0].w, 167);
  assert_int_equal(info.shapes[0].count, 2);
  assert_int_equal(info.shapes[1].c * 100 + info.shapes[1].h * 10 + info.shapes[1].w, 112);
  assert_int_equal(info.label_lo, -5);
  assert_int_equal(info.label_hi, 1000);
  assert_int_equal(info.label_counts[0], 1);
  assert_int_equal(info.label_counts[12], 1);
  assert_int_equal(info.label_counts[1005], 1);
  ct_db_info_free(&info);
}

/* ---------------------------------------------------------------- synthetic */

static void test_synthetic(void **state) {
  const char *dir = tu_tmpdir("tools_synthetic");
  char a[4096], b[4096], c[4096];
  snprintf(a, sizeof a, "%s/a", dir);
  snprintf(b, sizeof b, "%s/b", dir);
  snprintf(c, sizeof c, "%s/c", dir);
  ct_synthetic_options opt = {.backend = CT_DB_LMDB, .num = 40, .channels = 3, .height = 32,
                              .width = 24, .labels = 4, .format = CT_SYNTHETIC_RAW, .seed = 9};
  ct_error err;
  if (ct_make_synthetic_db(a, &opt, &err) != CT_OK) fail_msg("%s", err.msg);
  if (ct_make_synthetic_db(b, &opt, &err) != CT_OK) fail_msg("%s", err.msg);
  opt.seed = 10;
  if (ct_make_synthetic_db(c, &opt, &err) != CT_OK) fail_msg("%s", err.msg);
  th_db da = th_db_read(a, CT_DB_LMDB), db = th_db_read(b, CT_DB_LMDB), dc = th_db_read(c, CT_DB_LMDB);
  assert_int_equal(da.n, 40);
  assert_int_equal(db.n, 40);
  int seen[4] = {0}, differ = 0;
  for (size_t i = 0; i < da.n; i++) {
    char key[32];
    snprintf(key, sizeof key, "%08zu", i);
    assert_string_equal(da.rec[i].key, key);
    /* The same seed gives the same bytes; another seed other ones. */
    assert_int_equal(da.rec[i].vlen, db.rec[i].vlen);
    assert_memory_equal(da.rec[i].val, db.rec[i].val, da.rec[i].vlen);
    differ |= da.rec[i].vlen != dc.rec[i].vlen ||
              memcmp(da.rec[i].val, dc.rec[i].val, da.rec[i].vlen) != 0;
    Caffe__Datum *d = th_datum(&da, i);
    assert_int_equal(d->channels, 3);
    assert_int_equal(d->height, 32);
    assert_int_equal(d->width, 24);
    assert_int_equal(d->data.len, 3 * 32 * 24);
    assert_true(d->label >= 0 && d->label < 4);
    seen[d->label]++;
    /* Not flat: the pixels spread over a good part of 0..255. */
    int lo = 255, hi = 0;
    for (size_t k = 0; k < d->data.len; k++) {
      lo = d->data.data[k] < lo ? d->data.data[k] : lo;
      hi = d->data.data[k] > hi ? d->data.data[k] : hi;
    }
    assert_true(hi - lo > 64);
    caffe__datum__free_unpacked(d, NULL);
  }
  assert_true(differ);
  for (int l = 0; l < 4; l++) assert_true(seen[l] > 0);
  th_db_free(&da);
  th_db_free(&db);
  th_db_free(&dc);
}

static void test_synthetic_encoded(void **state) {
  const char *dir = tu_tmpdir("tools_synthetic_jpeg");
  char path[4096];
  snprintf(path, sizeof path, "%s/jpg", dir);
  ct_synthetic_options opt = {.backend = CT_DB_LEVELDB, .num = 12, .channels = 3, .height = 64,
                              .width = 64, .labels = 1000, .format = CT_SYNTHETIC_JPEG,
                              .quality = 90, .seed = 3};
  ct_error err;
  if (ct_make_synthetic_db(path, &opt, &err) != CT_OK) fail_msg("%s", err.msg);
  th_db d = th_db_read(path, CT_DB_LEVELDB);
  assert_int_equal(d.n, 12);
  size_t total = 0;
  for (size_t i = 0; i < d.n; i++) {
    Caffe__Datum *dt = th_datum(&d, i);
    assert_true(dt->encoded);
    assert_int_equal(ct_image_sniff(dt->data.data, dt->data.len), CT_IMAGE_JPEG);
    int h, w, c;
    assert_int_equal(ct_image_probe(dt->data.data, dt->data.len, &h, &w, &c, &err), CT_OK);
    assert_int_equal(h * 10000 + w * 10 + c, 64 * 10000 + 64 * 10 + 3);
    total += dt->data.len;
    caffe__datum__free_unpacked(dt, NULL);
  }
  /* Photograph-like sizes: well under the 12288 raw bytes, well over a flat
   * image's few hundred. */
  double mean = (double)total / (double)d.n;
  if (mean < 1000 || mean > 8000) fail_msg("mean JPEG size %.0f bytes", mean);
  th_db_free(&d);

  snprintf(path, sizeof path, "%s/bad", dir);
  opt.channels = 4;
  assert_int_equal(ct_make_synthetic_db(path, &opt, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "jpg images have 1 or 3 channels, not 4");
  assert_false(th_exists(path));

  int cc, hh, ww;
  assert_int_equal(ct_parse_shape_chw("3,224,225", "--shape", &cc, &hh, &ww, &err), CT_OK);
  assert_int_equal(cc * 1000000 + hh * 1000 + ww, 3224225);
  assert_int_equal(ct_parse_shape_chw("3,x,4", "--shape", &cc, &hh, &ww, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "bad shape '3,x,4' for --shape (expected C,H,W with positive integers)");
  assert_int_equal(ct_parse_shape_chw("3,0,4", "--shape", &cc, &hh, &ww, &err), CT_ERR_INVALID);
  assert_int_equal(ct_parse_shape_chw("3,4", "--shape", &cc, &hh, &ww, &err), CT_ERR_INVALID);
  assert_int_equal(ct_parse_shape_chw("3,4,5,", "--shape", &cc, &hh, &ww, &err), CT_ERR_INVALID);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mean_raw_exact),
      cmocka_unit_test(test_mean_encoded_and_float),
      cmocka_unit_test(test_mean_errors),
      cmocka_unit_test(test_db_info),
      cmocka_unit_test(test_db_info_mixed),
      cmocka_unit_test(test_synthetic),
      cmocka_unit_test(test_synthetic_encoded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
