/* Datum records of every form (raw uint8, float_data, encoded JPEG and PNG,
 * gray and colour) written to real LMDB and LevelDB databases, read back by
 * index and decoded to pixels; the size and parse checks. */
#include <math.h>
#include <stdio.h>

#include "data/datum.h"
#include "data/db.h"
#include "testutil.h"

enum { FORM_RAW, FORM_FLOAT, FORM_JPEG, FORM_PNG, NFORMS };

/* Image of record k (BGR HWC), a smooth pattern. */
static void record_image(ct_image *img, int k, int c) {
  ct_image_alloc(img, 12, 10, c);
  for (int y = 0; y < 12; y++)
    for (int x = 0; x < 10; x++)
      for (int ch = 0; ch < c; ch++)
        img->data[((size_t)y * 10 + x) * c + ch] =
            (uint8_t)(120 + 50 * sin(0.3 * x + k + ch) + 40 * cos(0.25 * y + 2 * ch));
}

static void make_datum(int form, int k, int c, uint8_t **buf, size_t *len) {
  ct_image img;
  ct_error err;
  record_image(&img, k, c);
  if (form == FORM_RAW) {
    assert_int_equal(ct_datum_encode_image_raw(&img, k, buf, len, &err), CT_OK);
  } else if (form == FORM_FLOAT) {
    float *v = malloc(sizeof(float) * c * 120);
    uint8_t *chw = malloc((size_t)c * 120);
    ct_image_hwc_to_chw(img.data, 12, 10, c, chw);
    for (int i = 0; i < c * 120; i++) v[i] = chw[i] * 0.5f - 3.25f;
    assert_int_equal(ct_datum_encode_float(v, c, 12, 10, k, buf, len, &err), CT_OK);
    free(v);
    free(chw);
  } else {
    assert_int_equal(ct_datum_encode_image(&img, form == FORM_JPEG ? CT_IMAGE_JPEG : CT_IMAGE_PNG, 98, k,
                                           buf, len, &err),
                     CT_OK);
  }
  ct_image_free(&img);
}

static void test_datum_round_trip_every_form(void **state) {
  const char *dir = tu_tmpdir("data_datum_round_trip");
  ct_db_backend backends[2] = {CT_DB_LMDB, CT_DB_LEVELDB};
  for (int bi = 0; bi < 2; bi++)
    for (int c = 1; c <= 3; c += 2) {
      char path[4200];
      snprintf(path, sizeof path, "%s/%s_c%d", dir, ct_db_backend_name(backends[bi]), c);
      ct_db *db;
      ct_error err;
      assert_int_equal(ct_db_open(&db, path, backends[bi], CT_DB_NEW, &err), CT_OK);
      for (int k = 0; k < 2 * NFORMS; k++) {
        uint8_t *buf;
        size_t len;
        make_datum(k % NFORMS, k, c, &buf, &len);
        char key[16];
        snprintf(key, sizeof key, "%08d", k);
        assert_int_equal(ct_db_put(db, key, 8, buf, len, &err), CT_OK);
        free(buf);
      }
      assert_int_equal(ct_db_commit(db, &err), CT_OK);
      ct_db_close(db);

      assert_int_equal(ct_db_open(&db, path, backends[bi], CT_DB_READ, &err), CT_OK);
      ct_db_reader *r;
      assert_int_equal(ct_db_reader_open(db, &r, &err), CT_OK);
      for (int k = 2 * NFORMS - 1; k >= 0; k--) {
        int form = k % NFORMS;
        const void *val;
        size_t len;
        assert_int_equal(ct_db_read_index(db, r, (size_t)k, &val, &len, &err), CT_OK);
        Caffe__Datum *d;
        assert_int_equal(ct_datum_parse(val, len, "rec", &d, &err), CT_OK);
        assert_int_equal(d->label, k);
        assert_int_equal(d->encoded, form == FORM_JPEG || form == FORM_PNG);
        int dc, dh, dw;
        assert_int_equal(ct_datum_shape(d, CT_COLOR_NATIVE, &dc, &dh, &dw, "rec", &err), CT_OK);
        assert_int_equal(dc, c);
        assert_int_equal(dh, 12);
        assert_int_equal(dw, 10);
        float *px;
        assert_int_equal(ct_datum_to_float(d, CT_COLOR_NATIVE, &px, &dc, &dh, &dw, "rec", &err), CT_OK);
        ct_image want;
        record_image(&want, k, c);
        double worst = 0;
        for (int ch = 0; ch < c; ch++)
          for (int i = 0; i < 120; i++) {
            double ref = want.data[(size_t)i * c + ch];
            if (form == FORM_FLOAT) ref = ref * 0.5 - 3.25;
            double e = fabs(px[ch * 120 + i] - ref);
            if (e > worst) worst = e;
          }
        if (form == FORM_JPEG)
          assert_true(worst <= 12);
        else
          assert_true(worst == 0);
        /* encoded records follow force_color / force_gray */
        if (form == FORM_PNG) {
          int fc;
          assert_int_equal(ct_datum_shape(d, c == 1 ? CT_COLOR_FORCE_COLOR : CT_COLOR_FORCE_GRAY, &fc,
                                          &dh, &dw, "rec", &err),
                           CT_OK);
          assert_int_equal(fc, c == 1 ? 3 : 1);
        }
        free(px);
        ct_image_free(&want);
        ct_datum_free(d);
      }
      ct_db_reader_close(r);
      ct_db_close(db);
    }
}

static void test_datum_raw_layout_is_chw_bgr(void **state) {
  ct_image img;
  ct_image_alloc(&img, 1, 2, 3);
  uint8_t hwc[6] = {1, 2, 3, 4, 5, 6}; /* (B,G,R) of two pixels */
  memcpy(img.data, hwc, 6);
  uint8_t *buf;
  size_t len;
  ct_error err;
  assert_int_equal(ct_datum_encode_image_raw(&img, 7, &buf, &len, &err), CT_OK);
  Caffe__Datum *d;
  assert_int_equal(ct_datum_parse(buf, len, "x", &d, &err), CT_OK);
  assert_int_equal(d->channels, 3);
  assert_int_equal(d->height, 1);
  assert_int_equal(d->width, 2);
  uint8_t chw[6] = {1, 4, 2, 5, 3, 6};
  assert_int_equal(d->data.len, 6);
  assert_memory_equal(d->data.data, chw, 6);
  ct_datum_free(d);
  free(buf);
  ct_image_free(&img);
}

static void test_datum_checks(void **state) {
  const char *where = "record 00000012 of DB";
  ct_error err;
  Caffe__Datum d = CAFFE__DATUM__INIT;
  uint8_t bytes[784] = {0};
  d.has_channels = d.has_height = d.has_width = d.has_data = 1;
  d.channels = 1;
  d.height = 28;
  d.width = 28;
  d.data.data = bytes;
  d.data.len = 780;
  assert_int_equal(ct_datum_check(&d, where, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "record 00000012 of DB: data has 780 bytes for shape 1x28x28 = 784");
  d.data.len = 784;
  assert_int_equal(ct_datum_check(&d, where, &err), CT_OK);
  d.data.len = 0;
  float f[3] = {0};
  d.float_data = f;
  d.n_float_data = 3;
  assert_int_equal(ct_datum_check(&d, where, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "record 00000012 of DB: float_data has 3 values for shape 1x28x28 = 784");
  d.n_float_data = 0;
  assert_int_equal(ct_datum_check(&d, where, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "record 00000012 of DB: no pixels (data and float_data are both empty)");
  d.data.len = 784;
  d.channels = 0;
  assert_int_equal(ct_datum_check(&d, where, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "record 00000012 of DB: bad shape 0x28x28 (channels, height and width must be positive)");
  d.encoded = 1;
  d.has_encoded = 1;
  d.data.len = 0;
  assert_int_equal(ct_datum_check(&d, where, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "record 00000012 of DB: encoded but data is empty");
  /* an encoded record that is not an image */
  d.data.data = (uint8_t *)"not an image";
  d.data.len = 12;
  ct_image scratch = {0};
  ct_pixels px;
  assert_int_equal(ct_datum_pixels(&d, CT_COLOR_NATIVE, &scratch, &px, where, &err), CT_ERR_PARSE);
  assert_string_equal(err.msg,
                      "record 00000012 of DB: not a JPEG or PNG image (12 bytes, starting 6e 6f 74 20)");
  ct_image_free(&scratch);

  uint8_t junk[5] = {0x0a, 0xff, 0xff, 0xff, 0xff};
  Caffe__Datum *out;
  assert_int_equal(ct_datum_parse(junk, 5, where, &out, &err), CT_ERR_PARSE);
  assert_string_equal(err.msg,
                      "record 00000012 of DB: not a valid caffe.Datum (truncated or corrupt, 5 bytes)");
  char buf[64];
  assert_string_equal(ct_datum_where(buf, sizeof buf, "k\x01", 2, "/db"), "record k\\x01 of /db");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_datum_round_trip_every_form),
      cmocka_unit_test(test_datum_raw_layout_is_chw_bgr),
      cmocka_unit_test(test_datum_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
