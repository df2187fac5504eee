/* Pipeline parallelism on CPU ranks: `mpirun -np P cortado train
 * --pipeline=... --microbatches=M` ends with the parameters of one
 * `cortado train` on the same records:
 *   - bit for bit against one process with iter_size M (the same sums in
 *     the same order: the micro-batches' gradients are added in order);
 *   - within 1e-6 against one process with M times the batch (the same
 *     gradient, the mean over the batch summed in another order);
 * for 2 stages and for 3 (a stage of one in-place ReLU; the labels go from
 * stage 0 straight to stage 2), with one micro-batch and with several, in
 * the GPipe and the 1F1B order, and
 * a run resumed from a pipeline snapshot goes on as one that was not
 * stopped; 2 data-parallel replicas of 2 stages (mpirun -np 4) end with
 * the weights of 2 data-parallel workers bit for bit, and within 1e-6 of
 * one process with the same global batch.  Stage 0 writes the snapshots, whole (every stage's
 * parameters): the same bytes as the single process's .caffemodel. */
#include <sys/stat.h>

#include "core/cpu.h"
#include "testutil.h"

#include "dp_fixture.h"

static int run_mpi(int ranks, const char *solver, const char *flags, char **out) {
  return dpf_mpirun(ranks, solver, flags, out);
}

static int run_single(const char *solver, const char *flags, char **out) {
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "%s train --solver=%s %s 2>&1", tu_cortado_bin(), solver, flags);
  return tu_run(cmd, out);
}

static void must_run(int rc, char *out, const char *what) {
  if (rc != 0) fail_msg("%s failed (%d):\n%s", what, rc, out ? out : "");
}

/* Writes folder `sub` of base with a solver of batch b (and `extra`). */
static void setup(char *solver, size_t size, const char *base, const char *sub, const char *lmdb, int b,
                  int max_iter, int snapshot_every, const char *extra) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", base, sub);
  mkdir(dir, 0755);
  dpf_write_solver(dir, lmdb, b, max_iter, snapshot_every, extra);
  snprintf(solver, size, "%s/solver.prototxt", dir);
}

/* P stages (cut after `cuts`) x M micro-batches of b against one process
 * with iter_size M (bit for bit) and, unless `also` (solver fields for
 * every run) clips gradients or `run_flags` (command-line flags of every
 * run) ask for 16-bit layers, with batch M x b (1e-6; Caffe clips the sum
 * over iter_size passes, so clipping tells the two apart; bfloat16 rounds
 * each batch's sums).  Returns the pipeline's output (caller frees). */
/* The first `from` in dir's net becomes `to`. */
static void replace_in_net(const char *dir, const char *from, const char *to) {
  char path[4400];
  snprintf(path, sizeof path, "%s/net.prototxt", dir);
  size_t n = 0;
  char *text = tu_read_file(path, &n);
  const char *at = strstr(text, from);
  assert_non_null(at);
  const size_t head = (size_t)(at - text), nf = strlen(from), nt = strlen(to);
  char *out = malloc(n - nf + nt + 1);
  memcpy(out, text, head);
  memcpy(out + head, to, nt);
  memcpy(out + head + nt, at + nf, n - head - nf);
  tu_write_file(path, out, n - nf + nt);
  free(out);
  free(text);
}

/* Puts `layers` (prototxt) into dir's net before the layer named `before`. */
static void insert_layers(const char *dir, const char *before, const char *layers) {
  char anchor[128], with[2048];
  snprintf(anchor, sizeof anchor, "layer { name: '%s'", before);
  snprintf(with, sizeof with, "%s%s", layers, anchor);
  replace_in_net(dir, anchor, with);
}

/* Extra layers of a check's nets (every run's): none, a BatchNorm and its
 * Scale after ip1 (before the ReLU), a Dropout after the ReLU, or before
 * ip1 two Convolutions (1 -> 8 -> 8 channels along the 8 features: oneDNN
 * keeps its reorder of the second's x from forward for the weight
 * gradient), a MAX Pooling (its argmax) and an LRN (its scale); or a
 * Power in place after the ReLU (its copy of its input). */
typedef enum { PLAIN, BATCHNORM, DROPOUT, CONVOLUTIONS, POWER } extra_layers;

static void add_layers(const char *dir, extra_layers what) {
  if (what == CONVOLUTIONS) {
    insert_layers(dir, "ip1",
                  "layer { name: 'c1' type: 'Convolution' bottom: 'x' top: 'c1'\n"
                  "  convolution_param { num_output: 8 kernel_h: 1 kernel_w: 3\n"
                  "    weight_filler { type: 'gaussian' std: 0.3 } } }\n"
                  "layer { name: 'c2' type: 'Convolution' bottom: 'c1' top: 'c2'\n"
                  "  convolution_param { num_output: 8 kernel_h: 1 kernel_w: 3 pad_h: 0 pad_w: 1\n"
                  "    weight_filler { type: 'gaussian' std: 0.3 } } }\n"
                  "layer { name: 'p1' type: 'Pooling' bottom: 'c2' top: 'p1'\n"
                  "  pooling_param { pool: MAX kernel_h: 1 kernel_w: 2 stride_h: 1 stride_w: 2 } }\n"
                  "layer { name: 'n1' type: 'LRN' bottom: 'p1' top: 'n1' lrn_param { local_size: 3 } }\n");
    replace_in_net(dir, "bottom: 'x' top: 'h'", "bottom: 'n1' top: 'h'");
  }
  if (what == BATCHNORM)
    insert_layers(dir, "relu",
                  "layer { name: 'bn' type: 'BatchNorm' bottom: 'h' top: 'h'\n"
                  "  batch_norm_param { moving_average_fraction: 0.9 } }\n"
                  "layer { name: 'sc' type: 'Scale' bottom: 'h' top: 'h' scale_param { bias_term: true } }\n");
  if (what == POWER) /* in place: it keeps a copy of its input */
    insert_layers(dir, "ip2",
                  "layer { name: 'pw' type: 'Power' bottom: 'h' top: 'h' "
                  "power_param { power: 2 scale: 0.5 shift: 0.1 } }\n");
  if (what == DROPOUT)
    insert_layers(dir, "ip2",
                  "layer { name: 'drop' type: 'Dropout' bottom: 'h' top: 'h' "
                  "dropout_param { dropout_ratio: 0.3 } }\n");
}

static char *check_stages_run(const char *name, int stages, const char *cuts, int m, int b,
                              const char *schedule, const char *also, const char *run_flags,
                              extra_layers extra_net, const char *pipe_flags) {
  const char *base = tu_tmpdir(name);
  char lmdb[4200], pipe[4400], acc[4400], big[4400], extra[256], flags[256], path[2][4400];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 45, -1);
  const bool clips = also && strstr(also, "clip_gradients");
  const bool half = run_flags && strstr(run_flags, "--precision=bf16");
  if (!run_flags) run_flags = "";
  snprintf(extra, sizeof extra, "iter_size: %d %s", m, also ? also : "");
  setup(pipe, sizeof pipe, base, "pipe", lmdb, b, 6, 0, also);
  setup(acc, sizeof acc, base, "acc", lmdb, b, 6, 0, extra);
  setup(big, sizeof big, base, "big", lmdb, m * b, 6, 0, also);
  const char *sub[3] = {"pipe", "acc", "big"};
  for (int k = 0; k < 3; k++) {
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/%s", base, sub[k]);
    add_layers(dir, extra_net);
  }
  char *out = NULL;
  snprintf(flags, sizeof flags, "--pipeline=%s --microbatches=%d --schedule=%s %s %s", cuts, m, schedule,
           run_flags, pipe_flags ? pipe_flags : "");
  must_run(run_mpi(stages, pipe, flags, &out), out, "the pipeline");
  char want[256];
  snprintf(want, sizeof want, "Pipeline stage 0 of %d: layers 0-", stages);
  assert_non_null(strstr(out, want));
  snprintf(want, sizeof want, "%d micro-batch%s (%s)", m, m == 1 ? "" : "es",
           strcmp(schedule, "1f1b") == 0 ? "1F1B" : "GPipe");
  assert_non_null(strstr(out, want));
  /* stage 0 displays the loss stage's loss */
  assert_non_null(strstr(out, "Train net output #0: loss = "));
  assert_null(strstr(out, "Train net output #0: loss = 0 "));
  char *pipe_out = out;
  must_run(run_single(acc, run_flags, &out), out, "iter_size reference");
  if (clips) {
    /* the stages clipped by the whole gradient's norm: the one process's */
    const char *a = strstr(pipe_out, "Gradient clipping: scaling down gradients (L2 norm ");
    const char *c = strstr(out, "Gradient clipping: scaling down gradients (L2 norm ");
    if (!a || !c) fail_msg("no clipping logged:\n%s", pipe_out);
    assert_memory_equal(a, c, (size_t)(strchr(c, '\n') - c));
  }
  free(out);
  must_run(run_single(big, run_flags, &out), out, "big batch reference");
  free(out);
  snprintf(path[0], sizeof path[0], "%s/pipe/snap_iter_6.caffemodel", base);
  snprintf(path[1], sizeof path[1], "%s/acc/snap_iter_6.caffemodel", base);
  const double exact = dpf_max_abs_diff(path[0], path[1]);
  snprintf(path[1], sizeof path[1], "%s/big/snap_iter_6.caffemodel", base);
  const double near = dpf_max_abs_diff(path[0], path[1]);
  printf("%s: %d stages x %d micro-batches of %d: max |diff| %.3g vs iter_size %d, %.3g vs batch %d\n",
         name, stages, m, b, exact, m, near, m * b);
  assert_true(exact == 0.0);
  /* BatchNorm normalises each micro-batch alone: not the big batch's; a
   * Dropout's masks are drawn per batch */
  if (!clips && !half && extra_net == PLAIN) assert_true(near < 1e-6);
  /* the whole file, bytes and all, is the one process's */
  snprintf(path[1], sizeof path[1], "%s/acc/snap_iter_6.caffemodel", base);
  size_t na = 0, nb = 0;
  char *a = tu_read_file(path[0], &na), *c = tu_read_file(path[1], &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(a, c, na);
  free(a);
  free(c);
  return pipe_out;
}

static char *check_stages_with(const char *name, int stages, const char *cuts, int m, int b,
                               const char *schedule, const char *also) {
  return check_stages_run(name, stages, cuts, m, b, schedule, also, NULL, PLAIN, NULL);
}

static void check_stages(const char *name, int stages, const char *cuts, int m, int b,
                         const char *schedule) {
  free(check_stages_with(name, stages, cuts, m, b, schedule, NULL));
}

/* The "Test net output" lines of a run's log, in order, one string
 * (caller frees). */
static char *test_lines(const char *out) {
  size_t cap = strlen(out) + 1, n = 0;
  char *lines = calloc(cap, 1);
  for (const char *p = strstr(out, "Test net output"); p; p = strstr(p + 1, "Test net output")) {
    const char *end = strchr(p, '\n');
    const size_t len = end ? (size_t)(end - p) + 1 : strlen(p);
    memcpy(lines + n, p, len);
    n += len;
  }
  return lines;
}

/* Test nets run as pipelines too: cut after the same layers, one forward
 * through the stages per test iteration; the scores are the one process's,
 * digit for digit, with 2 stages (GPipe) and with 3 (1F1B). */
static void test_test_nets(void **state) {
  const char *base = tu_tmpdir("pipe_tests");
  char lmdb[4200], dir[4400], pipe[4400], acc[4400];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 45, -1);
  snprintf(dir, sizeof dir, "%s/pipe", base);
  mkdir(dir, 0755);
  dpf_write_solver_tested(dir, lmdb, 3, 5, 6, 0, "test_iter: 3 test_interval: 3");
  snprintf(pipe, sizeof pipe, "%s/solver.prototxt", dir);
  snprintf(dir, sizeof dir, "%s/acc", base);
  mkdir(dir, 0755);
  dpf_write_solver_tested(dir, lmdb, 3, 5, 6, 0, "test_iter: 3 test_interval: 3 iter_size: 2");
  snprintf(acc, sizeof acc, "%s/solver.prototxt", dir);
  char *out = NULL;
  must_run(run_single(acc, "", &out), out, "the one process");
  char *want = test_lines(out);
  free(out);
  /* tests at iterations 0, 3 and 6: a loss line each */
  size_t nlines = 0;
  for (const char *p = want; (p = strchr(p, '\n')); p++) nlines++;
  assert_int_equal(nlines, 3);
  const char *runs[2][2] = {{"2", "--pipeline=relu --microbatches=2"},
                            {"3", "--pipeline=ip1,relu --microbatches=2 --schedule=1f1b"}};
  for (int r = 0; r < 2; r++) {
    must_run(run_mpi(atoi(runs[r][0]), pipe, runs[r][1], &out), out, runs[r][1]);
    assert_null(strstr(out, "test nets are not run"));
    char *got = test_lines(out);
    if (strcmp(got, want) != 0) fail_msg("%s: test outputs\n%s\nagainst one process's\n%s", runs[r][1], got, want);
    free(got);
    free(out);
  }
  free(want);
}

/* clip_gradients: every stage scales by the norm of the whole gradient
 * (each stage's part alone gave each its own factor), bit for bit as one
 * process, with 2 and with 3 stages. */
static void test_clip_gradients(void **state) {
  free(check_stages_with("pipe_clip_p2", 2, "relu", 3, 3, "gpipe", "clip_gradients: 0.02"));
  free(check_stages_with("pipe_clip_p3", 3, "ip1,relu", 2, 3, "1f1b", "clip_gradients: 0.02"));
}

static void test_two_stages_four_micro(void **state) {
  check_stages("pipe_p2_m4", 2, "relu", 4, 3, "gpipe");
}

static void test_two_stages_one_micro(void **state) { check_stages("pipe_p2_m1", 2, "ip1", 1, 6, "gpipe"); }

/* bfloat16 layers: the blobs between the stages are bfloat16 (2 bytes a
 * value; a batch of 3 x 16 values of h crosses as 24 words), the gradients
 * summed as iter_size sums them: bit for bit, under GPipe (recomputed
 * forwards) and 1F1B, with 3 stages too.  (It aborted once: the stages
 * read every crossing blob as float32.) */
/* BatchNorm (+ Scale) with micro-batches: each micro-batch normalised by
 * its own statistics, the running statistics updated once per micro-batch
 * (not again by the recomputation for its backward), as iter_size's passes
 * do: the whole .caffemodel, statistics included, bit for bit one
 * process's, GPipe and 1F1B, the BatchNorm on either side of a cut.  (It
 * was refused before.) */
static void test_batchnorm_micro(void **state) {
  free(check_stages_run("pipe_bn_p2", 2, "relu", 3, 3, "gpipe", NULL, NULL, BATCHNORM, NULL));
  free(check_stages_run("pipe_bn_p2_ip1", 2, "ip1", 4, 2, "gpipe", NULL, NULL, BATCHNORM, NULL));
  free(check_stages_run("pipe_bn_p3", 3, "ip1,relu", 3, 3, "1f1b", NULL, NULL, BATCHNORM, NULL));
}

static void test_bfloat16_stages(void **state) {
  if (!ct_cpu_has_bf16()) skip();
  free(check_stages_run("pipe_bf16_p2", 2, "relu", 3, 3, "gpipe", NULL, "--precision=bf16", PLAIN, NULL));
  free(check_stages_run("pipe_bf16_p3", 3, "ip1,relu", 3, 1, "1f1b", NULL, "--precision=bf16", PLAIN, NULL));
}

/* --recompute=false: each micro-batch's activations (the values the
 * stage's backward reads, a pooling's argmax, a loss's probabilities, a
 * BatchNorm's statistics)
 * kept instead of recomputed: the same bits as iter_size, GPipe and 1F1B,
 * in bfloat16 too.  And a Dropout: kept, its backward uses its forward's
 * mask, as one process's does (bit for bit); recomputed, it draws a new
 * one, and the weights are not one process's. */
static void test_kept_activations(void **state) {
  free(check_stages_run("pipe_keep_p2", 2, "relu", 4, 3, "gpipe", NULL, NULL, PLAIN, "--recompute=false"));
  free(check_stages_run("pipe_keep_p3", 3, "ip1,relu", 5, 2, "1f1b", NULL, NULL, PLAIN, "--recompute=false"));
  if (ct_cpu_has_bf16())
    free(check_stages_run("pipe_keep_bf16", 2, "relu", 3, 3, "gpipe", NULL, "--precision=bf16", PLAIN,
                          "--recompute=false"));
  free(check_stages_run("pipe_keep_conv", 2, "p1", 3, 3, "gpipe", NULL, NULL, CONVOLUTIONS,
                        "--recompute=false"));
  free(check_stages_run("pipe_keep_conv_1f1b", 3, "c1,n1", 4, 2, "1f1b", NULL, NULL, CONVOLUTIONS,
                        "--recompute=false"));
  /* BatchNorm + Scale (statistics, the normalised x) on either side of a cut; Power in place */
  free(check_stages_run("pipe_keep_bn", 2, "relu", 3, 3, "gpipe", NULL, NULL, BATCHNORM, "--recompute=false"));
  free(check_stages_run("pipe_keep_bn_1f1b", 3, "ip1,relu", 3, 3, "1f1b", NULL, NULL, BATCHNORM,
                        "--recompute=false"));
  free(check_stages_run("pipe_keep_power", 2, "ip1", 3, 3, "gpipe", NULL, NULL, POWER, "--recompute=false"));
  char *out = check_stages_run("pipe_keep_drop", 2, "ip1", 3, 3, "gpipe", NULL, NULL, DROPOUT,
                               "--recompute=false");
  assert_non_null(strstr(out, "activations kept"));
  free(out);
}

static void test_dropout_recomputed_differs(void **state) {
  const char *base = tu_tmpdir("pipe_drop_recomputed");
  char lmdb[4200], pipe[4400], acc[4400], path[2][4400];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 45, -1);
  setup(pipe, sizeof pipe, base, "pipe", lmdb, 3, 6, 0, NULL);
  setup(acc, sizeof acc, base, "acc", lmdb, 3, 6, 0, "iter_size: 3");
  char dir[4400];
  snprintf(dir, sizeof dir, "%s/pipe", base);
  add_layers(dir, DROPOUT);
  snprintf(dir, sizeof dir, "%s/acc", base);
  add_layers(dir, DROPOUT);
  char *out = NULL;
  must_run(run_mpi(2, pipe, "--pipeline=ip1 --microbatches=3", &out), out, "the pipeline");
  free(out);
  must_run(run_single(acc, "", &out), out, "iter_size reference");
  free(out);
  snprintf(path[0], sizeof path[0], "%s/pipe/snap_iter_6.caffemodel", base);
  snprintf(path[1], sizeof path[1], "%s/acc/snap_iter_6.caffemodel", base);
  const double diff = dpf_max_abs_diff(path[0], path[1]);
  printf("pipe_drop_recomputed: max |diff| %.3g vs iter_size (new masks in the recomputation)\n", diff);
  assert_true(diff > 0.0);
}

/* Stage 1 is the in-place ReLU alone: it receives h, changes it in place
 * and sends it on; the labels skip it. */
static void test_three_stages(void **state) { check_stages("pipe_p3_m3", 3, "ip1,relu", 3, 2, "gpipe"); }

/* 1F1B: the backwards come between the forwards, in the same order. */
static void test_1f1b_two_stages(void **state) { check_stages("pipe_1f1b_p2", 2, "relu", 4, 3, "1f1b"); }

static void test_1f1b_three_stages(void **state) {
  check_stages("pipe_1f1b_p3", 3, "ip1,relu", 5, 2, "1f1b");
}

/* Snapshot at 3 (stage 0 gathers the parameters and the momentum), resume
 * to 6: the same parameters as 6 straight iterations. */
static void test_resume(void **state) {
  const char *base = tu_tmpdir("pipe_resume");
  char lmdb[4200], straight[4400], split[4400], flags[512], a[4400], c[4400];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 45, -1);
  setup(straight, sizeof straight, base, "straight", lmdb, 3, 6, 0, NULL);
  setup(split, sizeof split, base, "split", lmdb, 3, 6, 3, NULL);
  char *out = NULL;
  must_run(run_mpi(2, straight, "--pipeline=relu --microbatches=2", &out), out, "straight run");
  free(out);
  char first[4400];
  snprintf(first, sizeof first, "%s/split/first.prototxt", base);
  /* the first half: the same solver stopped at 3 */
  size_t len = 0;
  char *text = tu_read_file(split, &len);
  char *mi = strstr(text, "max_iter: 6");
  assert_non_null(mi);
  mi[10] = '3';
  tu_write_file(first, text, len);
  free(text);
  must_run(run_mpi(2, first, "--pipeline=relu --microbatches=2", &out), out, "first half");
  free(out);
  snprintf(flags, sizeof flags, "--pipeline=relu --microbatches=2 --snapshot=%s/split/snap_iter_3.solverstate",
           base);
  must_run(run_mpi(2, split, flags, &out), out, "resumed half");
  free(out);
  snprintf(a, sizeof a, "%s/straight/snap_iter_6.caffemodel", base);
  snprintf(c, sizeof c, "%s/split/snap_iter_6.caffemodel", base);
  assert_true(dpf_max_abs_diff(a, c) == 0.0);
}

/* The stages from the net's pipeline_stage fields (ip2 starts stage 1)
 * train as --pipeline=relu cuts the unchanged net. */
static void test_stages_from_prototxt(void **state) {
  const char *base = tu_tmpdir("pipe_field");
  char lmdb[4200], flag[4400], field[4400], net[4400], a[4400], c[4400];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 45, -1);
  setup(flag, sizeof flag, base, "flag", lmdb, 3, 6, 0, NULL);
  setup(field, sizeof field, base, "field", lmdb, 3, 6, 0, NULL);
  snprintf(net, sizeof net, "%s/field/net.prototxt", base);
  size_t len = 0;
  char *text = tu_read_file(net, &len);
  const char *at = strstr(text, "name: 'ip2'");
  assert_non_null(at);
  char placed[16384];
  snprintf(placed, sizeof placed, "%.*sname: 'ip2' pipeline_stage: 1%s", (int)(at - text), text,
           at + strlen("name: 'ip2'"));
  tu_write_file(net, placed, strlen(placed));
  free(text);
  char *out = NULL;
  must_run(run_mpi(2, flag, "--pipeline=relu --microbatches=2", &out), out, "--pipeline");
  free(out);
  must_run(run_mpi(2, field, "--microbatches=2", &out), out, "pipeline_stage");
  assert_non_null(strstr(out, "Pipeline stage 0 of 2: layers 0-2 ('data' to 'relu')"));
  free(out);
  snprintf(a, sizeof a, "%s/flag/snap_iter_6.caffemodel", base);
  snprintf(c, sizeof c, "%s/field/snap_iter_6.caffemodel", base);
  assert_true(dpf_max_abs_diff(a, c) == 0.0);
}

/* D x P: mpirun -np 4 with 2 stages makes 2 replicas of them; each
 * stage's gradients are averaged over its replicas (the stage's buckets),
 * as 2 data-parallel workers average theirs. */
static void test_data_x_pipeline(void **state) {
  const char *base = tu_tmpdir("pipe_dxp");
  char lmdb[4200], dxp[4400], dp[4400], one[4400], extra[64], path[3][4400];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 45, -1);
  snprintf(extra, sizeof extra, "iter_size: 2");
  setup(dxp, sizeof dxp, base, "dxp", lmdb, 3, 6, 0, NULL);
  setup(dp, sizeof dp, base, "dp", lmdb, 3, 6, 0, extra);
  setup(one, sizeof one, base, "one", lmdb, 6, 6, 0, extra);
  char *out = NULL;
  must_run(run_mpi(4, dxp, "--pipeline=relu --microbatches=2 --bucket_mb=0.0001", &out), out, "D x P");
  assert_non_null(strstr(out, "Pipeline: 2 replicas of 2 stages (4 ranks)"));
  assert_non_null(strstr(out, "Pipeline stage 1: forward"));
  free(out);
  must_run(run_mpi(2, dp, "", &out), out, "data parallel");
  free(out);
  must_run(run_single(one, "", &out), out, "one process");
  free(out);
  snprintf(path[0], sizeof path[0], "%s/dxp/snap_iter_6.caffemodel", base);
  snprintf(path[1], sizeof path[1], "%s/dp/snap_iter_6.caffemodel", base);
  snprintf(path[2], sizeof path[2], "%s/one/snap_iter_6.caffemodel", base);
  const double exact = dpf_max_abs_diff(path[0], path[1]), near = dpf_max_abs_diff(path[0], path[2]);
  printf("D x P: max |diff| %.3g vs 2 data-parallel workers, %.3g vs one process of batch 6\n", exact,
         near);
  assert_true(exact == 0.0);
  assert_true(near < 1e-6);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_stages_four_micro),
      cmocka_unit_test(test_two_stages_one_micro),
      cmocka_unit_test(test_bfloat16_stages),
      cmocka_unit_test(test_batchnorm_micro),
      cmocka_unit_test(test_three_stages),
      cmocka_unit_test(test_1f1b_two_stages),
      cmocka_unit_test(test_1f1b_three_stages),
      cmocka_unit_test(test_resume),
      cmocka_unit_test(test_stages_from_prototxt),
      cmocka_unit_test(test_data_x_pipeline),
      cmocka_unit_test(test_clip_gradients),
      cmocka_unit_test(test_test_nets),
      cmocka_unit_test(test_kept_activations),
      cmocka_unit_test(test_dropout_recomputed_differs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
