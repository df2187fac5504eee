/* WindowData on the CPU with real PNG and JPEG files written by the test:
 * windows copied exactly, context padding clipped at the image border (and
 * mirrored), square crops, the mean file centred on the crop, the
 * foreground/background split of each batch, the settings' old places,
 * cache_images, reproducible batches and positions, and bad window files
 * and settings with their messages. */
#include <math.h>
#include <stdio.h>

#include "core/log.h"
#include "data/image.h"
#include "layers/layer.h"
#include "net/net.h"
#include "net/net_load.h"
#include "proto/textformat.h"
#include "proto/io.h"
#include "testutil.h"
#include "window_files.h"

typedef struct wd {
  ct_context ctx;
  Caffe__LayerParameter lp;
  Caffe__WindowDataParameter wp;
  Caffe__TransformationParameter tp;
  char *tops[2];
  float mean_value[1];
  ct_layer *l;
  ct_tensor *top[2];
} wd;

/* A WindowData over source with every foreground window by default. */
static void wd_init(wd *r, const char *source, const char *root, int batch, int crop) {
  memset(r, 0, sizeof *r);
  assert_int_equal(ct_context_init(&r->ctx, CT_DEVICE_CPU, 99, NULL), CT_OK);
  caffe__layer_parameter__init(&r->lp);
  caffe__window_data_parameter__init(&r->wp);
  caffe__transformation_parameter__init(&r->tp);
  r->lp.name = "win";
  r->lp.type = "WindowData";
  r->tops[0] = "data";
  r->tops[1] = "label";
  r->lp.top = r->tops;
  r->lp.n_top = 2;
  r->lp.window_data_param = &r->wp;
  r->lp.transform_param = &r->tp;
  r->wp.source = (char *)source;
  r->wp.root_folder = (char *)root;
  r->wp.has_batch_size = 1;
  r->wp.batch_size = (uint32_t)batch;
  r->wp.has_fg_fraction = 1;
  r->wp.fg_fraction = 1.0f;
  r->tp.has_crop_size = crop > 0;
  r->tp.crop_size = (uint32_t)crop;
  r->top[0] = ct_tensor_new(CT_DEVICE_CPU, "data");
  r->top[1] = ct_tensor_new(CT_DEVICE_CPU, "label");
}

static ct_status wd_setup(wd *r, ct_error *err) {
  CT_TRY(ct_layer_create(&r->lp, CT_PHASE_TRAIN, &r->ctx, 0, 2, &r->l, err));
  return ct_layer_setup(r->l, NULL, r->top, err);
}

static void wd_ready(wd *r) {
  ct_error err;
  if (wd_setup(r, &err) != CT_OK) fail_msg("setup: %s", err.msg);
}

static void wd_forward(wd *r) {
  ct_error err;
  if (ct_layer_forward(r->l, NULL, r->top, NULL, &err) != CT_OK) fail_msg("forward: %s", err.msg);
}

static void wd_free(wd *r) {
  ct_layer_free(r->l);
  ct_tensor_free(r->top[0]);
  ct_tensor_free(r->top[1]);
  ct_context_free(&r->ctx);
}

/* Checks item `item` of the data top: zeros except the region (x1..x2,
 * y1..y2) of `img` resized to oh x ow, flipped when mirror, placed at
 * (ph, pw), as (pixel - mean[c]) * scale; mean_file (C, mh, mw) with
 * offset off instead when given. */
typedef struct expect_args {
  int x1, y1, x2, y2, oh, ow, ph, pw;
  bool mirror;
  float mean, scale;
  const float *mean_file;
  int mh, mw, off;
} expect_args;

static bool crop_matches(const wd *r, int item, const ct_image *img, const expect_args *e) {
  const int crop = r->top[0]->shape[2], C = r->top[0]->shape[1];
  ct_image roi, warped;
  ct_image_alloc(&roi, e->y2 - e->y1 + 1, e->x2 - e->x1 + 1, C);
  for (int y = 0; y < roi.h; y++)
    for (int x = 0; x < roi.w; x++)
      for (int c = 0; c < C; c++)
        roi.data[(y * roi.w + x) * C + c] = img->data[((e->y1 + y) * img->w + e->x1 + x) * C + c];
  ct_image_resize_bilinear(&roi, e->oh, e->ow, &warped);
  const float *got = r->top[0]->data + (size_t)item * C * crop * crop;
  bool ok = true;
  for (int c = 0; c < C && ok; c++)
    for (int h = 0; h < crop && ok; h++)
      for (int w = 0; w < crop && ok; w++) {
        float want = 0.0f;
        const int y = h - e->ph, x = w - e->pw;
        if (y >= 0 && y < e->oh && x >= 0 && x < e->ow) {
          const int sx = e->mirror ? e->ow - 1 - x : x;
          const float mean = e->mean_file ? e->mean_file[(c * e->mh + h + e->off) * e->mw + w + e->off]
                                          : e->mean;
          want = ((float)warped.data[(y * e->ow + sx) * C + c] - mean) * e->scale;
        }
        ok = got[(c * crop + h) * crop + w] == want;
      }
  ct_image_free(&roi);
  ct_image_free(&warped);
  return ok;
}

static void expect_crop(const wd *r, int item, const ct_image *img, const expect_args *e) {
  if (!crop_matches(r, item, img, e)) fail_msg("item %d does not hold the expected crop", item);
}

/* Image `name` of the test folder root (with its trailing '/'), decoded. */
static void read_image(const char *dir, const char *name, ct_image *img) {
  char path[700];
  ct_error err;
  snprintf(path, sizeof path, "%s%s", dir, name);
  assert_int_equal(ct_image_read_file(path, CT_COLOR_FORCE_COLOR, img, &err), CT_OK);
}

/* A window as large as the crop is the image's pixels; mean_value and
 * window_data_param.scale apply; the label is the window's class. */
static void test_exact_window(void **state) {
  char src[600];
  char root[620];
  wf_make_dir("window_exact", "# 0\nim0.png\n3 16 16\n1\n4 1.0 2 1 5 4\n", src, root);
  wd r;
  wd_init(&r, src, root, 2, 4);
  r.mean_value[0] = 10.0f;
  r.tp.mean_value = r.mean_value;
  r.tp.n_mean_value = 1;
  r.wp.has_scale = 1;
  r.wp.scale = 0.5f;
  wd_ready(&r);
  assert_int_equal(r.top[0]->ndim, 4);
  assert_int_equal(r.top[0]->shape[0], 2);
  assert_int_equal(r.top[0]->shape[1], 3);
  assert_int_equal(r.top[0]->shape[2], 4);
  assert_int_equal(r.top[1]->ndim, 1);
  wd_forward(&r);
  ct_image img;
  read_image(root, "im0.png", &img);
  for (int i = 0; i < 2; i++) {
    assert_float_equal(r.top[1]->data[i], 4, 0);
    expect_crop(&r, i, &img, &(expect_args){2, 1, 5, 4, 4, 4, 0, 0, false, 10.0f, 0.5f});
    /* the pixels themselves: BGR as written */
    assert_float_equal(r.top[0]->data[(size_t)i * 48], (wf_px(0, 1, 2, 0) - 10.0f) * 0.5f, 0);
  }
  ct_image_free(&img);
  wd_free(&r);
  /* the same from the old places (window_data_param.crop_size, mean from a
   * transform_param without crop_size), and transform_param.scale */
  wd_init(&r, src, root, 1, 0);
  r.wp.has_crop_size = 1;
  r.wp.crop_size = 4;
  r.tp.has_scale = 1;
  r.tp.scale = 2.0f;
  wd_ready(&r);
  wd_forward(&r);
  read_image(root, "im0.png", &img);
  expect_crop(&r, 0, &img, &(expect_args){2, 1, 5, 4, 4, 4, 0, 0, false, 0.0f, 2.0f});
  ct_image_free(&img);
  wd_free(&r);
}

/* context_pad 2 around a 4x4 window in the corner, crop 8: the box grows
 * to (-2..6), is clipped to (0..6) and warped to 6x6 behind 2 zero rows and
 * columns; mirrored, the padding moves to the right (Caffe's rule). */
static void test_context_pad(void **state) {
  char src[600];
  char root[620];
  wf_make_dir("window_context", "# 0\nim0.png\n3 16 16\n1\n1 0.9 0 0 3 3\n", src, root);
  wd r;
  wd_init(&r, src, root, 16, 8);
  r.wp.has_context_pad = 1;
  r.wp.context_pad = 2;
  r.tp.has_mirror = 1;
  r.tp.mirror = true;
  wd_ready(&r);
  wd_forward(&r);
  ct_image img;
  read_image(root, "im0.png", &img);
  int plain = 0, flipped = 0;
  for (int i = 0; i < 16; i++) {
    if (crop_matches(&r, i, &img, &(expect_args){0, 0, 6, 6, 6, 6, 2, 2, false, 0, 1}))
      plain++;
    else if (crop_matches(&r, i, &img, &(expect_args){0, 0, 6, 6, 6, 6, 2, 0, true, 0, 1}))
      flipped++;
    else
      fail_msg("item %d is neither the padded crop nor its mirror image", i);
  }
  assert_true(plain > 0 && flipped > 0);
  ct_image_free(&img);
  wd_free(&r);
}

/* crop_mode square: the 4x8 window (4,2)-(7,9) becomes the 9x9 square
 * (2..10) about its centre, warped to 6x6. */
static void test_square(void **state) {
  char src[600];
  char root[620];
  wf_make_dir("window_square", "# 0\nim0.png\n3 16 16\n1\n1 0.9 4 2 7 9\n", src, root);
  wd r;
  wd_init(&r, src, root, 1, 6);
  r.wp.crop_mode = "square";
  wd_ready(&r);
  wd_forward(&r);
  ct_image img;
  read_image(root, "im0.png", &img);
  expect_crop(&r, 0, &img, &(expect_args){2, 2, 10, 10, 6, 6, 0, 0, false, 0, 1});
  ct_image_free(&img);
  wd_free(&r);
}

/* A mean_file larger than the crop is centred on it ((6 - 4) / 2 = 1). */
static void test_mean_file(void **state) {
  char src[600], mean_path[700];
  char root[620];
  wf_make_dir("window_mean", "# 0\nim0.png\n3 16 16\n1\n1 0.9 3 3 6 6\n", src, root);
  snprintf(mean_path, sizeof mean_path, "%smean.binaryproto", root);
  float mean[3 * 6 * 6];
  for (int i = 0; i < 108; i++) mean[i] = (float)(i % 17) * 3.0f;
  Caffe__BlobProto b = CAFFE__BLOB_PROTO__INIT;
  b.has_num = b.has_channels = b.has_height = b.has_width = 1;
  b.num = 1;
  b.channels = 3;
  b.height = b.width = 6;
  b.data = mean;
  b.n_data = 108;
  ct_error err;
  assert_int_equal(ct_proto_write_binary(&b.base, mean_path, &err), CT_OK);
  for (int old_place = 0; old_place < 2; old_place++) {
    wd r;
    wd_init(&r, src, root, 1, 4);
    if (old_place) r.wp.mean_file = mean_path;
    else r.tp.mean_file = mean_path;
    wd_ready(&r);
    wd_forward(&r);
    ct_image img;
    read_image(root, "im0.png", &img);
    expect_args e = {3, 3, 6, 6, 4, 4, 0, 0, false, 0, 1, mean, 6, 6, 1};
    expect_crop(&r, 0, &img, &e);
    ct_image_free(&img);
    wd_free(&r);
  }
}

/* fg_fraction 0.25 of 8: 6 background items (class 0), then 2 foreground
 * ones from both images; windows between the thresholds never come. */
static void test_sampling(void **state) {
  const char *text =
      "# 0\nim0.png\n3 16 16\n3\n"
      "2 0.9 1 1 8 8\n"       /* foreground, class 2 */
      "3 0.6 0 0 15 15\n"     /* between the thresholds: unused */
      "5 0.1 4 4 11 11\n"     /* background: class 0 */
      "# 1\nim1.jpg\n3 16 16\n1\n"
      "7 0.8 2 3 9 12\n";     /* foreground, class 7 (JPEG) */
  char src[600];
  char root[620];
  wf_make_dir("window_sampling", text, src, root);
  wd r;
  wd_init(&r, src, root, 8, 5);
  r.wp.fg_fraction = 0.25f;
  r.wp.has_fg_threshold = r.wp.has_bg_threshold = 1;
  r.wp.fg_threshold = 0.7f;
  r.wp.bg_threshold = 0.3f;
  wd_ready(&r);
  ct_image im0, im1;
  read_image(root, "im0.png", &im0);
  read_image(root, "im1.jpg", &im1);
  int seen[8] = {0};
  for (int it = 0; it < 20; it++) {
    wd_forward(&r);
    for (int i = 0; i < 8; i++) {
      const int label = (int)r.top[1]->data[i];
      if (i < 6) {
        assert_int_equal(label, 0);
        expect_crop(&r, i, &im0, &(expect_args){4, 4, 11, 11, 5, 5, 0, 0, false, 0, 1});
      } else {
        assert_true(label == 2 || label == 7);
        if (label == 2) expect_crop(&r, i, &im0, &(expect_args){1, 1, 8, 8, 5, 5, 0, 0, false, 0, 1});
        else expect_crop(&r, i, &im1, &(expect_args){2, 3, 9, 12, 5, 5, 0, 0, false, 0, 1});
      }
      seen[label]++;
    }
  }
  assert_int_equal(seen[0], 120);
  assert_true(seen[2] > 5 && seen[7] > 5);
  assert_int_equal(seen[3] + seen[5], 0);
  ct_image_free(&im0);
  ct_image_free(&im1);
  wd_free(&r);
}

/* The same seed gives the same batches, with or without cache_images, and
 * a saved position replays the batch that followed it. */
static void test_reproducible(void **state) {
  const char *text = "# 0\nim0.png\n3 16 16\n2\n1 0.9 0 0 7 7\n2 0.9 5 5 14 12\n"
                     "# 1\nim1.jpg\n3 16 16\n1\n0 0.0 1 1 9 9\n";
  char src[600];
  char root[620];
  wf_make_dir("window_repro", text, src, root);
  wd a, b;
  wd_init(&a, src, root, 6, 6);
  wd_init(&b, src, root, 6, 6);
  for (int k = 0; k < 2; k++) {
    wd *r = k ? &b : &a;
    r->wp.fg_fraction = 0.5f;
    r->wp.has_context_pad = 1;
    r->wp.context_pad = 1;
    r->tp.has_mirror = 1;
    r->tp.mirror = true;
  }
  b.wp.has_cache_images = 1;
  b.wp.cache_images = true;
  wd_ready(&a);
  wd_ready(&b);
  const size_t n = 6 * 3 * 36;
  float *third = malloc(n * sizeof(float));
  Caffe__CortadoDataPosition pos = CAFFE__CORTADO_DATA_POSITION__INIT;
  for (int it = 0; it < 4; it++) {
    if (it == 2) assert_int_equal(a.l->ops->get_position(a.l, &pos), CT_OK);
    wd_forward(&a);
    wd_forward(&b);
    assert_memory_equal(a.top[0]->data, b.top[0]->data, n * sizeof(float));
    assert_memory_equal(a.top[1]->data, b.top[1]->data, 6 * sizeof(float));
    if (it == 2) memcpy(third, a.top[0]->data, n * sizeof(float));
  }
  ct_error err;
  assert_int_equal(a.l->ops->set_position(a.l, &pos, &err), CT_OK);
  wd_forward(&a);
  assert_memory_equal(a.top[0]->data, third, n * sizeof(float));
  free(pos.layer);
  free(third);
  wd_free(&a);
  wd_free(&b);
}

static void expect_setup_error(wd *r, const char *msg) {
  ct_error err;
  assert_int_not_equal(wd_setup(r, &err), CT_OK);
  if (!strstr(err.msg, msg)) fail_msg("message '%s' lacks '%s'", err.msg, msg);
  wd_free(r);
}

static void test_errors(void **state) {
  char src[600], want[1400];
  char root[620];
  wf_make_dir("window_errors", "foo\n", src, root);
  wd r;
  wd_init(&r, src, root, 2, 4);
  snprintf(want, sizeof want,
           "layer 'win' (WindowData): %s:1: expected '# 0' (the next image), got 'foo'", src);
  expect_setup_error(&r, want);

  struct {
    const char *text, *msg;
  } bad[] = {
      {"# 1\nim0.png\n3 16 16\n0\n", ":1: image index 1 out of order (expected 0)"},
      {"# 0\nim0.png\n3 16 16\n1\n0 0.9 1 1 4 4\n",
       ":5: a foreground window (overlap 0.9 >= fg_threshold 0.5) needs a class above 0, got 0"},
      {"# 0\nim0.png\n3 16 16\n1\n1 0.9 4 1 2 4\n",
       ":5: the window (4, 1, 2, 4) has x2 < x1 or y2 < y1"},
      {"# 0\nim0.png\n2 16 16\n0\n", ":3: image 0 has 2 channels (1 or 3)"},
      {"# 0\nim0.png\n3 16 16\n2\n1 0.9 1 1 4 4\n", ": the file ends where a class index should be"},
      {"# 0\nim0.png\n3 16 x\n", ":3: expected the width (an integer from 1 to 65536), got 'x'"},
      {"", ": the window file is empty"},
      {"# 0\nim0.png\n3 16 16\n1\n0 0.1 1 1 4 4\n",
       ": no foreground windows (overlap >= fg_threshold 0.5) for the 2 per batch"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    tu_write_file(src, bad[i].text, strlen(bad[i].text));
    wd_init(&r, src, root, 2, 4);
    snprintf(want, sizeof want, "%s%s", src, bad[i].msg);
    expect_setup_error(&r, want);
  }

  const char *good = "# 0\nim0.png\n3 16 16\n2\n1 0.9 1 1 4 4\n0 0.1 10 10 20 20\n";
  tu_write_file(src, good, strlen(good));
  wd_init(&r, src, root, 2, 0);
  expect_setup_error(&r, "layer 'win' (WindowData): WindowData needs transform_param.crop_size, the "
                         "size windows are warped to");
  wd_init(&r, src, root, 2, 4);
  r.wp.crop_mode = "stretch";
  expect_setup_error(&r, "window_data_param.crop_mode must be 'warp' or 'square', got 'stretch'");
  wd_init(&r, src, root, 2, 4);
  r.wp.has_scale = r.tp.has_scale = 1;
  r.wp.scale = 2.0f;
  r.tp.scale = 3.0f;
  expect_setup_error(&r, "transform_param.scale 3 and window_data_param.scale 2 differ (give one)");
  wd_init(&r, src, root, 2, 4);
  r.wp.has_crop_size = 1;
  r.wp.crop_size = 5;
  expect_setup_error(&r, "transform_param.crop_size 4 and window_data_param.crop_size 5 differ");
  wd_init(&r, src, root, 2, 4);
  r.wp.has_context_pad = 1;
  r.wp.context_pad = 2;
  expect_setup_error(&r, "window_data_param.context_pad 2 leaves nothing of a 4 crop for the window");
  wd_init(&r, src, root, 2, 4);
  r.wp.has_fg_fraction = 1;
  r.wp.fg_fraction = 1.5f;
  expect_setup_error(&r, "window_data_param.fg_fraction 1.5 is not in [0, 1]");

  /* the background window runs off the image: an error at forward, with no
   * context to clip it away */
  wd_init(&r, src, root, 2, 4);
  r.wp.fg_fraction = 0.0f;
  wd_ready(&r);
  ct_error err;
  assert_int_not_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
  snprintf(want, sizeof want,
           "%s:6: the window (10, 10, 20, 20) is not inside the 16x16 image %sim0.png", src, root);
  if (!strstr(err.msg, want)) fail_msg("message '%s' lacks '%s'", err.msg, want);
  wd_free(&r);
  /* a missing image file */
  const char *missing = "# 0\nnone.png\n3 16 16\n1\n1 0.9 1 1 4 4\n";
  tu_write_file(src, missing, strlen(missing));
  wd_init(&r, src, root, 2, 4);
  wd_ready(&r);
  assert_int_not_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
  snprintf(want, sizeof want, "%s: image 0: %snone.png: cannot open", src, root);
  if (!strstr(err.msg, want)) fail_msg("message '%s' lacks '%s'", err.msg, want);
  wd_free(&r);
}

/* A net in the form of Caffe's PASCAL fine-tuning example (transform_param
 * with mirror, crop_size and mean_file; window_data_param with thresholds,
 * fg_fraction, context_pad and crop_mode), TRAIN and TEST. */
static void test_pascal_style_net(void **state) {
  char src[600], root[620], mean_path[700], text[4096];
  wf_make_dir("window_net", "# 0\nim0.png\n3 16 16\n2\n3 0.7 2 2 9 9\n0 0.2 4 0 15 11\n"
                            "# 1\nim1.jpg\n3 16 16\n1\n5 0.5 0 3 12 15\n",
              src, root);
  snprintf(mean_path, sizeof mean_path, "%smean.binaryproto", root);
  float mean[3 * 12 * 12] = {0};
  for (int i = 0; i < 3 * 144; i++) mean[i] = 100.0f + (float)(i % 7);
  Caffe__BlobProto b = CAFFE__BLOB_PROTO__INIT;
  b.has_num = b.has_channels = b.has_height = b.has_width = 1;
  b.num = 1;
  b.channels = 3;
  b.height = b.width = 12;
  b.data = mean;
  b.n_data = 3 * 144;
  ct_error err;
  assert_int_equal(ct_proto_write_binary(&b.base, mean_path, &err), CT_OK);
  for (int phase = 0; phase < 2; phase++) {
    snprintf(text, sizeof text,
             "name: 'CaffeNet'\n"
             "layer { name: 'data' type: 'WindowData' top: 'data' top: 'label'\n"
             "  include { phase: %s }\n"
             "  transform_param { mirror: true crop_size: 10 mean_file: '%s' }\n"
             "  window_data_param { source: '%s' root_folder: '%s' batch_size: 8 fg_threshold: 0.5\n"
             "    bg_threshold: 0.5 fg_fraction: 0.25 context_pad: 2 crop_mode: 'warp' } }\n"
             "layer { name: 'fc' type: 'InnerProduct' bottom: 'data' top: 'fc'\n"
             "  inner_product_param { num_output: 6 weight_filler { type: 'gaussian' std: 0.01 } } }\n"
             "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'fc' bottom: 'label' }\n",
             phase ? "TEST" : "TRAIN", mean_path, src, root);
    ProtobufCMessage *m;
    assert_int_equal(
        ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), "net", &m, &err), CT_OK);
    ct_context ctx;
    assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 5, NULL), CT_OK);
    ct_net_opts o = {.phase = phase ? CT_PHASE_TEST : CT_PHASE_TRAIN, .quiet = true};
    ct_net *net = NULL;
    if (ct_net_init(&net, (Caffe__NetParameter *)m, &o, &ctx, &err) != CT_OK)
      fail_msg("net: %s", err.msg);
    protobuf_c_message_free_unpacked(m, NULL);
    const ct_tensor *label = ct_net_blob(net, "label");
    for (int it = 0; it < 3; it++) {
      double loss = 0;
      assert_int_equal(ct_net_forward(net, &loss, &err), CT_OK);
      assert_true(isfinite(loss) && loss > 0);
      for (int i = 0; i < 8; i++) {
        const int want_fg = i >= 6, got = (int)label->data[i];
        assert_true(want_fg ? got == 3 || got == 5 : got == 0);
      }
    }
    ct_net_free(net);
    ct_context_free(&ctx);
  }
}

/* --dummy_data replaces a WindowData by a DummyData of its batch and crop,
 * the crop read from window_data_param when transform_param has none. */
static void test_dummy_shape(void **state) {
  const char *text = "name: 't'\n"
                     "layer { name: 'win' type: 'WindowData' top: 'data' top: 'label'\n"
                     "  window_data_param { source: '/nowhere' batch_size: 5 crop_size: 7 } }\n";
  ProtobufCMessage *m;
  ct_error err;
  assert_int_equal(ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), "t", &m, &err),
                   CT_OK);
  Caffe__NetParameter *net = (Caffe__NetParameter *)m;
  assert_int_equal(ct_net_param_replace_data_layers(net, NULL, &err), CT_OK);
  const Caffe__LayerParameter *l = net->layer[0];
  assert_string_equal(l->type, "DummyData");
  const Caffe__BlobShape *s = l->dummy_data_param->shape[0];
  assert_int_equal(s->n_dim, 4);
  const int64_t want[4] = {5, 3, 7, 7};
  for (int i = 0; i < 4; i++) assert_int_equal(s->dim[i], want[i]);
  protobuf_c_message_free_unpacked(m, NULL);
}

int main(int argc, char **argv) {
  ct_log_set_level(CT_LOG_WARNING);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exact_window), cmocka_unit_test(test_context_pad),
      cmocka_unit_test(test_square),       cmocka_unit_test(test_mean_file),
      cmocka_unit_test(test_sampling),     cmocka_unit_test(test_reproducible),
      cmocka_unit_test(test_errors),       cmocka_unit_test(test_dummy_shape),
      cmocka_unit_test(test_pascal_style_net),
  };
  tu_filter_tests(argc, argv);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
