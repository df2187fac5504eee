/* The transformer against a naive reference of Caffe's DataTransformer:
 * crop offsets (random in TRAIN, centred in TEST), mirror, mean file vs mean
 * value, scale, for uint8 CHW, float CHW and uint8 HWC inputs; and the errors
 * for bad parameters and mismatched mean files. */
#include <math.h>
#include <stdio.h>

#include "core/rng.h"
#include "data/image.h"
#include "data/transform.h"
#include "proto/io.h"
#include "testutil.h"

#define C 3
#define H 7
#define W 9

static uint8_t g_u8_chw[C * H * W], g_u8_hwc[C * H * W];
static float g_f32_chw[C * H * W];
static float g_mean[C * H * W];

static void fill_inputs(void) {
  for (int c = 0; c < C; c++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) {
        uint8_t v = (uint8_t)((c * 71 + y * 13 + x * 29) % 251);
        g_u8_chw[(c * H + y) * W + x] = v;
        g_u8_hwc[(y * W + x) * C + c] = v;
        g_f32_chw[(c * H + y) * W + x] = v * 0.25f - 7.0f;
        g_mean[(c * H + y) * W + x] = (float)((c + 1) * 10 + y - x) * 0.5f;
      }
}

/* Caffe's arithmetic, written out: out[c][h][w'] = (in - mean) * scale. */
static void reference(const float *in_chw, int crop, bool mirror, int h_off, int w_off,
                      const float *mean_file, const float *mean_values, int n_mv, float scale,
                      float *out) {
  int oh = crop ? crop : H, ow = crop ? crop : W;
  for (int c = 0; c < C; c++)
    for (int y = 0; y < oh; y++)
      for (int x = 0; x < ow; x++) {
        int di = (c * H + h_off + y) * W + w_off + x;
        int ti = (c * oh + y) * ow + (mirror ? ow - 1 - x : x);
        float v = in_chw[di];
        if (mean_file)
          out[ti] = (v - mean_file[di]) * scale;
        else if (n_mv)
          out[ti] = (v - mean_values[n_mv == 1 ? 0 : c]) * scale;
        else
          out[ti] = v * scale;
      }
}

static const char *write_mean(const char *dir, const char *name, int n, int c, int h, int w,
                              size_t nvalues) {
  static char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  Caffe__BlobProto b = CAFFE__BLOB_PROTO__INIT;
  b.has_num = b.has_channels = b.has_height = b.has_width = 1;
  b.num = n;
  b.channels = c;
  b.height = h;
  b.width = w;
  b.n_data = nvalues;
  b.data = g_mean;
  ct_error err;
  assert_int_equal(ct_proto_write_binary((ProtobufCMessage *)&b, path, &err), CT_OK);
  return path;
}

static void check_case(const Caffe__TransformationParameter *tp, ct_phase phase, const float *mean_file,
                       uint64_t seed) {
  fill_inputs();
  ct_transform *t;
  ct_error err;
  assert_int_equal(ct_transform_create(tp, phase, &t, &err), CT_OK);
  int crop = (int)tp->crop_size;
  int oc, oh, ow;
  assert_int_equal(ct_transform_output_shape(t, C, H, W, &oc, &oh, &ow, "x", &err), CT_OK);
  assert_int_equal(oh, crop ? crop : H);
  assert_int_equal(ow, crop ? crop : W);
  float in_u8_as_f[C * H * W];
  for (int i = 0; i < C * H * W; i++) in_u8_as_f[i] = g_u8_chw[i];
  ct_pixels views[3] = {ct_pixels_chw(CT_PIXEL_U8, g_u8_chw, C, H, W),
                        ct_pixels_hwc(CT_PIXEL_U8, g_u8_hwc, C, H, W),
                        ct_pixels_chw(CT_PIXEL_F32, g_f32_chw, C, H, W)};
  bool saw_mirror[2] = {false, false};
  int offsets_seen = 0;
  for (int rep = 0; rep < 12; rep++)
    for (int v = 0; v < 3; v++) {
      ct_rng rng, shadow;
      ct_rng_seed(&rng, seed + (uint64_t)rep);
      shadow = rng;
      /* the draws Caffe makes, in its order */
      bool mirror = tp->mirror && ct_rng_below(&shadow, 2);
      int h_off = 0, w_off = 0;
      if (crop && phase == CT_PHASE_TRAIN) {
        h_off = (int)ct_rng_below(&shadow, (uint64_t)(H - crop + 1));
        w_off = (int)ct_rng_below(&shadow, (uint64_t)(W - crop + 1));
      } else if (crop) {
        h_off = (H - crop) / 2;
        w_off = (W - crop) / 2;
      }
      saw_mirror[mirror] = true;
      offsets_seen |= 1 << (h_off * 4 + w_off);
      float out[C * H * W], ref[C * H * W];
      assert_int_equal(ct_transform_apply(t, &views[v], &rng, out, "x", &err), CT_OK);
      reference(v == 2 ? g_f32_chw : in_u8_as_f, crop, mirror, h_off, w_off, mean_file, tp->mean_value,
                (int)tp->n_mean_value, tp->scale, ref);
      assert_memory_equal(out, ref, sizeof(float) * oc * oh * ow); /* bit-exact */
    }
  if (tp->mirror) assert_true(saw_mirror[0] && saw_mirror[1]);
  if (crop && crop < H && phase == CT_PHASE_TRAIN) assert_true(__builtin_popcount(offsets_seen) > 3);
  if (phase == CT_PHASE_TEST && crop) assert_int_equal(__builtin_popcount(offsets_seen), 1);
  ct_transform_free(t);
}

static void test_transform_against_reference(void **state) {
  fill_inputs();
  const char *dir = tu_tmpdir("data_transform_reference");
  const char *mean_path = write_mean(dir, "mean.binaryproto", 1, C, H, W, C * H * W);
  float mv3[3] = {10.5f, 20.25f, -3.0f}, mv1[1] = {100.0f};
  for (int ph = 0; ph < 2; ph++)
    for (int crop = 0; crop <= 5; crop += 5)
      for (int mirror = 0; mirror < 2; mirror++)
        for (int mean = 0; mean < 4; mean++) {
          Caffe__TransformationParameter tp = CAFFE__TRANSFORMATION_PARAMETER__INIT;
          tp.crop_size = (uint32_t)crop;
          tp.mirror = mirror;
          tp.scale = mean == 2 ? 0.00390625f : mean == 3 ? 1.7f : 1.0f;
          if (mean == 1) tp.mean_file = (char *)mean_path;
          if (mean == 2) {
            tp.n_mean_value = 3;
            tp.mean_value = mv3;
          }
          if (mean == 3) {
            tp.n_mean_value = 1;
            tp.mean_value = mv1;
          }
          check_case(&tp, ph ? CT_PHASE_TEST : CT_PHASE_TRAIN, mean == 1 ? g_mean : NULL,
                     (uint64_t)(crop * 100 + mirror * 10 + mean));
        }
}

/* Rows wide enough for the vectorised HWC path's full vectors and
 * remainders: a 3 x 20 x 37 image, interleaved (fast path) and planar
 * (generic path), give the same bits for every crop offset and mirror. */
static void test_transform_hwc_wide_rows(void **state) {
  enum { WH = 20, WW = 37, CROP = 33 };
  static uint8_t hwc[3 * WH * WW], chw[3 * WH * WW];
  for (int c = 0; c < 3; c++)
    for (int y = 0; y < WH; y++)
      for (int x = 0; x < WW; x++) {
        uint8_t v = (uint8_t)((c * 97 + y * 31 + x * 17 + x * y) % 256);
        hwc[(y * WW + x) * 3 + c] = v;
        chw[(c * WH + y) * WW + x] = v;
      }
  float mv[3] = {104.0f, 117.0f, 123.0f};
  for (int crop = 0; crop <= CROP; crop += CROP)
    for (int nmv = 0; nmv <= 3; nmv += 3) {
      Caffe__TransformationParameter tp = CAFFE__TRANSFORMATION_PARAMETER__INIT;
      tp.crop_size = (uint32_t)crop;
      tp.scale = nmv ? 0.017f : 1.0f;
      tp.n_mean_value = (size_t)nmv;
      tp.mean_value = mv;
      ct_transform *t;
      ct_error err;
      assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_OK);
      const int oh = crop ? crop : WH, ow = crop ? crop : WW;
      ct_pixels fast = ct_pixels_hwc(CT_PIXEL_U8, hwc, 3, WH, WW), slow = ct_pixels_chw(CT_PIXEL_U8, chw, 3, WH, WW);
      static float a[3 * WH * WW], b[3 * WH * WW];
      for (int mirror = 0; mirror < 2; mirror++)
        for (int h_off = 0; h_off <= WH - oh; h_off++)
          for (int w_off = 0; w_off <= WW - ow; w_off++) {
            assert_int_equal(ct_transform_apply_at(t, &fast, mirror, h_off, w_off, a, "x", &err), CT_OK);
            assert_int_equal(ct_transform_apply_at(t, &slow, mirror, h_off, w_off, b, "x", &err), CT_OK);
            assert_memory_equal(a, b, sizeof(float) * 3 * oh * ow);
          }
      ct_transform_free(t);
    }
}

static void test_transform_apply_at(void **state) {
  fill_inputs();
  Caffe__TransformationParameter tp = CAFFE__TRANSFORMATION_PARAMETER__INIT;
  tp.crop_size = 4;
  ct_transform *t;
  ct_error err;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_OK);
  ct_pixels px = ct_pixels_chw(CT_PIXEL_U8, g_u8_chw, C, H, W);
  float out[C * 16];
  assert_int_equal(ct_transform_apply_at(t, &px, true, 3, 5, out, "x", &err), CT_OK);
  /* channel 2, row 1, mirrored column 0 = input (2, 4, 5 + 3) */
  assert_float_equal(out[(2 * 4 + 1) * 4 + 0], g_u8_chw[(2 * H + 4) * W + 8], 0);
  assert_float_equal(out[(2 * 4 + 1) * 4 + 3], g_u8_chw[(2 * H + 4) * W + 5], 0);
  ct_transform_free(t);
}

/* NVCaffe's img_rand_resize_lower / _upper: the shorter side resized to a
 * size drawn from [lower, upper] (every size drawn, none outside), then the
 * crop.  In TEST with lower == upper the output is the centre crop of
 * ct_image_resize_bilinear's resize, exactly; in TRAIN each output is a
 * crop of one of the allowed resizes (found by trying every size and
 * offset), mirror off. */
static void test_transform_random_resize(void **state) {
  enum { IH = 12, IW = 20, CROP = 6, LO = 8, HI = 11 };
  uint8_t hwc[IH * IW * 3];
  for (int i = 0; i < IH * IW * 3; i++) hwc[i] = (uint8_t)((i * 37 + i / 60 * 11) % 256);
  ct_image src = {IH, IW, 3, hwc};
  const ct_pixels px = ct_pixels_hwc(CT_PIXEL_U8, hwc, 3, IH, IW);
  Caffe__TransformationParameter tp = CAFFE__TRANSFORMATION_PARAMETER__INIT;
  tp.crop_size = CROP;
  ct_transform *t;
  ct_error err;
  ct_rng rng;
  ct_rng_seed(&rng, 3);
  float out[3 * CROP * CROP];
  /* the resized images of every allowed size: shorter side s, the other
   * 20 s / 12 rounded */
  ct_image sized[HI + 1];
  for (int sz = LO; sz <= HI; sz++) {
    const int w = (int)lroundf((float)sz / IH * IW);
    ct_image_resize_bilinear(&src, sz, w, &sized[sz]);
  }
  /* TEST, one size: the centre crop of that resize */
  tp.img_rand_resize_lower = tp.img_rand_resize_upper = 10;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TEST, &t, &err), CT_OK);
  assert_int_equal(ct_transform_apply(t, &px, &rng, out, "img", &err), CT_OK);
  const ct_image *r = &sized[10];
  const int h0 = (r->h - CROP) / 2, w0 = (r->w - CROP) / 2;
  for (int c = 0; c < 3; c++)
    for (int y = 0; y < CROP; y++)
      for (int x = 0; x < CROP; x++)
        assert_float_equal(out[(c * CROP + y) * CROP + x], r->data[((h0 + y) * r->w + w0 + x) * 3 + c], 0);
  ct_transform_free(t);
  /* TRAIN, [8, 11]: every output a crop of one allowed size, each size seen */
  tp.img_rand_resize_lower = LO;
  tp.img_rand_resize_upper = HI;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_OK);
  int oc, oh, ow;
  assert_int_equal(ct_transform_output_shape(t, 3, IH, IW, &oc, &oh, &ow, "img", &err), CT_OK);
  assert_int_equal(oh, CROP);
  assert_int_equal(ow, CROP);
  bool seen[HI + 1] = {false};
  for (int k = 0; k < 60; k++) {
    assert_int_equal(ct_transform_apply(t, &px, &rng, out, "img", &err), CT_OK);
    bool found = false;
    for (int sz = LO; sz <= HI && !found; sz++) {
      const ct_image *q = &sized[sz];
      for (int hy = 0; hy + CROP <= q->h && !found; hy++)
        for (int wx = 0; wx + CROP <= q->w && !found; wx++) {
          bool same = true;
          for (int c = 0; c < 3 && same; c++)
            for (int y = 0; y < CROP && same; y++)
              for (int x = 0; x < CROP && same; x++)
                same = out[(c * CROP + y) * CROP + x] == q->data[((hy + y) * q->w + wx + x) * 3 + c];
          if (same) found = seen[sz] = true;
        }
    }
    assert_true(found);
  }
  for (int sz = LO; sz <= HI; sz++) assert_true(seen[sz]);
  ct_transform_free(t);
  for (int sz = LO; sz <= HI; sz++) ct_image_free(&sized[sz]);
  /* a size below the crop: each side at least crop_size */
  tp.img_rand_resize_lower = tp.img_rand_resize_upper = 2;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TEST, &t, &err), CT_OK);
  assert_int_equal(ct_transform_apply(t, &px, &rng, out, "img", &err), CT_OK);
  ct_transform_free(t);
  /* the parameters' errors */
  tp.img_rand_resize_upper = 0;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "img_rand_resize_lower 2 and img_rand_resize_upper 0: give both or neither");
  tp.img_rand_resize_lower = 300;
  tp.img_rand_resize_upper = 256;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "img_rand_resize_upper 256 is below img_rand_resize_lower 300");
  tp.img_rand_resize_lower = 256;
  tp.img_rand_resize_upper = 480;
  tp.crop_size = 0;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_ERR_INVALID);
  assert_non_null(strstr(err.msg, "need crop_size"));
  /* a thin image whose resize would pass the image limits */
  tp.crop_size = 4;
  tp.img_rand_resize_lower = tp.img_rand_resize_upper = 60000;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_OK);
  static uint8_t thin[1 * 40 * 3];
  const ct_pixels tpx = ct_pixels_hwc(CT_PIXEL_U8, thin, 3, 1, 40);
  assert_int_equal(ct_transform_apply(t, &tpx, &rng, out, "record 9", &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "record 9: img_rand_resize to 60000 makes the 1x40 image "
                               "60000x2400000, beyond 65535 pixels a side or 2^31 bytes");
  ct_transform_free(t);
  tp.img_rand_resize_lower = 256;
  tp.img_rand_resize_upper = 480;
  /* float records are not resized */
  tp.crop_size = 4;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_OK);
  fill_inputs();
  const ct_pixels fpx = ct_pixels_chw(CT_PIXEL_F32, g_f32_chw, C, H, W);
  assert_int_equal(ct_transform_apply(t, &fpx, &rng, out, "record 7", &err), CT_ERR_UNSUPPORTED);
  assert_non_null(strstr(err.msg, "record 7: img_rand_resize_lower/upper resize 8-bit images only"));
  ct_transform_free(t);
}

static void test_transform_errors(void **state) {
  fill_inputs();
  const char *dir = tu_tmpdir("data_transform_errors");
  ct_transform *t;
  ct_error err;
  char want[8400];
  Caffe__TransformationParameter tp = CAFFE__TRANSFORMATION_PARAMETER__INIT;
  float mv[2] = {1, 2};

  tp.mean_file = (char *)write_mean(dir, "m.binaryproto", 1, C, H, W, C * H * W);
  tp.n_mean_value = 1;
  tp.mean_value = mv;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "cannot give both mean_file and mean_value");

  tp.n_mean_value = 0;
  tp.force_color = tp.force_gray = 1;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "force_color and force_gray cannot both be set");
  tp.force_color = tp.force_gray = 0;

  /* a mean of the wrong image size */
  const char *small = write_mean(dir, "small.binaryproto", 1, C, 5, 5, C * 25);
  tp.mean_file = (char *)small;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_OK);
  int oc, oh, ow;
  assert_int_equal(ct_transform_output_shape(t, C, H, W, &oc, &oh, &ow, "record 00000003 of /db", &err),
                   CT_ERR_INVALID);
  snprintf(want, sizeof want, "record 00000003 of /db: image 3x7x9 does not match mean_file %s (3x5x5)",
           small);
  assert_string_equal(err.msg, want);
  ct_pixels px = ct_pixels_chw(CT_PIXEL_U8, g_u8_chw, C, H, W);
  ct_rng rng;
  ct_rng_seed(&rng, 1);
  float out[C * H * W];
  assert_int_equal(ct_transform_apply(t, &px, &rng, out, "record 00000003 of /db", &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, want);
  ct_transform_free(t);

  /* a mean file with two images, and one whose values are short */
  const char *two = write_mean(dir, "two.binaryproto", 2, C, H, W, 0);
  tp.mean_file = (char *)two;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_ERR_INVALID);
  snprintf(want, sizeof want, "%s: mean_file must hold one image (1xCxHxW), got 2x3x7x9", two);
  assert_string_equal(err.msg, want);
  const char *shrt = write_mean(dir, "short.binaryproto", 1, C, H, W, 10);
  tp.mean_file = (char *)shrt;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_ERR_INVALID);
  snprintf(want, sizeof want, "%s: mean_file holds 10 values for shape 1x3x7x9 = 189", shrt);
  assert_string_equal(err.msg, want);
  char missing[4300];
  snprintf(missing, sizeof missing, "%s/none.binaryproto", dir);
  tp.mean_file = missing;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TRAIN, &t, &err), CT_ERR_NOTFOUND);
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", missing);
  assert_string_equal(err.msg, want);
  tp.mean_file = NULL;

  /* mean values that do not fit the channels; a crop larger than the image */
  tp.n_mean_value = 2;
  tp.mean_value = mv;
  tp.crop_size = 8;
  assert_int_equal(ct_transform_create(&tp, CT_PHASE_TEST, &t, &err), CT_OK);
  assert_int_equal(ct_transform_output_shape(t, C, H, W, &oc, &oh, &ow, "img", &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "img: crop_size 8 is larger than the image 3x7x9");
  assert_int_equal(ct_transform_output_shape(t, C, 9, 9, &oc, &oh, &ow, "img", &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "img: 2 mean_value(s) for a 3-channel image (give 1 or 3)");
  ct_transform_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transform_against_reference),
      cmocka_unit_test(test_transform_apply_at),
      cmocka_unit_test(test_transform_hwc_wide_rows),
      cmocka_unit_test(test_transform_errors),
      cmocka_unit_test(test_transform_random_resize),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
