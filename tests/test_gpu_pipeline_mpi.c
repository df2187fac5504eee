/* Pipeline stages on GPUs (runtime/stages.h; skipped without a GPU or
 * mpirun): `mpirun -np P cortado train --pipeline=... --gpu=0` puts every
 * stage on the GPU of its local rank, and on a machine with one GPU the P
 * ranks share it (a warning says so).  A small convolutional net, cut
 * after its pooling (2 stages) or after its convolution and its pooling
 * (3), with M micro-batches under GPipe (forwards recomputed from the
 * stash on the device) and 1F1B, ends with the parameters of one process
 * on that GPU with iter_size M, bit for bit, in float32 and in bfloat16
 * (the blobs between stages travel as bfloat16), with a BatchNorm too
 * (its statistics updated once per micro-batch): every run takes the same
 * cuDNN algorithms (CORTADO_CUDNN_ALGOS) and deterministic ones.  Stage 0
 * logs each stage's GPU memory; `cortado time --pipeline` runs on the GPU;
 * replicas of GPU stages and loss scaling are refused with their reasons. */
#include <stdlib.h>
#include <sys/stat.h>

#include "testutil.h"

#include "data/datum.h"
#include "data/db.h"
#include "dp_fixture.h"

enum { RECORDS = 48, CLASSES = 4, SIDE = 8 };

/* An LMDB of RECORDS 1 x SIDE x SIDE float images; the label's quarter of
 * the image is brighter. */
static void write_images(const char *path) {
  ct_db *db;
  ct_error err;
  if (ct_db_open(&db, path, CT_DB_LMDB, CT_DB_NEW, &err) != CT_OK) fail_msg("%s", err.msg);
  for (int i = 0; i < RECORDS; i++) {
    float x[SIDE * SIDE];
    const int label = i % CLASSES;
    tu_fill_uniform(x, SIDE * SIDE, -1.0f, 1.0f, 500u + (uint64_t)i);
    for (int y = 0; y < SIDE / 2; y++)
      for (int c = 0; c < SIDE / 2; c++)
        x[(y + (label / 2) * SIDE / 2) * SIDE + c + (label % 2) * SIDE / 2] += 1.0f;
    dpf_put_record(db, i, x, 1, SIDE, SIDE, label);
  }
  if (ct_db_commit(db, &err) != CT_OK) fail_msg("%s", err.msg);
  ct_db_close(db);
}

/* dir/net.prototxt and dir/solver.prototxt: batch b, 6 iterations, a
 * snapshot at the end; `extra` appended to the solver; with batchnorm a
 * BatchNorm and its Scale after conv1. */
static void write_net(const char *dir, const char *lmdb, int b, const char *extra, bool batchnorm) {
  mkdir(dir, 0755);
  char path[4300], text[8192];
  snprintf(path, sizeof path, "%s/net.prototxt", dir);
  snprintf(text, sizeof text,
           "name: 'convnet'\n"
           "layer { name: 'data' type: 'Data' top: 'x' top: 'label'\n"
           "  data_param { source: '%s' backend: LMDB batch_size: %d } }\n"
           "layer { name: 'conv1' type: 'Convolution' bottom: 'x' top: 'c'\n"
           "  convolution_param { num_output: 8 kernel_size: 3 pad: 1\n"
           "    weight_filler { type: 'gaussian' std: 0.3 } bias_filler { type: 'constant' value: 0.1 } } }\n"
           "%s"
           "layer { name: 'relu1' type: 'ReLU' bottom: 'c' top: 'c' }\n"
           "layer { name: 'pool1' type: 'Pooling' bottom: 'c' top: 'p'\n"
           "  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n"
           "layer { name: 'ip1' type: 'InnerProduct' bottom: 'p' top: 'h'\n"
           "  inner_product_param { num_output: 16 weight_filler { type: 'gaussian' std: 0.1 } } }\n"
           "layer { name: 'relu2' type: 'ReLU' bottom: 'h' top: 'h' }\n"
           "layer { name: 'ip2' type: 'InnerProduct' bottom: 'h' top: 'y'\n"
           "  inner_product_param { num_output: %d weight_filler { type: 'gaussian' std: 0.1 } } }\n"
           "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'y' bottom: 'label' top: 'loss' }\n",
           lmdb, b,
           batchnorm ? "layer { name: 'bn1' type: 'BatchNorm' bottom: 'c' top: 'c' }\n"
                       "layer { name: 'sc1' type: 'Scale' bottom: 'c' top: 'c' scale_param { bias_term: true } }\n"
                     : "",
           CLASSES);
  tu_write_file(path, text, strlen(text));
  snprintf(path, sizeof path, "%s/solver.prototxt", dir);
  snprintf(text, sizeof text,
           "net: '%s/net.prototxt'\n"
           "type: 'SGD' base_lr: 0.1 momentum: 0.9 weight_decay: 0.001 lr_policy: 'fixed'\n"
           "max_iter: 6 display: 1 random_seed: 23 snapshot_prefix: '%s/snap'\n"
           "solver_mode: GPU\n%s\n",
           dir, dir, extra ? extra : "");
  tu_write_file(path, text, strlen(text));
}

static void write_run(const char *dir, const char *lmdb, int b, const char *extra) {
  write_net(dir, lmdb, b, extra, false);
}

/* Every run of one check takes the first run's cuDNN algorithms and
 * deterministic ones, and no timed choice of Cortado's own kernels. */
static void same_kernels(const char *base) {
  char algos[4200];
  snprintf(algos, sizeof algos, "%s/cudnn_algos.txt", base);
  setenv("CORTADO_CUDNN_ALGOS", algos, 1);
  setenv("CORTADO_DETERMINISTIC", "1", 1);
  setenv("CORTADO_OWN_CONV", "0", 1);
}

/* P stages cut after `cuts`, M micro-batches of b, `schedule`, flags (the
 * precision) on every run and pipe_only on the pipeline's: the parameters
 * of one GPU with iter_size M. */
static void check_gpu_stages_run(const char *name, int stages, const char *cuts, int m, int b,
                                 const char *schedule, const char *flags, bool batchnorm,
                                 const char *pipe_only) {
  const char *base = tu_tmpdir(name);
  same_kernels(base);
  char lmdb[4200], one[4300], pipe[4300], extra[64], cmd[9000];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  write_images(lmdb);
  snprintf(extra, sizeof extra, "iter_size: %d", m);
  snprintf(one, sizeof one, "%s/one", base);
  snprintf(pipe, sizeof pipe, "%s/pipe", base);
  write_net(one, lmdb, b, extra, batchnorm);
  write_net(pipe, lmdb, b, NULL, batchnorm);
  char *out = NULL;
  snprintf(cmd, sizeof cmd, "%s train --solver=%s/solver.prototxt --gpu=0 %s 2>&1", tu_cortado_bin(),
           one, flags);
  int rc = tu_run(cmd, &out);
  if (rc != 0) fail_msg("one GPU failed (%d):\n%s", rc, out);
  free(out);
  char solver[4400], pflags[512];
  snprintf(solver, sizeof solver, "%s/solver.prototxt", pipe);
  snprintf(pflags, sizeof pflags, "--gpu=0 --pipeline=%s --microbatches=%d --schedule=%s %s %s", cuts,
           m, schedule, flags, pipe_only);
  rc = dpf_mpirun(stages, solver, pflags, &out);
  if (rc != 0) fail_msg("the GPU pipeline failed (%d):\n%s", rc, out);
  if (!strstr(out, "Pipeline: rank 0 on GPU 0")) fail_msg("no stage placed on GPU 0:\n%s", out);
  if (!strstr(out, "Train net output #0: loss = ")) fail_msg("no loss displayed:\n%s", out);
  /* every stage's GPU memory, from stage 0 */
  char want[64];
  snprintf(want, sizeof want, "Pipeline stage %d: forward ", stages - 1);
  const char *line = strstr(out, want);
  if (!line || !strstr(line, "; GPU memory ")) fail_msg("no GPU memory of the last stage:\n%s", out);
  free(out);
  char a[4400], c[4400];
  snprintf(a, sizeof a, "%s/snap_iter_6.caffemodel", pipe);
  snprintf(c, sizeof c, "%s/snap_iter_6.caffemodel", one);
  const double d = dpf_max_abs_diff(a, c);
  printf("%s: %d GPU stages x %d micro-batches of %d (%s%s%s%s%s): max |diff| %.3g vs one GPU with "
         "iter_size %d\n",
         name, stages, m, b, schedule, *flags ? ", " : "", flags, *pipe_only ? ", " : "", pipe_only,
         d, m);
  assert_true(d == 0.0);
}

static void check_gpu_stages_bn(const char *name, int stages, const char *cuts, int m, int b,
                                const char *schedule, const char *flags, bool batchnorm) {
  check_gpu_stages_run(name, stages, cuts, m, b, schedule, flags, batchnorm, "");
}

static void check_gpu_stages(const char *name, int stages, const char *cuts, int m, int b,
                             const char *schedule, const char *flags) {
  check_gpu_stages_bn(name, stages, cuts, m, b, schedule, flags, false);
}

/* BatchNorm (cuDNN's) with micro-batches: the recomputation for a backward
 * leaves the running statistics alone, so they are iter_size's. */
static void test_batchnorm_micro(void **state) {
  check_gpu_stages_bn("gpu_pipe_bn_fp32", 2, "pool1", 3, 4, "gpipe", "--math=fp32", true);
  check_gpu_stages_bn("gpu_pipe_bn_bf16", 3, "conv1,pool1", 3, 2, "1f1b", "--precision=bf16", true);
}

static void test_two_stages_gpipe(void **state) {
  check_gpu_stages("gpu_pipe_p2_gpipe", 2, "pool1", 3, 4, "gpipe", "--math=fp32");
}

static void test_three_stages_1f1b(void **state) {
  check_gpu_stages("gpu_pipe_p3_1f1b", 3, "conv1,pool1", 4, 3, "1f1b", "--math=fp32");
}

/* --recompute=false: the micro-batches' activations and layer state kept
 * on the device (cuDNN's convolution with its fused ReLU, the pooling's
 * argmax in 16 bits, the loss's probabilities and normaliser). */
static void test_kept_activations(void **state) {
  check_gpu_stages_run("gpu_pipe_keep_fp32", 2, "pool1", 3, 4, "gpipe", "--math=fp32", false,
                       "--recompute=false");
  check_gpu_stages_run("gpu_pipe_keep_bf16", 3, "conv1,pool1", 4, 2, "1f1b", "--precision=bf16", false,
                       "--recompute=false");
  /* BatchNorm (cuDNN's saved statistics and reserve) */
  check_gpu_stages_run("gpu_pipe_keep_bn_fp32", 2, "pool1", 3, 4, "gpipe", "--math=fp32", true,
                       "--recompute=false");
  check_gpu_stages_run("gpu_pipe_keep_bn_bf16", 3, "conv1,pool1", 3, 2, "1f1b", "--precision=bf16", true,
                       "--recompute=false");
}

static void test_bfloat16_stages(void **state) {
  check_gpu_stages("gpu_pipe_p2_bf16", 2, "pool1", 2, 4, "gpipe", "--precision=bf16");
  check_gpu_stages("gpu_pipe_p3_bf16", 3, "conv1,pool1", 3, 2, "1f1b", "--precision=bf16");
}

/* tu_tmpdir(name)/run of batch b over tu_tmpdir(name)/db; dir gets it. */
static void one_run(const char *name, int b, char *dir, size_t size) {
  const char *base = tu_tmpdir(name);
  char lmdb[4200];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  write_images(lmdb);
  snprintf(dir, size, "%s/run", base);
  write_run(dir, lmdb, b, NULL);
}

/* `mpirun -np 2 cortado time --pipeline --gpu=0`: GPU stages timed. */
static void test_time(void **state) {
  char dir[4300], cmd[12000];
  one_run("gpu_pipe_time", 8, dir, sizeof dir);
  snprintf(cmd, sizeof cmd,
           "mpirun -np 2 --oversubscribe --bind-to none %s time --model=%s/net.prototxt --gpu=0 "
           "--pipeline=pool1 --microbatches=4 --iterations=5 2>&1",
           tu_cortado_bin(), dir);
  char *out = NULL;
  const int rc = tu_run(cmd, &out);
  if (rc != 0) fail_msg("cortado time --pipeline on the GPU failed (%d):\n%s", rc, out);
  const char *line = strstr(out, "Pipeline stage 1: forward ");
  if (!line || !strstr(line, "; GPU memory ") || !strstr(out, "Average Forward-Backward: "))
    fail_msg("no GPU stage report:\n%s", out);
  free(out);
}

/* What is not written is refused before training, with why. */
static void test_refusals(void **state) {
  char dir[4300], solver[4400];
  one_run("gpu_pipe_refused", 4, dir, sizeof dir);
  snprintf(solver, sizeof solver, "%s/solver.prototxt", dir);
  char *out = NULL;
  int rc = dpf_mpirun(4, solver, "--gpu=0 --pipeline=pool1", &out);
  if (rc == 0 || !strstr(out, "cortado: error: --pipeline: 4 ranks make 2 replicas of the 2 stages, "
                              "and replicas of stages on GPUs are not written yet"))
    fail_msg("D x P on GPUs not refused (%d):\n%s", rc, out);
  free(out);
  rc = dpf_mpirun(2, solver, "--gpu=0 --pipeline=pool1 --precision=fp16", &out);
  if (rc == 0 || !strstr(out, "cortado: error: --pipeline with loss scaling (float16, or "
                              "global_grad_scale): the stages would each decide alone"))
    fail_msg("loss scaling with stages not refused (%d):\n%s", rc, out);
  free(out);
}

int main(int argc, char **argv) {
  tu_require_gpu();
  if (system("command -v mpirun >/dev/null 2>&1") != 0) {
    printf("mpirun not found: skipped\n");
    return 77;
  }
  tu_filter_tests(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_stages_gpipe),
      cmocka_unit_test(test_three_stages_1f1b),
      cmocka_unit_test(test_bfloat16_stages),
      cmocka_unit_test(test_batchnorm_micro),
      cmocka_unit_test(test_kept_activations),
      cmocka_unit_test(test_time),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
