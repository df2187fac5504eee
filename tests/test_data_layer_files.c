/* ImageData (a list of image files), HDF5Data (a list of .h5 files) and
 * MemoryData (arrays from the program): values, order, shuffle, positions
 * and bad input with exact messages. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>

#include "data/image.h"
#include "data/pipeline.h"
#include "layers/layer.h"
#include "layers/memory_data_layer.h"
#include "testutil.h"

typedef struct run {
  ct_context ctx;
  Caffe__LayerParameter lp;
  char *tops[2];
  ct_layer *l;
  ct_tensor *top[2];
} run;

static void run_init(run *r, const char *type, int ntop) {
  memset(r, 0, sizeof *r);
  ct_error err;
  assert_int_equal(ct_context_init(&r->ctx, CT_DEVICE_CPU, 99, &err), CT_OK);
  caffe__layer_parameter__init(&r->lp);
  r->lp.name = "in";
  r->lp.type = (char *)type;
  r->tops[0] = "data";
  r->tops[1] = "label";
  r->lp.top = r->tops;
  r->lp.n_top = (size_t)ntop;
  r->top[0] = ct_tensor_new(CT_DEVICE_CPU, "data");
  r->top[1] = ct_tensor_new(CT_DEVICE_CPU, "label");
}

static ct_status run_setup(run *r, ct_phase phase, ct_error *err) {
  CT_TRY(ct_layer_create(&r->lp, phase, &r->ctx, 0, (int)r->lp.n_top, &r->l, err));
  return ct_layer_setup(r->l, NULL, r->top, err);
}

static void run_free(run *r) {
  ct_layer_free(r->l);
  ct_tensor_free(r->top[0]);
  ct_tensor_free(r->top[1]);
  ct_context_free(&r->ctx);
}

/* ---------------------------------------------------------------- ImageData */
static uint8_t img_px(int k, int y, int x, int c) { return (uint8_t)(k * 40 + y * 7 + x * 3 + c * 50); }

static void write_png(const char *path, int k, int h, int w) {
  ct_image img;
  ct_image_alloc(&img, h, w, 3);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int c = 0; c < 3; c++) img.data[(y * w + x) * 3 + c] = img_px(k, y, x, c);
  uint8_t *buf;
  size_t len;
  ct_error err;
  assert_int_equal(ct_image_encode_png(&img, 1, &buf, &len, &err), CT_OK);
  tu_write_file(path, (const char *)buf, len);
  free(buf);
  ct_image_free(&img);
}

static void test_image_data_layer(void **state) {
  const char *dir = tu_tmpdir("data_layer_image");
  char path[4300], list[4300], root[4300];
  snprintf(root, sizeof root, "%s/", dir);
  for (int k = 0; k < 5; k++) {
    snprintf(path, sizeof path, "%s/img %d.png", dir, k); /* a space in the name */
    write_png(path, k, 6, 4);
  }
  snprintf(list, sizeof list, "%s/list.txt", dir);
  const char *text = "img 0.png 10\nimg 1.png 11\r\n\nimg 2.png 12\nimg 3.png 13\nimg 4.png 14\n";
  tu_write_file(list, text, strlen(text));

  /* colour, no resize: pixels as written, BGR planes */
  run r;
  run_init(&r, "ImageData", 2);
  Caffe__ImageDataParameter ip = CAFFE__IMAGE_DATA_PARAMETER__INIT;
  ip.source = list;
  ip.root_folder = root;
  ip.batch_size = 2;
  r.lp.image_data_param = &ip;
  ct_error err;
  assert_int_equal(run_setup(&r, CT_PHASE_TEST, &err), CT_OK);
  assert_int_equal(r.top[0]->shape[1], 3);
  assert_int_equal(r.top[0]->shape[2], 6);
  assert_int_equal(r.top[0]->shape[3], 4);
  for (int it = 0; it < 3; it++) {
    assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
    for (int i = 0; i < 2; i++) {
      int k = (it * 2 + i) % 5;
      assert_float_equal(ct_f32(r.top[1])[i], 10 + k, 0);
      for (int c = 0; c < 3; c++)
        for (int y = 0; y < 6; y++)
          for (int x = 0; x < 4; x++)
            assert_float_equal(ct_f32(r.top[0])[((i * 3 + c) * 6 + y) * 4 + x], img_px(k, y, x, c), 0);
    }
  }
  run_free(&r);

  /* gray, resized to 3x2 (an exact halving: 2x2 means), shuffled per epoch */
  run_init(&r, "ImageData", 2);
  ip.is_color = 0;
  ip.new_height = 3;
  ip.new_width = 2;
  ip.shuffle = 1;
  ip.batch_size = 5;
  r.lp.image_data_param = &ip;
  assert_int_equal(run_setup(&r, CT_PHASE_TRAIN, &err), CT_OK);
  assert_int_equal(r.top[0]->shape[1], 1);
  assert_int_equal(r.top[0]->shape[2], 3);
  assert_int_equal(r.top[0]->shape[3], 2);
  uint32_t perm[5];
  for (int e = 0; e < 2; e++) {
    assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
    ct_pipeline_permutation(99, (uint64_t)e, true, 5, perm);
    for (int i = 0; i < 5; i++) {
      int k = (int)perm[i];
      assert_float_equal(ct_f32(r.top[1])[i], 10 + k, 0);
      int g[2][2];
      for (int dy = 0; dy < 2; dy++)
        for (int dx = 0; dx < 2; dx++) {
          int b = img_px(k, 2 + dy, 2 + dx, 0), gr = img_px(k, 2 + dy, 2 + dx, 1),
              rr = img_px(k, 2 + dy, 2 + dx, 2);
          g[dy][dx] = (b * 1868 + gr * 9617 + rr * 4899 + 8192) >> 14;
        }
      int want = (g[0][0] + g[0][1] + g[1][0] + g[1][1] + 2) >> 2;
      assert_float_equal(ct_f32(r.top[0])[i * 6 + 1 * 2 + 1], want, 0); /* output (1,1) */
    }
  }
  run_free(&r);

  /* bad input */
  snprintf(path, sizeof path, "%s/list_missing.txt", dir);
  tu_write_file(path, "img 0.png 1\nnope.png 2\n", 23);
  run_init(&r, "ImageData", 2);
  ip = (Caffe__ImageDataParameter)CAFFE__IMAGE_DATA_PARAMETER__INIT;
  ip.source = path;
  ip.root_folder = root;
  ip.batch_size = 2;
  r.lp.image_data_param = &ip;
  assert_int_equal(run_setup(&r, CT_PHASE_TEST, &err), CT_OK);
  assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_ERR_NOTFOUND);
  char want[9000];
  snprintf(want, sizeof want,
           "layer 'in' (ImageData): %s:2: %snope.png: cannot open: No such file or directory", path, root);
  assert_string_equal(err.msg, want);
  run_free(&r);

  snprintf(path, sizeof path, "%s/list_bad.txt", dir);
  tu_write_file(path, "img 0.png 1\nimg1.png\n", 21);
  run_init(&r, "ImageData", 2);
  ip.source = path;
  r.lp.image_data_param = &ip;
  assert_int_equal(run_setup(&r, CT_PHASE_TEST, &err), CT_ERR_PARSE);
  snprintf(want, sizeof want, "layer 'in' (ImageData): %s:2: expected 'path label', got 'img1.png'", path);
  assert_string_equal(err.msg, want);
  run_free(&r);

  run_init(&r, "ImageData", 2);
  ip.source = list;
  ip.new_height = 5;
  r.lp.image_data_param = &ip;
  assert_int_equal(run_setup(&r, CT_PHASE_TEST, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "layer 'in' (ImageData): image_data_param.new_height and new_width must be given together");
  run_free(&r);
}

/* ------------------------------------------------------------------ HDF5Data */
static void write_h5(const char *path, int rows, int first, bool with_label) {
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  assert_true(f >= 0);
  hsize_t dims[3] = {(hsize_t)rows, 2, 3};
  float *data = calloc((size_t)rows * 6, sizeof *data);
  double *label = calloc((size_t)rows, sizeof *label);
  for (int r = 0; r < rows; r++) {
    for (int j = 0; j < 6; j++) data[r * 6 + j] = (float)((first + r) * 100 + j);
    label[r] = first + r;
  }
  hid_t s = H5Screate_simple(3, dims, NULL);
  hid_t d = H5Dcreate2(f, "data", H5T_NATIVE_FLOAT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(d);
  H5Sclose(s);
  if (with_label) {
    s = H5Screate_simple(1, dims, NULL);
    d = H5Dcreate2(f, "label", H5T_NATIVE_DOUBLE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, label);
    H5Dclose(d);
    H5Sclose(s);
  }
  H5Fclose(f);
  free(data);
  free(label);
}

static void test_hdf5_data_layer(void **state) {
  const char *dir = tu_tmpdir("data_layer_hdf5");
  char a[4300], b[4300], list[4300], text[9000];
  snprintf(a, sizeof a, "%s/a.h5", dir);
  snprintf(b, sizeof b, "%s/b.h5", dir);
  write_h5(a, 4, 0, true);
  write_h5(b, 3, 4, true);
  snprintf(list, sizeof list, "%s/list.txt", dir);
  snprintf(text, sizeof text, "%s\n  %s\n", a, b);
  tu_write_file(list, text, strlen(text));

  for (int shuffle = 0; shuffle < 2; shuffle++) {
    run r;
    run_init(&r, "HDF5Data", 2);
    Caffe__HDF5DataParameter hp = CAFFE__HDF5_DATA_PARAMETER__INIT;
    hp.source = list;
    hp.has_batch_size = 1;
    hp.batch_size = 3;
    hp.shuffle = shuffle;
    r.lp.hdf5_data_param = &hp;
    ct_error err;
    assert_int_equal(run_setup(&r, CT_PHASE_TRAIN, &err), CT_OK);
    assert_int_equal(r.top[0]->ndim, 3);
    assert_int_equal(r.top[0]->shape[0], 3);
    assert_int_equal(r.top[0]->shape[1], 2);
    assert_int_equal(r.top[0]->shape[2], 3);
    assert_int_equal(r.top[1]->ndim, 1);
    int seen[2][7] = {{0}};
    Caffe__CortadoDataPosition pos = CAFFE__CORTADO_DATA_POSITION__INIT;
    float after[3 * 6];
    for (int it = 0; it < 5; it++) {
      if (it == 2) assert_int_equal(r.l->ops->get_position(r.l, &pos), CT_OK);
      assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
      if (it == 2) memcpy(after, r.top[0]->data, sizeof after);
      for (int i = 0; i < 3; i++) {
        int m = it * 3 + i, row = (int)ct_f32(r.top[1])[i];
        if (!shuffle) assert_int_equal(row, m % 7);
        for (int j = 0; j < 6; j++) assert_float_equal(ct_f32(r.top[0])[i * 6 + j], row * 100 + j, 0);
        if (m < 14) seen[m / 7][row]++;
      }
    }
    for (int e = 0; e < 2; e++)
      for (int k = 0; k < 7; k++) assert_int_equal(seen[e][k], 1);
    assert_int_equal(pos.epoch * 7 + pos.cursor, 6);
    assert_int_equal(r.l->ops->set_position(r.l, &pos, &err), CT_OK);
    assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
    assert_memory_equal(r.top[0]->data, after, sizeof after);
    free(pos.layer);
    run_free(&r);
  }

  /* a file without the label dataset */
  char c[4300];
  snprintf(c, sizeof c, "%s/c.h5", dir);
  write_h5(c, 2, 0, false);
  snprintf(list, sizeof list, "%s/list_bad.txt", dir);
  snprintf(text, sizeof text, "%s\n%s\n", a, c);
  tu_write_file(list, text, strlen(text));
  run r;
  run_init(&r, "HDF5Data", 2);
  Caffe__HDF5DataParameter hp = CAFFE__HDF5_DATA_PARAMETER__INIT;
  hp.source = list;
  hp.has_batch_size = 1;
  hp.batch_size = 2;
  r.lp.hdf5_data_param = &hp;
  ct_error err;
  assert_int_equal(run_setup(&r, CT_PHASE_TRAIN, &err), CT_ERR_NOTFOUND);
  char want[9000];
  snprintf(want, sizeof want, "layer 'in' (HDF5Data): %s: %s: no dataset 'label'", list, c);
  assert_string_equal(err.msg, want);
  run_free(&r);

  /* a listed file that is not HDF5 */
  snprintf(c, sizeof c, "%s/not.h5", dir);
  tu_write_file(c, "plain text", 10);
  snprintf(text, sizeof text, "%s\n", c);
  tu_write_file(list, text, strlen(text));
  run_init(&r, "HDF5Data", 2);
  r.lp.hdf5_data_param = &hp;
  assert_int_equal(run_setup(&r, CT_PHASE_TRAIN, &err), CT_ERR_IO);
  snprintf(want, sizeof want, "layer 'in' (HDF5Data): %s: %s: cannot open as HDF5", list, c);
  assert_string_equal(err.msg, want);
  run_free(&r);
}

/* ---------------------------------------------------------------- MemoryData */
static void test_memory_data_layer(void **state) {
  run r;
  run_init(&r, "MemoryData", 2);
  Caffe__MemoryDataParameter mp = CAFFE__MEMORY_DATA_PARAMETER__INIT;
  mp.has_batch_size = mp.has_channels = mp.has_height = mp.has_width = 1;
  mp.batch_size = 2;
  mp.channels = 1;
  mp.height = 2;
  mp.width = 3;
  r.lp.memory_data_param = &mp;
  ct_error err;
  assert_int_equal(run_setup(&r, CT_PHASE_TRAIN, &err), CT_OK);
  assert_int_equal(r.top[0]->count, 12);
  assert_int_equal(r.top[1]->ndim, 1);
  assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg,
                      "layer 'in' (MemoryData): no data: give the layer its arrays before the first forward (set_input_arrays)");
  float data[4 * 6], labels[4];
  for (int i = 0; i < 24; i++) data[i] = (float)i;
  for (int i = 0; i < 4; i++) labels[i] = (float)(i + 50);
  assert_int_equal(ct_memory_data_set(r.l, data, labels, 3, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "n (3) must be a positive multiple of batch_size (2)");
  assert_int_equal(ct_memory_data_set(r.l, data, labels, 4, &err), CT_OK);
  for (int it = 0; it < 3; it++) {
    assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
    int first = (it % 2) * 2;
    assert_memory_equal(r.top[0]->data, data + first * 6, 12 * sizeof(float));
    assert_float_equal(ct_f32(r.top[1])[1], labels[first + 1], 0);
  }
  run_free(&r);

  run_init(&r, "MemoryData", 1);
  mp.has_height = 0;
  r.lp.memory_data_param = &mp;
  assert_int_equal(run_setup(&r, CT_PHASE_TRAIN, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer 'in' (MemoryData): memory_data_param.height must be positive");
  run_free(&r);

  run_init(&r, "ImageData", 1);
  Caffe__ImageDataParameter ip = CAFFE__IMAGE_DATA_PARAMETER__INIT;
  ip.source = "/nonexistent/list.txt";
  r.lp.image_data_param = &ip;
  assert_int_equal(run_setup(&r, CT_PHASE_TRAIN, &err), CT_ERR_NOTFOUND);
  assert_string_equal(err.msg,
                      "layer 'in' (ImageData): /nonexistent/list.txt: cannot open: No such file or directory");
  float one = 0;
  assert_int_equal(ct_memory_data_set(r.l, &one, NULL, 1, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "layer in (ImageData) is not a MemoryData layer");
  run_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_image_data_layer),
      cmocka_unit_test(test_hdf5_data_layer),
      cmocka_unit_test(test_memory_data_layer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
