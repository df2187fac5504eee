/* The table of cuDNN convolution algorithms as data-parallel worker
 * processes share it (rank 0 exports, the others import): entries survive
 * the round trip value for value, an import adds only the entries the
 * table lacks, and values that are not an export are refused (among them
 * a choice of Cortado's kernels out of range, or a TF32 one for a strict
 * FP32 key); the same through a file (CORTADO_CUDNN_ALGOS).  Needs a
 * CUDA build, not a GPU: the table is host memory (skipped, 77, in CPU-only
 * builds). */
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"
#ifdef CORTADO_HAVE_CUDA
#include <stddef.h>

#include "layers/conv/conv_algos.h"
#include "layers/conv/conv_igemm.h"

/* Entry i of a made-up export: key ints from 1 up (distinct per i), then
 * cc 90, 132 SMs, algorithms 1 / 0 / 3, math types 0 / 1 / 2, workspaces
 * 4096 / 0 / 2^40, benchmarked, rival choices 2 / 0 / 3. */
enum { REST = 15 };
static void make_entry(double *v, size_t per, int i) {
  const size_t key = per - REST;
  for (size_t k = 0; k < key; k++) v[k] = (double)(1000 * i + (int)k + 1);
  const double rest[REST] = {90, 132, 1, 0, 3, 0, 1, 2, 4096, 0, 1099511627776.0, 1, 2, 0, 3};
  for (int k = 0; k < REST; k++) v[key + k] = rest[k];
}

static void test_round_trip_and_missing_only(void **state) {
  const size_t per = ct_cudnn_conv_table_entry_values();
  assert_true(per > REST);
  const size_t n0 = ct_cudnn_conv_table_size();
  assert_int_equal(n0, 0); /* a fresh process benchmarked nothing */
  double *in = calloc(2 * per, sizeof *in);
  make_entry(in, per, 1);
  make_entry(in + per, per, 2);
  assert_int_equal(ct_cudnn_conv_table_import(in, 2 * per), 2);
  assert_int_equal(ct_cudnn_conv_table_size(), n0 + 2);
  /* again: nothing is missing */
  assert_int_equal(ct_cudnn_conv_table_import(in, 2 * per), 0);
  assert_int_equal(ct_cudnn_conv_table_size(), n0 + 2);
  const size_t need = ct_cudnn_conv_table_export(NULL, 0);
  assert_int_equal(need, (n0 + 2) * per);
  double *out = calloc(need, sizeof *out);
  assert_int_equal(ct_cudnn_conv_table_export(out, need), need);
  for (size_t k = 0; k < 2 * per; k++) assert_true(out[n0 * per + k] == in[k]);
  /* one value short: only the first entry fits, whole */
  memset(out, 0, need * sizeof *out);
  assert_int_equal(ct_cudnn_conv_table_export(out, need - 1), need);
  for (size_t k = 0; k < per; k++) assert_true(out[k] == in[k]);
  for (size_t k = per; k < need; k++) assert_true(out[k] == 0.0);
  free(out);
  free(in);
}

/* CORTADO_CUDNN_ALGOS's file: written whole, read back adding only what is
 * missing; a damaged or truncated file adds nothing; a missing one is -2. */
static void test_file(void **state) {
  const size_t per = ct_cudnn_conv_table_entry_values();
  double *v = calloc(per, sizeof *v);
  make_entry(v, per, 11);
  assert_true(ct_cudnn_conv_table_import(v, per) >= 0);
  const char *dir = tu_tmpdir("cudnn_table");
  char path[4200], bad[4200];
  snprintf(path, sizeof path, "%s/algos", dir);
  snprintf(bad, sizeof bad, "%s/bad", dir);
  assert_true(ct_cudnn_conv_table_write(path));
  const size_t n = ct_cudnn_conv_table_size();
  assert_int_equal(ct_cudnn_conv_table_read(path), 0); /* every entry is here already */
  size_t size = 0;
  char *bytes = tu_read_file(path, &size);
  assert_non_null(bytes);
  assert_int_equal(size, 16 + n * per * sizeof(double));
  /* the file with one value cut off, and with a wrong header */
  tu_write_file(bad, bytes, size - 8);
  assert_int_equal(ct_cudnn_conv_table_read(bad), -1);
  bytes[0] = 'X';
  tu_write_file(bad, bytes, size);
  assert_int_equal(ct_cudnn_conv_table_read(bad), -1);
  snprintf(bad, sizeof bad, "%s/none", dir);
  assert_int_equal(ct_cudnn_conv_table_read(bad), -2);
  assert_int_equal(ct_cudnn_conv_table_size(), n);
  free(bytes);
  free(v);
}

static void test_not_an_export_is_refused(void **state) {
  const size_t per = ct_cudnn_conv_table_entry_values();
  const size_t n0 = ct_cudnn_conv_table_size();
  double *v = calloc(per, sizeof *v);
  make_entry(v, per, 7);
  assert_int_equal(ct_cudnn_conv_table_import(v, per - 1), -1); /* not whole entries */
  v[0] = 1.5;                                                    /* not an int */
  assert_int_equal(ct_cudnn_conv_table_import(v, per), -1);
  make_entry(v, per, 7);
  v[0] = -3; /* negative */
  assert_int_equal(ct_cudnn_conv_table_import(v, per), -1);
  make_entry(v, per, 7);
  v[per - REST + 2] = 999; /* no such forward algorithm */
  assert_int_equal(ct_cudnn_conv_table_import(v, per), -1);
  make_entry(v, per, 7);
  v[per - 1] = 5000; /* a rival choice out of range */
  assert_int_equal(ct_cudnn_conv_table_import(v, per), -1);
  assert_int_equal(ct_cudnn_conv_table_size(), n0);
  free(v);
}

/* Rival choices: each direction's last configuration is taken where the
 * key allows TF32, one past it is refused, and so is a TF32 configuration
 * (the first or the last after the register-prefetch FP32 ones) for a
 * strict key, which takes the last register-prefetch FP32 one and the last
 * configuration (a pipelined FP32 one). */
static void test_rival_choices(void **state) {
  const size_t per = ct_cudnn_conv_table_entry_values();
  const size_t tf32 = offsetof(ct_cudnn_conv_key, tf32) / sizeof(int);
  const size_t fwd = per - 3, data = per - 2, filter = per - 1;
  const size_t n0 = ct_cudnn_conv_table_size();
  double *v = calloc(per, sizeof *v);
  make_entry(v, per, 20);
  assert_true(v[tf32] != 0.0);
  v[fwd] = CT_IGEMM_GEMM_CONFIGS;
  v[data] = CT_IGEMM_GEMM_CONFIGS;
  v[filter] = CT_IGEMM_WGRAD_CONFIGS;
  assert_int_equal(ct_cudnn_conv_table_import(v, per), 1);
  const size_t at[3] = {fwd, data, filter};
  const double past[3] = {CT_IGEMM_GEMM_CONFIGS + 1, CT_IGEMM_GEMM_CONFIGS + 1,
                          CT_IGEMM_WGRAD_CONFIGS + 1};
  const double first_tf32[3] = {CT_IGEMM_GEMM_FP32_CONFIGS + 1, CT_IGEMM_GEMM_FP32_CONFIGS + 1,
                                CT_IGEMM_WGRAD_FP32_CONFIGS + 1};
  const double last_tf32[3] = {CT_IGEMM_GEMM_FP32_CONFIGS + CT_IGEMM_GEMM_TF32_CONFIGS,
                               CT_IGEMM_GEMM_FP32_CONFIGS + CT_IGEMM_GEMM_TF32_CONFIGS,
                               CT_IGEMM_WGRAD_FP32_CONFIGS + CT_IGEMM_WGRAD_TF32_CONFIGS};
  for (int d = 0; d < 3; d++) {
    make_entry(v, per, 21);
    v[at[d]] = past[d];
    assert_int_equal(ct_cudnn_conv_table_import(v, per), -1);
    make_entry(v, per, 21);
    v[tf32] = 0;
    v[at[d]] = first_tf32[d];
    assert_int_equal(ct_cudnn_conv_table_import(v, per), -1);
    make_entry(v, per, 21);
    v[tf32] = 0;
    v[at[d]] = last_tf32[d];
    assert_int_equal(ct_cudnn_conv_table_import(v, per), -1);
  }
  make_entry(v, per, 21);
  v[tf32] = 0;
  v[fwd] = CT_IGEMM_GEMM_FP32_CONFIGS;
  v[data] = CT_IGEMM_GEMM_FP32_CONFIGS;
  v[filter] = CT_IGEMM_WGRAD_FP32_CONFIGS;
  assert_int_equal(ct_cudnn_conv_table_import(v, per), 1);
  make_entry(v, per, 22);
  v[tf32] = 0;
  v[fwd] = CT_IGEMM_GEMM_CONFIGS;
  v[data] = CT_IGEMM_GEMM_CONFIGS;
  v[filter] = CT_IGEMM_WGRAD_CONFIGS;
  assert_int_equal(ct_cudnn_conv_table_import(v, per), 1);
  assert_int_equal(ct_cudnn_conv_table_size(), n0 + 3);
  free(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_and_missing_only),
      cmocka_unit_test(test_not_an_export_is_refused),
      cmocka_unit_test(test_rival_choices),
      cmocka_unit_test(test_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void) {
  printf("a CPU-only build has no cuDNN table: skipped\n");
  return 77;
}
#endif
