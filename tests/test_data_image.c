/* JPEG/PNG decode and encode, BGR channel order, gray conversion, OpenCV-
 * style bilinear resize and layout changes. */
#include <math.h>
#include <stdio.h>

#include <jpeglib.h>
#include <png.h>

#include "data/image.h"
#include "testutil.h"

/* A smooth colour pattern (JPEG-friendly), HWC in BGR order. */
static void pattern(ct_image *img, int h, int w, int c) {
  ct_image_alloc(img, h, w, c);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int k = 0; k < c; k++)
        img->data[((size_t)y * w + x) * c + k] =
            (uint8_t)(128 + 60 * sin(x * 0.21 + k) + 50 * cos(y * 0.17 + 2 * k));
}

/* A PNG written by libpng directly from RGB rows, independent of our encoder. */
static uint8_t *png_rgb_file(const uint8_t *rgb, int h, int w, size_t *len) {
  png_image im;
  memset(&im, 0, sizeof im);
  im.version = PNG_IMAGE_VERSION;
  im.width = (png_uint_32)w;
  im.height = (png_uint_32)h;
  im.format = PNG_FORMAT_RGB;
  png_alloc_size_t n = 0;
  assert_true(png_image_write_get_memory_size(im, n, 0, rgb, 0, NULL));
  uint8_t *buf = malloc(n);
  assert_true(png_image_write_to_memory(&im, buf, &n, 0, rgb, 0, NULL));
  *len = n;
  return buf;
}

/* A JPEG written by libjpeg directly from RGB rows. */
static uint8_t *jpeg_rgb_file(const uint8_t *rgb, int h, int w, size_t *len) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr e;
  c.err = jpeg_std_error(&e);
  jpeg_create_compress(&c);
  unsigned char *out = NULL;
  unsigned long n = 0;
  jpeg_mem_dest(&c, &out, &n);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 100, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * w * 3);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  *len = n;
  return out;
}

static void test_png_round_trip_exact(void **state) {
  for (int c = 1; c <= 3; c += 2) {
    ct_image img, back;
    pattern(&img, 13, 17, c);
    uint8_t *buf;
    size_t len;
    ct_error err;
    assert_int_equal(ct_image_encode_png(&img, 6, &buf, &len, &err), CT_OK);
    assert_int_equal(ct_image_sniff(buf, len), CT_IMAGE_PNG);
    int h, w, cc;
    assert_int_equal(ct_image_probe(buf, len, &h, &w, &cc, &err), CT_OK);
    assert_int_equal(h, 13);
    assert_int_equal(w, 17);
    assert_int_equal(cc, c);
    assert_int_equal(ct_image_decode(buf, len, CT_COLOR_NATIVE, &back, &err), CT_OK);
    assert_int_equal(back.c, c);
    assert_memory_equal(back.data, img.data, (size_t)13 * 17 * c);
    ct_image_free(&back);
    free(buf);
    ct_image_free(&img);
  }
}

static void test_jpeg_round_trip_within_tolerance(void **state) {
  for (int c = 1; c <= 3; c += 2) {
    ct_image img, back;
    pattern(&img, 32, 48, c);
    uint8_t *buf;
    size_t len;
    ct_error err;
    assert_int_equal(ct_image_encode_jpeg(&img, 95, &buf, &len, &err), CT_OK);
    assert_int_equal(ct_image_sniff(buf, len), CT_IMAGE_JPEG);
    assert_int_equal(ct_image_decode(buf, len, CT_COLOR_NATIVE, &back, &err), CT_OK);
    assert_int_equal(back.h, 32);
    assert_int_equal(back.w, 48);
    assert_int_equal(back.c, c);
    double sum = 0;
    int worst = 0;
    size_t n = (size_t)32 * 48 * c;
    for (size_t i = 0; i < n; i++) {
      int d = abs((int)back.data[i] - (int)img.data[i]);
      sum += d;
      if (d > worst) worst = d;
    }
    assert_true(sum / n < 2.0);
    assert_true(worst <= 16);
    ct_image_free(&back);
    free(buf);
    ct_image_free(&img);
  }
}

/* Files written in RGB by the codecs themselves decode to BGR. */
static void test_decode_gives_bgr(void **state) {
  uint8_t rgb[2 * 8 * 3];
  for (int i = 0; i < 16; i++) {
    rgb[3 * i] = i < 8 ? 250 : 10;    /* top row red, bottom row blue */
    rgb[3 * i + 1] = 30;
    rgb[3 * i + 2] = i < 8 ? 10 : 250;
  }
  size_t len;
  uint8_t *png = png_rgb_file(rgb, 2, 8, &len);
  ct_image img;
  ct_error err;
  assert_int_equal(ct_image_decode(png, len, CT_COLOR_NATIVE, &img, &err), CT_OK);
  assert_int_equal(img.c, 3);
  for (int i = 0; i < 16; i++) {
    assert_int_equal(img.data[3 * i], rgb[3 * i + 2]);
    assert_int_equal(img.data[3 * i + 1], rgb[3 * i + 1]);
    assert_int_equal(img.data[3 * i + 2], rgb[3 * i]);
  }
  ct_image_free(&img);
  /* gray from colour: luma 0.299 R + 0.587 G + 0.114 B (within rounding) */
  assert_int_equal(ct_image_decode(png, len, CT_COLOR_FORCE_GRAY, &img, &err), CT_OK);
  assert_int_equal(img.c, 1);
  assert_true(abs(img.data[0] - (int)lround(0.299 * 250 + 0.587 * 30 + 0.114 * 10)) <= 1);
  assert_true(abs(img.data[15] - (int)lround(0.299 * 10 + 0.587 * 30 + 0.114 * 250)) <= 1);
  ct_image_free(&img);
  free(png);

  uint8_t big[16 * 16 * 3];
  for (int i = 0; i < 256; i++) {
    big[3 * i] = 220;
    big[3 * i + 1] = 40;
    big[3 * i + 2] = 90;
  }
  uint8_t *jpg = jpeg_rgb_file(big, 16, 16, &len);
  assert_int_equal(ct_image_decode(jpg, len, CT_COLOR_NATIVE, &img, &err), CT_OK);
  assert_int_equal(img.c, 3);
  for (int i = 0; i < 256; i++) {
    assert_true(abs(img.data[3 * i] - 90) <= 3);
    assert_true(abs(img.data[3 * i + 1] - 40) <= 3);
    assert_true(abs(img.data[3 * i + 2] - 220) <= 3);
  }
  ct_image_free(&img);
  /* force_color of a gray image replicates it */
  ct_image gray, col;
  pattern(&gray, 4, 5, 1);
  uint8_t *buf;
  assert_int_equal(ct_image_encode_png(&gray, -1, &buf, &len, &err), CT_OK);
  assert_int_equal(ct_image_decode(buf, len, CT_COLOR_FORCE_COLOR, &col, &err), CT_OK);
  assert_int_equal(col.c, 3);
  for (int i = 0; i < 20; i++)
    for (int k = 0; k < 3; k++) assert_int_equal(col.data[3 * i + k], gray.data[i]);
  ct_image_free(&col);
  ct_image_free(&gray);
  free(buf);
  free(jpg);
}

static void test_decode_errors(void **state) {
  ct_image img, out;
  ct_error err;
  pattern(&img, 16, 16, 3);
  uint8_t *buf;
  size_t len;
  assert_int_equal(ct_image_encode_jpeg(&img, 90, &buf, &len, &err), CT_OK);
  assert_int_equal(ct_image_decode(buf, len / 2, CT_COLOR_NATIVE, &out, &err), CT_ERR_PARSE);
  assert_string_equal(err.msg, "corrupt JPEG: Premature end of JPEG file (truncated data)");
  assert_null(out.data);
  free(buf);
  assert_int_equal(ct_image_encode_png(&img, 1, &buf, &len, &err), CT_OK);
  assert_int_equal(ct_image_decode(buf, len - 30, CT_COLOR_NATIVE, &out, &err), CT_ERR_PARSE);
  assert_string_equal(err.msg, "corrupt PNG: unexpected end of data (truncated)");
  buf[20] ^= 0xff; /* inside IHDR: its CRC no longer matches */
  assert_int_equal(ct_image_decode(buf, len, CT_COLOR_NATIVE, &out, &err), CT_ERR_PARSE);
  assert_string_equal(err.msg, "corrupt PNG: IHDR: CRC error");
  free(buf);
  assert_int_equal(ct_image_decode("GIF89a", 6, CT_COLOR_NATIVE, &out, &err), CT_ERR_PARSE);
  assert_string_equal(err.msg, "not a JPEG or PNG image (6 bytes, starting 47 49 46 38)");
  assert_int_equal(ct_image_encode_jpeg(&img, 0, &buf, &len, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "JPEG quality 0 is not in 1..100");
  const char *dir = tu_tmpdir("data_image_errors");
  char path[4200], want[8400];
  snprintf(path, sizeof path, "%s/nothere.jpg", dir);
  assert_int_equal(ct_image_read_file(path, CT_COLOR_NATIVE, &out, &err), CT_ERR_NOTFOUND);
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
  assert_string_equal(err.msg, want);
  snprintf(path, sizeof path, "%s/text.png", dir);
  tu_write_file(path, "hello", 5);
  assert_int_equal(ct_image_read_file(path, CT_COLOR_NATIVE, &out, &err), CT_ERR_PARSE);
  snprintf(want, sizeof want, "%s: not a JPEG or PNG image (5 bytes, starting 68 65 6c 6c)", path);
  assert_string_equal(err.msg, want);
  ct_image_free(&img);
}

static void test_resize(void **state) {
  /* Upscale of one row [0, 100] to 4 pixels: OpenCV gives 0 25 75 100. */
  ct_image src, dst;
  ct_image_alloc(&src, 1, 2, 1);
  src.data[0] = 0;
  src.data[1] = 100;
  ct_image_resize_bilinear(&src, 1, 4, &dst);
  uint8_t want[4] = {0, 25, 75, 100};
  assert_memory_equal(dst.data, want, 4);
  ct_image_free(&dst);
  ct_image_free(&src);

  /* Exact halving averages 2x2 blocks with rounding. */
  ct_image_alloc(&src, 2, 4, 1);
  uint8_t v[8] = {0, 1, 10, 20, 2, 2, 30, 41};
  memcpy(src.data, v, 8);
  ct_image_resize_bilinear(&src, 1, 2, &dst);
  assert_int_equal(dst.data[0], 1);  /* (0+1+2+2+2)>>2 */
  assert_int_equal(dst.data[1], 25); /* (10+20+30+41+2)>>2 */
  ct_image_free(&dst);
  ct_image_free(&src);

  /* General sizes against float bilinear with OpenCV's pixel-centre
   * mapping: within 1 (fixed-point rounding). */
  pattern(&src, 23, 31, 3);
  int sizes[][2] = {{10, 14}, {40, 50}, {23, 31}, {7, 60}};
  for (int t = 0; t < 4; t++) {
    int nh = sizes[t][0], nw = sizes[t][1];
    ct_image_resize_bilinear(&src, nh, nw, &dst);
    assert_int_equal(dst.h, nh);
    assert_int_equal(dst.w, nw);
    for (int y = 0; y < nh; y++)
      for (int x = 0; x < nw; x++)
        for (int k = 0; k < 3; k++) {
          double fy = (y + 0.5) * 23.0 / nh - 0.5, fx = (x + 0.5) * 31.0 / nw - 0.5;
          int y0 = (int)floor(fy), x0 = (int)floor(fx);
          double ay = fy - y0, ax = fx - x0;
          if (y0 < 0) y0 = 0, ay = 0;
          if (x0 < 0) x0 = 0, ax = 0;
          if (y0 >= 22) y0 = 22, ay = 0;
          if (x0 >= 30) x0 = 30, ax = 0;
          int y1 = y0 + 1 < 23 ? y0 + 1 : y0, x1 = x0 + 1 < 31 ? x0 + 1 : x0;
#define P(yy, xx) src.data[((size_t)(yy) * 31 + (xx)) * 3 + k]
          double ref = (1 - ay) * ((1 - ax) * P(y0, x0) + ax * P(y0, x1)) +
                       ay * ((1 - ax) * P(y1, x0) + ax * P(y1, x1));
#undef P
          assert_true(fabs(dst.data[((size_t)y * nw + x) * 3 + k] - ref) <= 1.0);
        }
    ct_image_free(&dst);
  }
  ct_image_free(&src);
}

static void test_layouts_and_gray(void **state) {
  ct_image img, g, c3;
  pattern(&img, 3, 4, 3);
  uint8_t chw[36], hwc[36];
  ct_image_hwc_to_chw(img.data, 3, 4, 3, chw);
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 12; i++) assert_int_equal(chw[k * 12 + i], img.data[i * 3 + k]);
  ct_image_chw_to_hwc(chw, 3, 4, 3, hwc);
  assert_memory_equal(hwc, img.data, 36);
  ct_image_to_gray(&img, &g);
  for (int i = 0; i < 12; i++) {
    const uint8_t *p = img.data + 3 * i;
    int want = (p[0] * 1868 + p[1] * 9617 + p[2] * 4899 + 8192) >> 14;
    assert_int_equal(g.data[i], want);
  }
  ct_image_to_color(&g, &c3);
  for (int i = 0; i < 12; i++) assert_int_equal(c3.data[3 * i + 1], g.data[i]);
  ct_image_free(&img);
  ct_image_free(&g);
  ct_image_free(&c3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_png_round_trip_exact), cmocka_unit_test(test_jpeg_round_trip_within_tolerance),
      cmocka_unit_test(test_decode_gives_bgr),     cmocka_unit_test(test_decode_errors),
      cmocka_unit_test(test_resize),               cmocka_unit_test(test_layouts_and_gray),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
