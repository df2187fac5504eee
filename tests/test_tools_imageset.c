/* convert_imageset: PNG and JPEG files written here, converted raw and
 * encoded, gray, resized and shuffled, and read back against the pixels the
 * decoder and resizer give for the same files. */
#include "testutil.h"

#include <stdio.h>
#include <sys/stat.h>

#include "core/rng.h"
#include "data/image.h"
#include "tools/convert_imageset.h"
#include "tools_db_helpers.h"

#define H 6
#define W 8

/* A colour (BGR) test image: a different ramp in each channel. */
static void make_color(ct_image *img, int seed) {
  ct_image_alloc(img, H, W, 3);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++)
      for (int c = 0; c < 3; c++)
        img->data[(y * W + x) * 3 + c] = (uint8_t)(seed * 17 + 30 * c + 9 * y + 23 * x);
}

static void write_image(const char *path, const ct_image *img, bool jpeg) {
  uint8_t *buf;
  size_t len;
  ct_error err;
  ct_status st = jpeg ? ct_image_encode_jpeg(img, 90, &buf, &len, &err)
                      : ct_image_encode_png(img, -1, &buf, &len, &err);
  if (st != CT_OK) fail_msg("%s", err.msg);
  tu_write_file(path, (const char *)buf, len);
  free(buf);
}

/* The test folder: img0.png (colour), img1.png (gray), img2.jpg (colour),
 * sub/img3.png (colour), and list.txt naming them and a missing file. */
static const char *setup_images(const char *name) {
  const char *dir = tu_tmpdir(name);
  char path[4096];
  ct_image img, gray;
  make_color(&img, 0);
  snprintf(path, sizeof path, "%s/img0.png", dir);
  write_image(path, &img, false);
  ct_image_free(&img);
  make_color(&img, 1);
  ct_image_to_gray(&img, &gray);
  snprintf(path, sizeof path, "%s/img1.png", dir);
  write_image(path, &gray, false);
  ct_image_free(&gray);
  ct_image_free(&img);
  make_color(&img, 2);
  snprintf(path, sizeof path, "%s/img2.jpg", dir);
  write_image(path, &img, true);
  ct_image_free(&img);
  snprintf(path, sizeof path, "%s/sub", dir);
  mkdir(path, 0777);
  make_color(&img, 3);
  snprintf(path, sizeof path, "%s/sub/img3.png", dir);
  write_image(path, &img, false);
  ct_image_free(&img);
  snprintf(path, sizeof path, "%s/list.txt", dir);
  const char *list = "img0.png 0\nimg1.png 1\nmissing.png 2\nimg2.jpg 3\nsub/img3.png 4\n";
  tu_write_file(path, list, strlen(list));
  return dir;
}

static const char *const k_names[] = {"img0.png", "img1.png", "img2.jpg", "sub/img3.png"};
static const int k_lines[] = {0, 1, 3, 4}; /* list positions (missing.png is line 2) */

static void convert(const char *dir, const ct_imageset_options *opt, const char *db,
                    ct_imageset_result *res) {
  char list[4096];
  snprintf(list, sizeof list, "%s/list.txt", dir);
  ct_error err;
  /* ROOT without a trailing '/': the folder gets one added. */
  if (ct_convert_imageset(dir, list, db, opt, res, &err) != CT_OK) fail_msg("%s", err.msg);
}

/* Decodes file dir/name as mode, resized to rh x rw when both are > 0. */
static void expected_pixels(const char *dir, const char *name, ct_color_mode mode, int rh, int rw,
                            ct_image *out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  ct_error err;
  ct_image img;
  if (ct_image_read_file(path, mode, &img, &err) != CT_OK) fail_msg("%s", err.msg);
  if (rh > 0 && rw > 0) {
    ct_image_resize_bilinear(&img, rh, rw, out);
    ct_image_free(&img);
  } else {
    *out = img;
  }
}

/* Checks a raw record against an image (HWC), i.e. Caffe's CHW layout. */
static void check_raw(const Caffe__Datum *d, const ct_image *want, int label) {
  assert_false(d->has_encoded && d->encoded);
  assert_int_equal(d->channels, want->c);
  assert_int_equal(d->height, want->h);
  assert_int_equal(d->width, want->w);
  assert_int_equal(d->label, label);
  size_t n = (size_t)want->c * want->h * want->w;
  assert_int_equal(d->data.len, n);
  uint8_t *chw = malloc(n);
  ct_image_hwc_to_chw(want->data, want->h, want->w, want->c, chw);
  assert_memory_equal(d->data.data, chw, n);
  free(chw);
}

static void check_keys(const th_db *d) {
  assert_int_equal(d->n, 4);
  for (int i = 0; i < 4; i++) {
    char key[64];
    snprintf(key, sizeof key, "%08d_%s", k_lines[i], k_names[i]);
    assert_string_equal(d->rec[i].key, key);
  }
}

static void test_list_file(void **state) {
  const char *dir = tu_tmpdir("tools_imageset_list");
  char path[4096], want[9000];
  snprintf(path, sizeof path, "%s/list.txt", dir);
  /* Blank and space-only lines are skipped; a line without a name is not. */
  const char *text = " 3\n";
  tu_write_file(path, text, strlen(text));
  ct_imageset_entry *e;
  size_t n;
  ct_error err;
  assert_int_equal(ct_imageset_read_list(path, &e, &n, &err), CT_ERR_PARSE);
  snprintf(want, sizeof want, "%s:1: expected 'FILE LABEL', got ' 3'", path);
  assert_string_equal(err.msg, want);

  text = "a b.png 3\r\n\n  \nc.png -2\nd.png 7";
  tu_write_file(path, text, strlen(text));
  if (ct_imageset_read_list(path, &e, &n, &err) != CT_OK) fail_msg("%s", err.msg);
  assert_int_equal(n, 3);
  assert_string_equal(e[0].name, "a b.png");
  assert_int_equal(e[0].label, 3);
  assert_string_equal(e[1].name, "c.png");
  assert_int_equal(e[1].label, -2);
  assert_string_equal(e[2].name, "d.png");
  assert_int_equal(e[2].label, 7);
  ct_imageset_entries_free(e, n);

  tu_write_file(path, "x.png 1\ny.png 7a\n", 17);
  assert_int_equal(ct_imageset_read_list(path, &e, &n, &err), CT_ERR_PARSE);
  snprintf(want, sizeof want, "%s:2: label '7a' is not an integer", path);
  assert_string_equal(err.msg, want);

  tu_write_file(path, "x.png\n", 6);
  assert_int_equal(ct_imageset_read_list(path, &e, &n, &err), CT_ERR_PARSE);
  snprintf(want, sizeof want, "%s:1: expected 'FILE LABEL', got 'x.png'", path);
  assert_string_equal(err.msg, want);

  snprintf(path, sizeof path, "%s/none.txt", dir);
  assert_int_equal(ct_imageset_read_list(path, &e, &n, &err), CT_ERR_NOTFOUND);
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
  assert_string_equal(err.msg, want);

  ct_image_format f;
  assert_int_equal(ct_imageset_parse_encode_type("JPEG", &f, &err), CT_OK);
  assert_int_equal(f, CT_IMAGE_JPEG);
  assert_int_equal(ct_imageset_parse_encode_type("bmp", &f, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "unknown encode_type 'bmp' (expected jpg, jpeg or png)");
}

static void test_raw_color(void **state) {
  const char *dir = setup_images("tools_imageset_raw");
  char db[4096];
  snprintf(db, sizeof db, "%s/db", dir);
  ct_imageset_options opt = {.backend = CT_DB_LMDB};
  ct_imageset_result res;
  convert(dir, &opt, db, &res);
  assert_int_equal(res.lines, 5);
  assert_int_equal(res.written, 4);
  assert_int_equal(res.skipped, 1);
  th_db d = th_db_read(db, CT_DB_LMDB);
  check_keys(&d);
  /* img0.png is lossless: the record is exactly the source image, CHW. */
  ct_image src;
  make_color(&src, 0);
  Caffe__Datum *dt = th_datum(&d, 0);
  check_raw(dt, &src, 0);
  caffe__datum__free_unpacked(dt, NULL);
  ct_image_free(&src);
  for (int i = 1; i < 4; i++) {
    ct_image want;
    expected_pixels(dir, k_names[i], CT_COLOR_FORCE_COLOR, 0, 0, &want);
    dt = th_datum(&d, (size_t)i);
    check_raw(dt, &want, k_lines[i]);
    caffe__datum__free_unpacked(dt, NULL);
    ct_image_free(&want);
  }
  th_db_free(&d);
}

static void test_raw_gray_resized(void **state) {
  const char *dir = setup_images("tools_imageset_gray");
  char db[4096];
  snprintf(db, sizeof db, "%s/db", dir);
  ct_imageset_options opt = {
      .backend = CT_DB_LEVELDB, .gray = true, .resize_width = 5, .resize_height = 4};
  convert(dir, &opt, db, NULL);
  th_db d = th_db_read(db, CT_DB_LEVELDB);
  check_keys(&d);
  for (int i = 0; i < 4; i++) {
    ct_image want;
    expected_pixels(dir, k_names[i], CT_COLOR_FORCE_GRAY, 4, 5, &want);
    assert_int_equal(want.c, 1);
    Caffe__Datum *dt = th_datum(&d, (size_t)i);
    check_raw(dt, &want, k_lines[i]);
    caffe__datum__free_unpacked(dt, NULL);
    ct_image_free(&want);
  }
  th_db_free(&d);
}

/* Decodes an encoded record natively and compares with want. */
static void check_encoded_pixels(const Caffe__Datum *dt, ct_image_format format,
                                 const ct_image *want) {
  assert_true(dt->has_encoded && dt->encoded);
  assert_int_equal(ct_image_sniff(dt->data.data, dt->data.len), format);
  ct_image got;
  ct_error err;
  if (ct_image_decode(dt->data.data, dt->data.len, CT_COLOR_NATIVE, &got, &err) != CT_OK)
    fail_msg("%s", err.msg);
  assert_int_equal(got.c, want->c);
  assert_int_equal(got.h, want->h);
  assert_int_equal(got.w, want->w);
  if (format == CT_IMAGE_PNG)
    assert_memory_equal(got.data, want->data, (size_t)got.c * got.h * got.w);
  ct_image_free(&got);
}

static void test_encoded(void **state) {
  const char *dir = setup_images("tools_imageset_encoded");
  char db[4096], path[4096];
  snprintf(db, sizeof db, "%s/db", dir);
  ct_imageset_options opt = {.backend = CT_DB_LMDB, .encoded = true};
  convert(dir, &opt, db, NULL);
  th_db d = th_db_read(db, CT_DB_LMDB);
  check_keys(&d);
  for (int i = 0; i < 4; i++) {
    Caffe__Datum *dt = th_datum(&d, (size_t)i);
    assert_true(dt->has_encoded && dt->encoded);
    assert_int_equal(dt->label, k_lines[i]);
    snprintf(path, sizeof path, "%s/%s", dir, k_names[i]);
    size_t flen;
    char *file = tu_read_file(path, &flen);
    if (i == 1) {
      /* img1.png is gray but colour was asked: compressed again, as colour. */
      ct_image want;
      expected_pixels(dir, k_names[i], CT_COLOR_FORCE_COLOR, 0, 0, &want);
      check_encoded_pixels(dt, CT_IMAGE_PNG, &want);
      ct_image_free(&want);
    } else {
      /* The file's bytes as they are. */
      assert_int_equal(dt->data.len, flen);
      assert_memory_equal(dt->data.data, file, flen);
    }
    free(file);
    caffe__datum__free_unpacked(dt, NULL);
  }
  th_db_free(&d);
}

static void test_encoded_gray_and_types(void **state) {
  const char *dir = setup_images("tools_imageset_encoded2");
  char db[4096];

  /* --gray --encoded: colour files are compressed again as gray; the gray
   * PNG is kept as it is. */
  snprintf(db, sizeof db, "%s/db_gray", dir);
  ct_imageset_options opt = {.backend = CT_DB_LMDB, .encoded = true, .gray = true};
  convert(dir, &opt, db, NULL);
  th_db d = th_db_read(db, CT_DB_LMDB);
  check_keys(&d);
  Caffe__Datum *dt = th_datum(&d, 0);
  ct_image want;
  expected_pixels(dir, "img0.png", CT_COLOR_FORCE_GRAY, 0, 0, &want);
  check_encoded_pixels(dt, CT_IMAGE_PNG, &want);
  ct_image_free(&want);
  caffe__datum__free_unpacked(dt, NULL);
  dt = th_datum(&d, 1);
  char path[4096];
  snprintf(path, sizeof path, "%s/img1.png", dir);
  size_t flen;
  char *file = tu_read_file(path, &flen);
  assert_int_equal(dt->data.len, flen);
  assert_memory_equal(dt->data.data, file, flen);
  free(file);
  caffe__datum__free_unpacked(dt, NULL);
  th_db_free(&d);

  /* --encode_type=jpg: every record becomes a JPEG of the image's shape. */
  snprintf(db, sizeof db, "%s/db_jpg", dir);
  ct_imageset_options opt2 = {.backend = CT_DB_LMDB, .encode_type = "jpg"};
  convert(dir, &opt2, db, NULL);
  d = th_db_read(db, CT_DB_LMDB);
  check_keys(&d);
  for (int i = 0; i < 4; i++) {
    dt = th_datum(&d, (size_t)i);
    expected_pixels(dir, k_names[i], CT_COLOR_FORCE_COLOR, 0, 0, &want);
    check_encoded_pixels(dt, CT_IMAGE_JPEG, &want);
    ct_image_free(&want);
    caffe__datum__free_unpacked(dt, NULL);
  }
  th_db_free(&d);

  /* --encode_type=png with a resize: lossless, so exactly the resized pixels. */
  snprintf(db, sizeof db, "%s/db_png", dir);
  ct_imageset_options opt3 = {
      .backend = CT_DB_LMDB, .encode_type = "png", .resize_width = 3, .resize_height = 5};
  convert(dir, &opt3, db, NULL);
  d = th_db_read(db, CT_DB_LMDB);
  check_keys(&d);
  for (int i = 0; i < 4; i++) {
    dt = th_datum(&d, (size_t)i);
    expected_pixels(dir, k_names[i], CT_COLOR_FORCE_COLOR, 5, 3, &want);
    check_encoded_pixels(dt, CT_IMAGE_PNG, &want);
    ct_image_free(&want);
    caffe__datum__free_unpacked(dt, NULL);
  }
  th_db_free(&d);
}

static void test_shuffle(void **state) {
  const char *dir = tu_tmpdir("tools_imageset_shuffle");
  enum { N = 12 };
  char path[4096], list[4096];
  ct_image img;
  make_color(&img, 5);
  size_t len = 0;
  for (int i = 0; i < N; i++) {
    snprintf(path, sizeof path, "%s/f%02d.png", dir, i);
    write_image(path, &img, false);
    len += (size_t)snprintf(list + len, sizeof list - len, "f%02d.png %d\n", i, 100 + i);
  }
  ct_image_free(&img);
  snprintf(path, sizeof path, "%s/list.txt", dir);
  tu_write_file(path, list, len);

  /* The documented order: Fisher-Yates from the end with ct_rng(seed). */
  int order[N];
  for (int i = 0; i < N; i++) order[i] = i;
  ct_rng rng;
  ct_rng_seed(&rng, 42);
  for (int i = N - 1; i > 0; i--) {
    int j = (int)ct_rng_below(&rng, (uint64_t)i + 1);
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  int identity = 1;
  for (int i = 0; i < N; i++) identity &= order[i] == i;
  assert_false(identity);

  char db[4096];
  snprintf(db, sizeof db, "%s/db", dir);
  ct_imageset_options opt = {.backend = CT_DB_LMDB, .shuffle = true, .seed = 42};
  ct_error err;
  if (ct_convert_imageset(dir, path, db, &opt, NULL, &err) != CT_OK) fail_msg("%s", err.msg);
  th_db d = th_db_read(db, CT_DB_LMDB);
  assert_int_equal(d.n, N);
  for (int i = 0; i < N; i++) {
    char key[64];
    snprintf(key, sizeof key, "%08d_f%02d.png", i, order[i]);
    assert_string_equal(d.rec[i].key, key);
    Caffe__Datum *dt = th_datum(&d, (size_t)i);
    assert_int_equal(dt->label, 100 + order[i]);
    caffe__datum__free_unpacked(dt, NULL);
  }
  th_db_free(&d);
}

static void test_check_size(void **state) {
  const char *dir = setup_images("tools_imageset_check_size");
  char path[4096], db[4096], want[9000];
  ct_image small;
  ct_image_alloc(&small, 4, 4, 3);
  snprintf(path, sizeof path, "%s/img2.jpg", dir);
  write_image(path, &small, true);
  ct_image_free(&small);
  snprintf(db, sizeof db, "%s/db", dir);
  char list[4096];
  snprintf(list, sizeof list, "%s/list.txt", dir);
  ct_imageset_options opt = {.backend = CT_DB_LMDB, .check_size = true};
  ct_error err;
  assert_int_equal(ct_convert_imageset(dir, list, db, &opt, NULL, &err), CT_ERR_INVALID);
  snprintf(want, sizeof want, "%s/img2.jpg: image is 3x4x4 but the first image was 3x6x8 (--check_size)",
           dir);
  assert_string_equal(err.msg, want);
  assert_false(th_exists(db));
  /* Resizing makes them agree. */
  opt.resize_height = opt.resize_width = 4;
  if (ct_convert_imageset(dir, list, db, &opt, NULL, &err) != CT_OK) fail_msg("%s", err.msg);
}

/* The command: a missing image is a warning naming it, and the run succeeds;
 * a missing list file is an error. */
static void test_cli(void **state) {
  const char *dir = setup_images("tools_imageset_cli");
  char cmd[16384], *out;
  snprintf(cmd, sizeof cmd, "'%s' convert_imageset --shuffle --seed=7 '%s/' '%s/list.txt' '%s/db'",
           tu_cortado_bin(), dir, dir, dir);
  int rc = tu_run(cmd, &out);
  char want[9000];
  snprintf(want, sizeof want, "] Could not open or find file %s/missing.png (", dir);
  if (rc != 0 || !strstr(out, want) || !strstr(out, "\nW") || !strstr(out, "Processed 4 files."))
    fail_msg("status %d, output:\n%s", rc, out);
  /* The warning is a glog WARNING line. */
  const char *at = strstr(out, want);
  while (at > out && at[-1] != '\n') at--;
  assert_int_equal(at[0], 'W');
  free(out);

  snprintf(cmd, sizeof cmd, "'%s' convert_imageset '%s/' '%s/nolist.txt' '%s/db2'",
           tu_cortado_bin(), dir, dir, dir);
  rc = tu_run(cmd, &out);
  snprintf(want, sizeof want,
           "cortado: error: %s/nolist.txt: cannot open: No such file or directory", dir);
  if (rc != 1 || !strstr(out, want)) fail_msg("status %d, output:\n%s", rc, out);
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_list_file),
      cmocka_unit_test(test_raw_color),
      cmocka_unit_test(test_raw_gray_resized),
      cmocka_unit_test(test_encoded),
      cmocka_unit_test(test_encoded_gray_and_types),
      cmocka_unit_test(test_shuffle),
      cmocka_unit_test(test_check_size),
      cmocka_unit_test(test_cli),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
