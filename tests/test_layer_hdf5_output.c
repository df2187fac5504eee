/* HDF5Output on the CPU: the file read back with libhdf5 (Caffe's datasets
 * "data" and "label" in their legacy 4-D shapes, every pass's rows
 * appended), read again by an HDF5Data layer, inside a net, and the errors
 * (no file name, a folder that is not there, rows that do not match, a
 * changed row shape). */
#include <hdf5.h>
#include <stdio.h>

#include "layertest.h"
#include "net/net.h"
#include "runtime_nets.h"
#include "testutil.h"

/* Dataset `name` of the file at path: its shape into dims (*nd axes) and
 * its values (malloc'd). */
static float *read_dataset(const char *path, const char *name, int *nd, hsize_t *dims) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  assert_true(f >= 0);
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  assert_true(d >= 0);
  hid_t s = H5Dget_space(d);
  *nd = H5Sget_simple_extent_ndims(s);
  H5Sget_simple_extent_dims(s, dims, NULL);
  hssize_t n = H5Sget_simple_extent_npoints(s);
  float *v = malloc((size_t)n * sizeof(float) + 1);
  assert_true(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
  return v;
}

typedef struct h5_param {
  Caffe__LayerParameter lp;
  Caffe__HDF5OutputParameter hp;
} h5_param;

static void make(h5_param *p, const char *file) {
  p->lp = (Caffe__LayerParameter)CAFFE__LAYER_PARAMETER__INIT;
  p->hp = (Caffe__HDF5OutputParameter)CAFFE__HDF5_OUTPUT_PARAMETER__INIT;
  p->lp.name = "out";
  p->lp.type = "HDF5Output";
  p->hp.file_name = (char *)file;
  p->lp.hdf5_output_param = &p->hp;
}

static void expect_dataset(const char *path, const char *name, int nd, const hsize_t *want_dims,
                           const float *want, size_t n) {
  int got_nd;
  hsize_t dims[8];
  float *v = read_dataset(path, name, &got_nd, dims);
  assert_int_equal(got_nd, nd);
  for (int i = 0; i < nd; i++) assert_int_equal(dims[i], want_dims[i]);
  assert_memory_equal(v, want, n * sizeof(float));
  free(v);
}

/* Two passes of 3 rows: after the first, Caffe's file; after the second,
 * 6 rows of each dataset. */
static void test_write_and_append(void **state) {
  char path[512];
  snprintf(path, sizeof path, "%s/out.h5", tu_tmpdir("hdf5_output"));
  h5_param p;
  make(&p, path);
  tu_layer_case c;
  tu_layer_case_init(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TEST, "3,2,2,2; 3", 0);
  /* 64-byte aligned: GCC 12 at -O3 -march=native (AVX-512) vectorises the
   * fill below with an aligned 32-byte store at data + 64, assuming an
   * alignment the frame did not give the array (a segfault once the
   * LayerParameter in p grew by a field) */
  float data[48] __attribute__((aligned(64))), label[6];
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < 24; i++) data[pass * 24 + i] = (float)(pass * 1000 + i);
    for (int i = 0; i < 3; i++) label[pass * 3 + i] = (float)(pass * 10 + i);
    tu_set_values(c.bottom[0], data + pass * 24);
    tu_set_values(c.bottom[1], label + pass * 3);
    tu_forward(&c);
    const hsize_t dd[4] = {3u * (pass + 1), 2, 2, 2}, ld[4] = {3u * (pass + 1), 1, 1, 1};
    expect_dataset(path, "data", 4, dd, data, 24u * (pass + 1));
    expect_dataset(path, "label", 4, ld, label, 3u * (pass + 1));
  }
  tu_layer_case_free(&c);
  /* a new layer starts the file afresh; a 2-D data blob is stored N x C x 1 x 1 */
  tu_layer_case_init(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TEST, "2,5; 2,1", 0);
  float d2[10], l2[2] = {7, 8};
  for (int i = 0; i < 10; i++) d2[i] = (float)i / 4;
  tu_set_values(c.bottom[0], d2);
  tu_set_values(c.bottom[1], l2);
  tu_forward(&c);
  const hsize_t dd[4] = {2, 5, 1, 1}, ld[4] = {2, 1, 1, 1};
  expect_dataset(path, "data", 4, dd, d2, 10);
  expect_dataset(path, "label", 4, ld, l2, 2);
  tu_layer_case_free(&c);
}

/* What HDF5Output writes, HDF5Data reads back (rows in order), and inside a
 * net fed by an Input layer over several forward passes. */
static void test_net_round_trip(void **state) {
  const char *dir = tu_tmpdir("hdf5_output_net");
  char path[512], list[512], text[2048];
  snprintf(path, sizeof path, "%s/features.h5", dir);
  snprintf(list, sizeof list, "%s/list.txt", dir);
  snprintf(text, sizeof text,
           "name: 'dump'\n"
           "layer { name: 'in' type: 'Input' top: 'x' top: 'y'\n"
           "  input_param { shape { dim: 4 dim: 3 } shape { dim: 4 } } }\n"
           "layer { name: 'out' type: 'HDF5Output' bottom: 'x' bottom: 'y'\n"
           "  hdf5_output_param { file_name: '%s' } }\n",
           path);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_net *net = rn_net(text, &ctx, false);
  ct_error err;
  for (int pass = 0; pass < 3; pass++) {
    float x[12], y[4];
    for (int i = 0; i < 12; i++) x[i] = (float)(pass * 100 + i);
    for (int i = 0; i < 4; i++) y[i] = (float)(pass * 4 + i);
    ct_tensor_upload(ct_net_blob(net, "x"), x);
    ct_tensor_upload(ct_net_blob(net, "y"), y);
    assert_int_equal(ct_net_forward(net, NULL, &err), CT_OK);
  }
  ct_net_free(net);
  snprintf(text, sizeof text, "%s\n", path);
  tu_write_file(list, text, strlen(text));
  Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
  Caffe__HDF5DataParameter hp = CAFFE__HDF5_DATA_PARAMETER__INIT;
  char *tops[2] = {"data", "label"};
  lp.name = "read";
  lp.type = "HDF5Data";
  lp.top = tops;
  lp.n_top = 2;
  hp.source = list;
  hp.has_batch_size = 1;
  hp.batch_size = 12;
  lp.hdf5_data_param = &hp;
  tu_layer_case c;
  tu_layer_case_init(&c, &lp, CT_DEVICE_CPU, CT_PHASE_TEST, "", 2);
  tu_forward(&c);
  assert_int_equal(c.top[0]->count, 12 * 3);
  for (int r = 0; r < 12; r++) {
    assert_float_equal(ct_f32(c.top[1])[r], r, 0);
    for (int j = 0; j < 3; j++)
      assert_float_equal(ct_f32(c.top[0])[r * 3 + j], (r / 4) * 100 + (r % 4) * 3 + j, 0);
  }
  tu_layer_case_free(&c);
  ct_context_free(&ctx);
}

static void expect_error(h5_param *p, const char *shapes, ct_status code, const char *msg) {
  tu_layer_case c;
  ct_error err;
  assert_int_equal(tu_layer_case_try(&c, &p->lp, CT_DEVICE_CPU, CT_PHASE_TEST, shapes, 0, &err), code);
  assert_string_equal(err.msg, msg);
  tu_layer_case_free(&c);
}

static void test_errors(void **state) {
  const char *dir = tu_tmpdir("hdf5_output_errors");
  char path[512], msg[1024];
  h5_param p;
  make(&p, NULL);
  expect_error(&p, "2,3; 2", CT_ERR_INVALID,
               "layer 'out' (HDF5Output): hdf5_output_param.file_name must be given");
  snprintf(path, sizeof path, "%s/missing/out.h5", dir);
  make(&p, path);
  snprintf(msg, sizeof msg,
           "layer 'out' (HDF5Output): %s: cannot create the HDF5 file (hdf5_output_param.file_name)",
           path);
  expect_error(&p, "2,3; 2", CT_ERR_IO, msg);
  snprintf(path, sizeof path, "%s/out.h5", dir);
  make(&p, path);
  expect_error(&p, "2,3; 3", CT_ERR_INVALID,
               "layer 'out' (HDF5Output): the data (2 3 (6)) and the label (3 (3)) must have the "
               "same number of rows");
  /* the row shape is fixed by the first pass */
  tu_layer_case c;
  tu_layer_case_init(&c, &p.lp, CT_DEVICE_CPU, CT_PHASE_TEST, "2,3; 2", 0);
  tu_forward(&c);
  int s[2] = {2, 4};
  ct_tensor_reshape(c.bottom[0], 2, s, NULL);
  ct_error err;
  assert_int_equal(ct_layer_reshape(c.l, c.bottom, c.top, &err), CT_ERR_INVALID);
  snprintf(msg, sizeof msg,
           "layer 'out' (HDF5Output): bottom 0 (2 4 (8)) no longer has the row shape of the "
           "dataset 'data' in %s",
           path);
  assert_string_equal(err.msg, msg);
  /* more rows per pass are fine */
  int s2[2] = {5, 3}, s3[1] = {5};
  ct_tensor_reshape(c.bottom[0], 2, s2, NULL);
  ct_tensor_reshape(c.bottom[1], 1, s3, NULL);
  assert_int_equal(ct_layer_reshape(c.l, c.bottom, c.top, &err), CT_OK);
  tu_forward(&c);
  tu_layer_case_free(&c);
  int nd;
  hsize_t dims[8];
  free(read_dataset(path, "label", &nd, dims));
  assert_int_equal(dims[0], 7);
}

/* Worker r > 0 of a data-parallel run writes its own file. */
static void test_rank_files(void **state) {
  const char *dir = tu_tmpdir("hdf5_output_ranks");
  char path[512], want[512];
  snprintf(path, sizeof path, "%s/out.h5", dir);
  h5_param p;
  make(&p, path);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ctx.rank = 1;
  ctx.world = 2;
  int shape[1] = {2};
  ct_tensor *b[2] = {ct_tensor_new_shape(CT_DEVICE_CPU, "a", 1, shape, false),
                     ct_tensor_new_shape(CT_DEVICE_CPU, "b", 1, shape, false)};
  ct_layer *l;
  ct_error err;
  assert_int_equal(ct_layer_create(&p.lp, CT_PHASE_TEST, &ctx, 2, 0, &l, &err), CT_OK);
  assert_int_equal(ct_layer_setup(l, b, NULL, &err), CT_OK);
  assert_int_equal(ct_layer_forward(l, b, NULL, NULL, &err), CT_OK);
  ct_layer_free(l);
  snprintf(want, sizeof want, "%s/out_rank1.h5", dir);
  int nd;
  hsize_t dims[8];
  free(read_dataset(want, "data", &nd, dims));
  assert_int_equal(dims[0], 2);
  ct_tensor_free(b[0]);
  ct_tensor_free(b[1]);
  ct_context_free(&ctx);
}

int main(int argc, char **argv) {
  ct_log_set_level(CT_LOG_WARNING);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_and_append),
      cmocka_unit_test(test_net_round_trip),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_rank_files),
  };
  tu_filter_tests(argc, argv);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
