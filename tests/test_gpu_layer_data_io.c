/* WindowData and HDF5Output on GPU 0:
 *  - WindowData's tops on the GPU are the CPU's for the same seed, and a
 *    small net trained over it on both devices (the GPU's batches copied
 *    by the program's feed, overlapped with the iteration) gives the same
 *    losses;
 *  - HDF5Output reads GPU bottoms back and writes the CPU's file.
 * Skipped (exit 77) without a GPU. */
#include <hdf5.h>

#include "core/log.h"
#include "layertest.h"
#include "runtime_nets.h"
#include "window_files.h"

static const char k_windows[] = "# 0\nim0.png\n3 16 16\n2\n1 0.9 0 0 7 7\n2 0.8 5 5 14 12\n"
                                "# 1\nim1.jpg\n3 16 16\n2\n0 0.1 1 1 9 9\n0 0.0 6 2 15 15\n";

/* The net text over the window file source, its images in root (malloc'd). */
static char *window_net(const char *root, const char *source) {
  char *t = malloc(4096);
  snprintf(t, 4096,
           "name: 'win'\n"
           "layer { name: 'data' type: 'WindowData' top: 'data' top: 'label'\n"
           "  transform_param { crop_size: 8 mirror: true mean_value: 100 }\n"
           "  window_data_param { source: '%s' root_folder: '%s' batch_size: 6 fg_fraction: 0.5\n"
           "    context_pad: 1 scale: 0.01 } }\n"
           "layer { name: 'ip' type: 'InnerProduct' bottom: 'data' top: 'ip'\n"
           "  inner_product_param { num_output: 3 weight_filler { type: 'xavier' } } }\n"
           "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n",
           source, root);
  return t;
}

static void test_window_data(void **state) {
  char src[600];
  char root[620];
  wf_make_dir("gpu_window", k_windows, src, root);
  char *text = window_net(root, src);
  ct_context cctx, gctx;
  assert_int_equal(ct_context_init(&cctx, CT_DEVICE_CPU, 7, NULL), CT_OK);
  rn_gpu_context(&gctx, 7);
  /* the tops of a plain forward */
  ct_net *cn = rn_net(text, &cctx, false), *gn = rn_net(text, &gctx, false);
  ct_error err;
  for (int it = 0; it < 3; it++) {
    assert_int_equal(ct_net_forward(cn, NULL, &err), CT_OK);
    assert_int_equal(ct_net_forward(gn, NULL, &err), CT_OK);
    const char *names[2] = {"data", "label"};
    for (int k = 0; k < 2; k++) {
      const ct_tensor *a = ct_net_blob(cn, names[k]), *b = ct_net_blob(gn, names[k]);
      float *h = malloc(b->count * sizeof(float));
      ct_tensor_download(b, h);
      assert_memory_equal(a->data, h, a->count * sizeof(float));
      free(h);
    }
  }
  ct_net_free(cn);
  ct_net_free(gn);
  /* training: the GPU program feeds the batches itself */
  const char *solver = "type: 'SGD' base_lr: 0.01 lr_policy: 'fixed' random_seed: 7 display: 0 "
                       "average_loss: 1";
  ct_solver *cs = rn_solver(text, solver, &cctx, NULL), *gs = rn_solver(text, solver, &gctx, NULL);
  for (int it = 0; it < 10; it++) {
    assert_int_equal(ct_solver_step(cs, 1, &err), CT_OK);
    assert_int_equal(ct_solver_step(gs, 1, &err), CT_OK);
    const double lc = cs->smoothed_loss, lg = gs->smoothed_loss;
    if (!(fabs(lc - lg) <= 1e-4 * fabs(lc) + 1e-6))
      fail_msg("iteration %d: CPU loss %.8g, GPU loss %.8g", it, lc, lg);
  }
  ct_solver_free(cs);
  ct_solver_free(gs);
  free(text);
  ct_context_free(&cctx);
  ct_context_free(&gctx);
}

static float *read_dataset(const char *path, const char *name, hsize_t *rows) {
  hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  assert_true(f >= 0);
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  assert_true(d >= 0);
  hid_t s = H5Dget_space(d);
  hsize_t dims[4];
  assert_int_equal(H5Sget_simple_extent_ndims(s), 4);
  H5Sget_simple_extent_dims(s, dims, NULL);
  *rows = dims[0];
  float *v = malloc((size_t)H5Sget_simple_extent_npoints(s) * sizeof(float));
  assert_true(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
  H5Sclose(s);
  H5Dclose(d);
  H5Fclose(f);
  return v;
}

static void test_hdf5_output(void **state) {
  const char *dir = tu_tmpdir("gpu_hdf5_output");
  char path[2][600];
  float data[2][2][24], label[2][2][4];
  for (int dev = 0; dev < 2; dev++) {
    snprintf(path[dev], sizeof path[dev], "%s/out%d.h5", dir, dev);
    Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
    Caffe__HDF5OutputParameter hp = CAFFE__HDF5_OUTPUT_PARAMETER__INIT;
    lp.name = "out";
    lp.type = "HDF5Output";
    hp.file_name = path[dev];
    lp.hdf5_output_param = &hp;
    tu_layer_case c;
    tu_layer_case_init(&c, &lp, dev ? 0 : CT_DEVICE_CPU, CT_PHASE_TEST, "2,3,2,2; 2,2", 0);
    for (int pass = 0; pass < 2; pass++) {
      tu_fill(c.bottom[0], -1, 1, 10 + (uint64_t)pass);
      tu_fill(c.bottom[1], 0, 5, 20 + (uint64_t)pass);
      ct_tensor_download(c.bottom[0], data[dev][pass]);
      ct_tensor_download(c.bottom[1], label[dev][pass]);
      tu_forward(&c);
    }
    tu_layer_case_free(&c);
  }
  assert_memory_equal(data[0], data[1], sizeof data[0]);
  hsize_t rows;
  float *d = read_dataset(path[1], "data", &rows);
  assert_int_equal(rows, 4);
  assert_memory_equal(d, data[1], sizeof data[1]);
  free(d);
  float *l = read_dataset(path[1], "label", &rows);
  assert_int_equal(rows, 4);
  assert_memory_equal(l, label[1], sizeof label[1]);
  free(l);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
  tu_require_gpu();
  ct_log_set_level(CT_LOG_WARNING);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window_data),
      cmocka_unit_test(test_hdf5_output),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
