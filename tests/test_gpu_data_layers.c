/* Data layers on GPU 0: the tops on the device must hold exactly what the
 * same layer gives on the CPU (Data over an LMDB, MemoryData). */
#include <stdio.h>

#include "data/datum.h"
#include "data/db.h"
#include "layers/layer.h"
#include "layers/memory_data_layer.h"
#include "layertest.h"
#include "testutil.h"

typedef struct run {
  ct_context ctx;
  ct_layer *l;
  ct_tensor *top[2];
} run;

static void run_setup(run *r, const Caffe__LayerParameter *lp, int device) {
  ct_error err;
  assert_int_equal(ct_context_init(&r->ctx, device, 7, &err), CT_OK);
  r->top[0] = ct_tensor_new(device, "data");
  r->top[1] = ct_tensor_new(device, "label");
  assert_int_equal(ct_layer_create(lp, CT_PHASE_TRAIN, &r->ctx, 0, 2, &r->l, &err), CT_OK);
  if (ct_layer_setup(r->l, NULL, r->top, &err) != CT_OK) fail_msg("%s", err.msg);
}

static void run_free(run *r) {
  ct_layer_free(r->l);
  ct_tensor_free(r->top[0]);
  ct_tensor_free(r->top[1]);
  ct_context_free(&r->ctx);
}

static void forward_both_and_compare(run *cpu, run *gpu) {
  ct_error err;
  assert_int_equal(ct_layer_forward(cpu->l, NULL, cpu->top, NULL, &err), CT_OK);
  assert_int_equal(ct_layer_forward(gpu->l, NULL, gpu->top, NULL, &err), CT_OK);
  for (int t = 0; t < 2; t++) {
    float *got = tu_values(gpu->top[t]);
    assert_int_equal(gpu->top[t]->count, cpu->top[t]->count);
    assert_memory_equal(got, cpu->top[t]->data, cpu->top[t]->count * sizeof(float));
    free(got);
  }
}

static void test_gpu_data_layer(void **state) {
  const char *dir = tu_tmpdir("gpu_data_layer");
  char path[4200];
  snprintf(path, sizeof path, "%s/lmdb", dir);
  ct_db *db;
  ct_error err;
  assert_int_equal(ct_db_open(&db, path, CT_DB_LMDB, CT_DB_NEW, &err), CT_OK);
  for (int k = 0; k < 10; k++) {
    uint8_t px[3 * 9 * 9];
    for (int i = 0; i < 243; i++) px[i] = (uint8_t)(i * 7 + k * 13);
    uint8_t *buf;
    size_t len;
    assert_int_equal(ct_datum_encode_raw(px, 3, 9, 9, k, &buf, &len, &err), CT_OK);
    char key[16];
    snprintf(key, sizeof key, "%08d", k);
    assert_int_equal(ct_db_put(db, key, 8, buf, len, &err), CT_OK);
    free(buf);
  }
  assert_int_equal(ct_db_commit(db, &err), CT_OK);
  ct_db_close(db);

  Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
  Caffe__DataParameter dp = CAFFE__DATA_PARAMETER__INIT;
  Caffe__TransformationParameter tp = CAFFE__TRANSFORMATION_PARAMETER__INIT;
  char *tops[2] = {"data", "label"};
  lp.name = "data";
  lp.type = "Data";
  lp.top = tops;
  lp.n_top = 2;
  lp.data_param = &dp;
  lp.transform_param = &tp;
  dp.source = path;
  dp.has_batch_size = 1;
  dp.batch_size = 4;
  dp.has_backend = 1;
  dp.backend = CAFFE__DATA_PARAMETER__DB__LMDB;
  tp.crop_size = 7;
  tp.mirror = 1;
  tp.scale = 0.5f;
  run cpu, gpu;
  run_setup(&cpu, &lp, CT_DEVICE_CPU);
  run_setup(&gpu, &lp, 0);
  for (int it = 0; it < 4; it++) forward_both_and_compare(&cpu, &gpu);
  run_free(&cpu);
  run_free(&gpu);
}

static void test_gpu_memory_data_layer(void **state) {
  Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
  Caffe__MemoryDataParameter mp = CAFFE__MEMORY_DATA_PARAMETER__INIT;
  char *tops[2] = {"data", "label"};
  lp.name = "mem";
  lp.type = "MemoryData";
  lp.top = tops;
  lp.n_top = 2;
  lp.memory_data_param = &mp;
  mp.has_batch_size = mp.has_channels = mp.has_height = mp.has_width = 1;
  mp.batch_size = 2;
  mp.channels = 2;
  mp.height = 3;
  mp.width = 3;
  float data[6 * 18], labels[6];
  tu_fill_uniform(data, 6 * 18, -1, 1, 3);
  for (int i = 0; i < 6; i++) labels[i] = (float)i;
  run cpu, gpu;
  run_setup(&cpu, &lp, CT_DEVICE_CPU);
  run_setup(&gpu, &lp, 0);
  ct_error err;
  assert_int_equal(ct_memory_data_set(cpu.l, data, labels, 6, &err), CT_OK);
  assert_int_equal(ct_memory_data_set(gpu.l, data, labels, 6, &err), CT_OK);
  for (int it = 0; it < 4; it++) forward_both_and_compare(&cpu, &gpu);
  run_free(&cpu);
  run_free(&gpu);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_data_layer),
      cmocka_unit_test(test_gpu_memory_data_layer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
