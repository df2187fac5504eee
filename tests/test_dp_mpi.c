/* Data parallelism across processes: `mpirun -np W cortado train` with CPU
 * workers (gradients through MPI) ends with the same parameters as one
 * `cortado train` with W times the batch on the same records, for W = 2,
 * 3, 4 and 8 (the rank counts of the 4- and 8-GPU machines, here on the
 * CPU) and with iter_size; a rank that fails ends the job with a message
 * naming the rank and the cause. */
#include <math.h>
#include <sys/stat.h>
#include <time.h>

#include "testutil.h"

#include "dp_fixture.h"

static int run_mpi(int ranks, const char *solver, const char *extra_flags, char **out) {
  return dpf_mpirun(ranks, solver, extra_flags, out);
}

static int run_single(const char *solver, char **out) {
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "%s train --solver=%s 2>&1", tu_cortado_bin(), solver);
  return tu_run(cmd, out);
}

static void check_equivalence(const char *name, int ranks, int b, const char *extra,
                              const char *flags) {
  dpf_equiv e;
  dpf_equiv_setup(&e, name, ranks * b, b, extra);
  char *out = NULL;
  int rc = run_single(e.ref_solver, &out);
  if (rc != 0) fail_msg("reference run failed (%d):\n%s", rc, out);
  free(out);
  rc = run_mpi(ranks, e.dp_solver, flags, &out);
  if (rc != 0) fail_msg("mpirun failed (%d):\n%s", rc, out);
  char want[256];
  snprintf(want, sizeof want, "Data-parallel training: 1 node, %d ranks (MPI processes), CPU; transport MPI",
           ranks);
  assert_non_null(strstr(out, want));
  dpf_effective_batch(want, sizeof want, ranks, b, "workers", extra);
  assert_non_null(strstr(out, want));
  /* ranks other than 0 are quiet: one "Starting Optimization" */
  const char *first = strstr(out, "Starting Optimization");
  assert_non_null(first);
  assert_null(strstr(first + 1, "Starting Optimization"));
  if (flags && strstr(flags, "--bucket_mb")) assert_non_null(strstr(out, "gradient averaging: 4 buckets of up to 0.0 MB"));
  free(out);
  double err = dpf_equiv_err(&e);
  printf("%s: mpirun -np %d x batch %d vs batch %d: max rel err %.3g\n", name, ranks, b, ranks * b, err);
  assert_true(err < 5e-5);
}

static void test_np2_equals_double_batch(void **state) { check_equivalence("dp_mpi_2", 2, 4, NULL, NULL); }

static void test_np3_equals_triple_batch(void **state) { check_equivalence("dp_mpi_3", 3, 3, NULL, NULL); }

static void test_np4_equals_4x_batch(void **state) { check_equivalence("dp_mpi_4", 4, 2, NULL, NULL); }

/* 8 ranks with 256-byte buckets: several all-reduces in flight at once
 * among 8 processes on a 2-core machine. */
static void test_np8_small_buckets_equal_8x_batch(void **state) {
  check_equivalence("dp_mpi_8", 8, 2, NULL, "--bucket_mb=0.000244140625");
}

/* iter_size 2 with 256-byte buckets (4 all-reduces launched from the
 * gradient hook on the last pass only). */
static void test_np2_iter_size_small_buckets(void **state) {
  check_equivalence("dp_mpi_iter_size", 2, 3, "iter_size: 2", "--bucket_mb=0.000244140625");
}

/* The values of every "Test net output #0: loss = X" line of a log, in order. */
static int test_losses(const char *log, double *v, int max) {
  int n = 0;
  for (const char *p = strstr(log, "Test net output #0: loss = "); p && n < max;
       p = strstr(p + 1, "Test net output #0: loss = "))
    v[n++] = atof(p + strlen("Test net output #0: loss = "));
  return n;
}

/* Tests run on every rank and log the mean over ranks: the same values as
 * one process (exactly at iteration 0, where the weights are the same bits;
 * later up to the training's rounding). */
static void test_np2_test_outputs_are_averaged(void **state) {
  const char *base = tu_tmpdir("dp_mpi_test_nets");
  char lmdb[4200], ref[4200], dp[4200], solver[4300];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 30, -1);
  snprintf(ref, sizeof ref, "%s/ref", base);
  snprintf(dp, sizeof dp, "%s/dp", base);
  mkdir(ref, 0755);
  mkdir(dp, 0755);
  const char *extra = "test_iter: 3 test_interval: 3";
  dpf_write_solver_tested(ref, lmdb, 8, 5, 6, 0, extra);
  dpf_write_solver_tested(dp, lmdb, 4, 5, 6, 0, extra);
  char *out_ref = NULL, *out_dp = NULL;
  snprintf(solver, sizeof solver, "%s/solver.prototxt", ref);
  int rc = run_single(solver, &out_ref);
  if (rc != 0) fail_msg("reference run failed (%d):\n%s", rc, out_ref);
  snprintf(solver, sizeof solver, "%s/solver.prototxt", dp);
  rc = run_mpi(2, solver, NULL, &out_dp);
  if (rc != 0) fail_msg("mpirun failed (%d):\n%s", rc, out_dp);
  double a[8], b[8];
  int na = test_losses(out_ref, a, 8), nb = test_losses(out_dp, b, 8);
  assert_int_equal(na, 3); /* iterations 0, 3 and 6 */
  assert_int_equal(nb, 3); /* logged once: by rank 0 */
  assert_true(a[0] == b[0]);
  for (int i = 1; i < 3; i++) assert_true(fabs(a[i] - b[i]) <= 1e-4 * fabs(a[i]));
  free(out_ref);
  free(out_dp);
}

/* Rank 1 reads record 5 (label out of range) at iteration 1: the job ends,
 * naming rank 1 and the cause, and the snapshot of iteration 1 stays. */
static void test_failing_rank_ends_the_job(void **state) {
  const char *base = tu_tmpdir("dp_mpi_fail");
  char lmdb[4200], dir[4200], solver[4300], snap[4300];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 20, 5);
  snprintf(dir, sizeof dir, "%s/run", base);
  mkdir(dir, 0755);
  dpf_write_solver(dir, lmdb, 2, 50, 1, NULL);
  snprintf(solver, sizeof solver, "%s/solver.prototxt", dir);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  char *out = NULL;
  int rc = run_mpi(2, solver, NULL, &out);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  assert_int_not_equal(rc, 0);
  if (!strstr(out, "rank 1 (CPU) failed at iteration 1: layer 'loss' (SoftmaxWithLoss): label 7 at index 0 "
                   "is out of range [0, 3)"))
    fail_msg("the failure is not named:\n%s", out);
  free(out);
  assert_true((double)(t1.tv_sec - t0.tv_sec) < 60.0);
  snprintf(snap, sizeof snap, "%s/snap_iter_1.caffemodel", dir);
  dpf_params p = dpf_read_caffemodel(snap);
  assert_true(p.n > 0);
  free(p.v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_np2_equals_double_batch),
      cmocka_unit_test(test_np3_equals_triple_batch),
      cmocka_unit_test(test_np4_equals_4x_batch),
      cmocka_unit_test(test_np8_small_buckets_equal_8x_batch),
      cmocka_unit_test(test_np2_iter_size_small_buckets),
      cmocka_unit_test(test_np2_test_outputs_are_averaged),
      cmocka_unit_test(test_failing_rank_ends_the_job),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
