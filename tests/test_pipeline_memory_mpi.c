/* What a pipeline stage holds, on CPU ranks under mpirun: each rank builds
 * only its stage's layers, so its parameters and blobs are its stage's,
 * as its log and stage 0's per-stage report say; 1F1B keeps rings of
 * P - s micro-batches where GPipe keeps M, and its peak host memory (the
 * allocator's counters) is lower.  The weights stay those of one process.
 *
 * The net (batch 16, 8 features): stage 0 is data, ip1 (8 -> 512), relu;
 * stage 1 is ip2 (512 -> 256), relu2, ip3 (256 -> 3), loss. */
#include <math.h>
#include <sys/stat.h>

#include "testutil.h"

#include "dp_fixture.h"

#define BATCH 16

/* dir/net.prototxt and dir/solver.prototxt (`extra` appended). */
static void write_solver(const char *dir, const char *lmdb, const char *extra) {
  char path[4400], text[8192];
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/net.prototxt", dir);
  snprintf(text, sizeof text,
           "name: 'wide'\n"
           "layer { name: 'data' type: 'Data' top: 'x' top: 'label'\n"
           "  data_param { source: '%s' backend: LMDB batch_size: %d } }\n"
           "layer { name: 'ip1' type: 'InnerProduct' bottom: 'x' top: 'h'\n"
           "  inner_product_param { num_output: 512 weight_filler { type: 'gaussian' std: 0.1 } } }\n"
           "layer { name: 'relu' type: 'ReLU' bottom: 'h' top: 'h' }\n"
           "layer { name: 'ip2' type: 'InnerProduct' bottom: 'h' top: 'h2'\n"
           "  inner_product_param { num_output: 256 weight_filler { type: 'xavier' } } }\n"
           "layer { name: 'relu2' type: 'ReLU' bottom: 'h2' top: 'h2' }\n"
           "layer { name: 'ip3' type: 'InnerProduct' bottom: 'h2' top: 'y'\n"
           "  inner_product_param { num_output: 3 weight_filler { type: 'gaussian' std: 0.1 } } }\n"
           "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'y' bottom: 'label' top: 'loss' }\n",
           lmdb, BATCH);
  tu_write_file(path, text, strlen(text));
  snprintf(path, sizeof path, "%s/solver.prototxt", dir);
  snprintf(text, sizeof text,
           "net: '%s/net.prototxt'\n"
           "type: 'SGD' base_lr: 0.05 momentum: 0.9 weight_decay: 0.001 lr_policy: 'fixed'\n"
           "max_iter: 3 display: 1 random_seed: 17 snapshot: 0 snapshot_prefix: '%s/snap'\n"
           "solver_mode: CPU\n%s\n",
           dir, dir, extra ? extra : "");
  tu_write_file(path, text, strlen(text));
}

static void must_run(int rc, char *out, const char *what) {
  if (rc != 0) fail_msg("%s failed (%d):\n%s", what, rc, out ? out : "");
}

/* The number after `key` on the line of `out` that starts (after the log
 * prefix) with `line`; fails the test when there is none. */
static double number_after(const char *out, const char *line, const char *key) {
  const char *at = strstr(out, line);
  if (!at) fail_msg("no line with '%s' in:\n%s", line, out);
  const char *eol = strchr(at, '\n');
  const char *k = strstr(at, key);
  if (!k || (eol && k > eol)) fail_msg("no '%s' on the line '%s'", key, line);
  return strtod(k + strlen(key), NULL);
}

/* The number just before `key` on the line with `line`. */
static double number_before(const char *out, const char *line, const char *key) {
  const char *at = strstr(out, line);
  if (!at) fail_msg("no line with '%s' in:\n%s", line, out);
  const char *eol = strchr(at, '\n');
  const char *k = strstr(at, key);
  if (!k || (eol && k > eol)) fail_msg("no '%s' on the line '%s'", key, line);
  while (k > at && k[-1] == ' ') k--;
  while (k > at && (k[-1] >= '0' && k[-1] <= '9')) k--;
  return strtod(k, NULL);
}

/* The last "Memory required for data: N" of out. */
static double data_memory(const char *out) {
  const char *key = "Memory required for data: ", *last = NULL;
  for (const char *p = strstr(out, key); p; p = strstr(p + 1, key)) last = p;
  if (!last) fail_msg("no '%s' in:\n%s", key, out);
  return strtod(last + strlen(key), NULL);
}

static const char *lmdb_in(const char *base) {
  static char lmdb[4200];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 64, -1);
  return lmdb;
}

/* Each stage holds its own layers' parameters and blobs; the weights are
 * those of one process with iter_size 2. */
static void test_stage_holds_its_layers(void **state) {
  const char *base = tu_tmpdir("pipe_memory");
  const char *lmdb = lmdb_in(base);
  char pipe[4300], one[4300], solver[4400];
  snprintf(pipe, sizeof pipe, "%s/pipe", base);
  snprintf(one, sizeof one, "%s/one", base);
  write_solver(pipe, lmdb, NULL);
  write_solver(one, lmdb, "iter_size: 2");
  char *out = NULL, *ref = NULL;
  snprintf(solver, sizeof solver, "%s/solver.prototxt", pipe);
  must_run(dpf_mpirun(2, solver, "--pipeline=relu --microbatches=2", &out), out, "the pipeline");
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "%s train --solver=%s/solver.prototxt 2>&1", tu_cortado_bin(), one);
  must_run(tu_run(cmd, &ref), ref, "one process");
  /* parameters: ip1's 8 x 512 + 512 on stage 0; ip2's 512 x 256 + 256 and
   * ip3's 256 x 3 + 3 on stage 1 (the flat buffer pads each to 32 values) */
  assert_int_equal((int)number_before(out, "Pipeline stage 0: forward", " parameters"), 4608);
  assert_int_equal((int)number_before(out, "Pipeline stage 1: forward", " parameters"), 132099);
  assert_int_equal((int)number_before(out, "learnable parameter blobs", " values"), 4608);
  assert_int_equal((int)number_before(ref, "learnable parameter blobs", " values"), 136736);
  /* the tops stage 0 holds (Caffe's sum: an in-place top counts again):
   * x 16 x 8, label 16, h 16 x 512 twice; one process adds h2 twice, y
   * and the loss */
  assert_int_equal((int)data_memory(out), 4 * (128 + 16 + 8192 + 8192));
  assert_int_equal((int)data_memory(ref), 4 * (128 + 16 + 8192 + 8192 + 4096 + 4096 + 48 + 1));
  /* blobs with storage: stage 1's (h, label, h2, y, the loss and their
   * diffs) are not stage 0's, and stage 0 holds none of stage 1's own */
  const double blobs0 = number_before(out, "Pipeline stage 0: forward", " bytes of blobs");
  const double blobs1 = number_before(out, "Pipeline stage 1: forward", " bytes of blobs");
  printf("blob bytes: stage 0 %.0f, stage 1 %.0f\n", blobs0, blobs1);
  assert_true(blobs0 >= 4.0 * (128 + 16 + 8192) && blobs0 < 4.0 * (128 + 16 + 3 * 8192 + 64));
  assert_true(blobs1 >= 4.0 * (8192 + 16 + 4096 + 48) && blobs1 < 4.0 * (3 * 8192 + 16 + 3 * 4096 + 256));
  /* stage 1 holds 132099 parameters with their gradients and momentum
   * (stage 0 held them only one layer at a time, to fill them, before
   * training): the host memory each holds and its peak while training */
  const double held0 = number_after(out, "Pipeline stage 0: forward", "host memory ");
  const double held1 = number_after(out, "Pipeline stage 1: forward", "host memory ");
  const double peak0 = number_after(out, "Pipeline stage 0: forward", "bytes, peak ");
  const double peak1 = number_after(out, "Pipeline stage 1: forward", "bytes, peak ");
  printf("host memory: stage 0 %.0f (peak %.0f), stage 1 %.0f (peak %.0f) bytes\n", held0, peak0,
         held1, peak1);
  assert_true(held1 > 3 * 4.0 * 132099);
  assert_true(held0 < 3 * 4.0 * 132099 / 4);
  assert_true(peak0 >= held0 && peak1 >= held1);
  assert_true(peak0 < peak1 / 2);
  free(out);
  free(ref);
  /* the same weights as one process, byte for byte */
  char a[4400], b[4400];
  snprintf(a, sizeof a, "%s/snap_iter_3.caffemodel", pipe);
  snprintf(b, sizeof b, "%s/snap_iter_3.caffemodel", one);
  size_t na = 0, nb = 0;
  char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
  assert_non_null(x);
  assert_int_equal(na, nb);
  assert_memory_equal(x, y, na);
  free(x);
  free(y);
}

/* A stage plans its blobs' values by lifetime (net_memory.c) as a whole
 * net does, keeping those that cross the cut: stage 1 (ip2, relu2, ip3,
 * loss) holds fewer blob bytes than with every value kept
 * (CORTADO_VALUE_PLANNING=0), stage 0 (whose blobs all cross or are data)
 * as many; the weights are the same. */
static void test_stage_plans_its_values(void **state) {
  const char *base = tu_tmpdir("pipe_memory_plan");
  const char *lmdb = lmdb_in(base);
  double blobs[2][2];
  const char *planned[2] = {"1", "0"};
  for (int k = 0; k < 2; k++) {
    char dir[4300], solver[4400];
    snprintf(dir, sizeof dir, "%s/plan%s", base, planned[k]);
    write_solver(dir, lmdb, NULL);
    snprintf(solver, sizeof solver, "%s/solver.prototxt", dir);
    setenv("CORTADO_VALUE_PLANNING", planned[k], 1); /* mpirun's ranks inherit it */
    char *out = NULL;
    must_run(dpf_mpirun(2, solver, "--pipeline=relu --microbatches=2", &out), out, planned[k]);
    unsetenv("CORTADO_VALUE_PLANNING");
    for (int s = 0; s < 2; s++) {
      char line[64];
      snprintf(line, sizeof line, "Pipeline stage %d: forward", s);
      blobs[k][s] = number_before(out, line, " bytes of blobs");
    }
    free(out);
  }
  printf("blob bytes planned: stage 0 %.0f, stage 1 %.0f; kept: %.0f, %.0f\n", blobs[0][0], blobs[0][1],
         blobs[1][0], blobs[1][1]);
  assert_true(blobs[0][0] == blobs[1][0]);
  /* h2's 16 x 256 values share the pool with y's and the diffs */
  assert_true(blobs[0][1] <= blobs[1][1] - 4.0 * 4096);
  char a[4400], b[4400];
  snprintf(a, sizeof a, "%s/plan1/snap_iter_3.caffemodel", base);
  snprintf(b, sizeof b, "%s/plan0/snap_iter_3.caffemodel", base);
  size_t na = 0, nb = 0;
  char *x = tu_read_file(a, &na), *y = tu_read_file(b, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(x, y, na);
  free(x);
  free(y);
}

/* 1F1B's rings of P - s micro-batches against GPipe's M: the buffers are
 * those sizes exactly, the peak host memory of each stage is lower, and the
 * weights are the same. */
static void test_1f1b_peak_below_gpipe(void **state) {
  const char *base = tu_tmpdir("pipe_1f1b_memory");
  const char *lmdb = lmdb_in(base);
  const char *sched[2] = {"gpipe", "1f1b"};
  double peak[2][2], buffers[2][2];
  for (int k = 0; k < 2; k++) {
    char dir[4300], solver[4400], flags[128];
    snprintf(dir, sizeof dir, "%s/%s", base, sched[k]);
    write_solver(dir, lmdb, NULL);
    snprintf(solver, sizeof solver, "%s/solver.prototxt", dir);
    snprintf(flags, sizeof flags, "--pipeline=relu --microbatches=8 --schedule=%s", sched[k]);
    char *out = NULL;
    must_run(dpf_mpirun(2, solver, flags, &out), out, sched[k]);
    for (int s = 0; s < 2; s++) {
      char line[64];
      snprintf(line, sizeof line, "Pipeline stage %d: forward", s);
      peak[k][s] = number_after(out, line, "bytes, peak ");
      buffers[k][s] = number_before(out, line, " bytes of stash, send and receive buffers");
    }
    free(out);
  }
  /* stage 0 stashes x and label (144 values), sends h and label (8208) and
   * receives h's diff (8192); stage 1 stashes h and label, sends h's diff
   * and receives h and label, and under 1F1B never recomputes (no stash)
   * with one micro-batch in flight */
  assert_int_equal((int)buffers[0][0], 8 * 4 * (144 + 8208 + 8192));
  assert_int_equal((int)buffers[1][0], 2 * 4 * (144 + 8208 + 8192));
  assert_int_equal((int)buffers[0][1], 8 * 4 * (8208 + 8192 + 8208));
  assert_int_equal((int)buffers[1][1], 1 * 4 * (8192 + 8208));
  /* the peak while training falls by the buffers' difference (within 1%:
   * small allocations of the runs differ) */
  for (int s = 0; s < 2; s++) {
    printf("stage %d peak host memory: GPipe %.0f, 1F1B %.0f bytes\n", s, peak[0][s], peak[1][s]);
    assert_true(peak[0][s] - peak[1][s] >= 0.99 * (buffers[0][s] - buffers[1][s]));
  }
  char a[4400], b[4400];
  snprintf(a, sizeof a, "%s/gpipe/snap_iter_3.caffemodel", base);
  snprintf(b, sizeof b, "%s/1f1b/snap_iter_3.caffemodel", base);
  dpf_params pa = dpf_read_caffemodel(a), pb = dpf_read_caffemodel(b);
  assert_int_equal(pa.n, pb.n);
  assert_memory_equal(pa.v, pb.v, pa.n * sizeof(float));
  free(pa.v);
  free(pb.v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stage_holds_its_layers),
      cmocka_unit_test(test_stage_plans_its_values),
      cmocka_unit_test(test_1f1b_peak_below_gpipe),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
