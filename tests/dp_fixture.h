/* What the data-parallel tests share: a small LMDB of float records, a
 * small classifier over it read through the Data layer (which shards by
 * ctx->rank / world), solver files, and the comparison of two
 * .caffemodel files.  Include after testutil.h.
 *
 * Why the equivalence holds: with W workers of batch b, worker r reads the
 * stream positions g = m*W + r, so one iteration of all workers reads
 * positions [i*W*b, (i+1)*W*b) -- exactly the batch of one worker of batch
 * W*b.  The loss is a mean over the batch, so the mean of the W workers'
 * gradients is the gradient of the big batch, up to the order of the sums. */
#ifndef CT_TESTS_DP_FIXTURE_H
#define CT_TESTS_DP_FIXTURE_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "caffe.pb-c.h"
#include "data/datum.h"
#include "data/db.h"

#define DPF_DIM 8     /* features per record */
#define DPF_CLASSES 3

/* Puts record i (key "%08d") of c x h x w floats x and label into db. */
static inline void dpf_put_record(ct_db *db, int i, const float *x, int c, int h, int w, int label) {
  ct_error err;
  uint8_t *buf;
  size_t len;
  assert_int_equal(ct_datum_encode_float(x, c, h, w, label, &buf, &len, &err), CT_OK);
  char key[16];
  snprintf(key, sizeof key, "%08d", i);
  if (ct_db_put(db, key, strlen(key), buf, len, &err) != CT_OK) fail_msg("%s", err.msg);
  free(buf);
}

/* Writes an LMDB of n float records (1 x 1 x DPF_DIM) at path with labels
 * i % DPF_CLASSES and features that depend on the label; record bad_at
 * (when >= 0) has the label 7, out of range for the loss. */
static inline void dpf_write_lmdb(const char *path, int n, int bad_at) {
  ct_db *db;
  ct_error err;
  if (ct_db_open(&db, path, CT_DB_LMDB, CT_DB_NEW, &err) != CT_OK) fail_msg("%s", err.msg);
  for (int i = 0; i < n; i++) {
    float x[DPF_DIM];
    int label = i % DPF_CLASSES;
    tu_fill_uniform(x, DPF_DIM, -1.0f, 1.0f, 1000u + (uint64_t)i);
    x[label] += 1.5f;
    if (i == bad_at) label = 7;
    dpf_put_record(db, i, x, 1, 1, DPF_DIM, label);
  }
  if (ct_db_commit(db, &err) != CT_OK) fail_msg("%s", err.msg);
  ct_db_close(db);
}

/* Writes dir/net.prototxt (Data over lmdb with batch_size `batch`, two
 * InnerProduct layers, SoftmaxWithLoss; with test_batch > 0 the Data layer
 * is TRAIN only and a TEST Data layer of test_batch reads the same records)
 * and dir/solver.prototxt (SGD with momentum and weight decay, max_iter
 * iterations, snapshots under dir/snap at the end and every snapshot_every
 * iterations when > 0).  `extra` is appended to the solver (e.g.
 * "iter_size: 2"). */
static inline void dpf_write_solver_tested(const char *dir, const char *lmdb, int batch, int test_batch,
                                           int max_iter, int snapshot_every, const char *extra) {
  char path[4300], text[16384], test_layer[4600] = "";
  if (test_batch > 0)
    snprintf(test_layer, sizeof test_layer,
             "layer { name: 'data_test' type: 'Data' top: 'x' top: 'label' include { phase: TEST }\n"
             "  data_param { source: '%s' backend: LMDB batch_size: %d } }\n",
             lmdb, test_batch);
  snprintf(path, sizeof path, "%s/net.prototxt", dir);
  snprintf(text, sizeof text,
           "name: 'dpnet'\n"
           "layer { name: 'data' type: 'Data' top: 'x' top: 'label' %s\n"
           "  data_param { source: '%s' backend: LMDB batch_size: %d } }\n"
           "%s"
           "layer { name: 'ip1' type: 'InnerProduct' bottom: 'x' top: 'h'\n"
           "  inner_product_param { num_output: 16 weight_filler { type: 'gaussian' std: 0.3 }\n"
           "    bias_filler { type: 'constant' value: 0.1 } } }\n"
           "layer { name: 'relu' type: 'ReLU' bottom: 'h' top: 'h' }\n"
           "layer { name: 'ip2' type: 'InnerProduct' bottom: 'h' top: 'y'\n"
           "  inner_product_param { num_output: %d weight_filler { type: 'gaussian' std: 0.3 } } }\n"
           "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'y' bottom: 'label' top: 'loss' }\n",
           test_batch > 0 ? "include { phase: TRAIN }" : "", lmdb, batch, test_layer, DPF_CLASSES);
  tu_write_file(path, text, strlen(text));
  char solver[4300];
  snprintf(solver, sizeof solver, "%s/solver.prototxt", dir);
  snprintf(text, sizeof text,
           "net: '%s/net.prototxt'\n"
           "type: 'SGD' base_lr: 0.2 momentum: 0.9 weight_decay: 0.001 lr_policy: 'fixed'\n"
           "max_iter: %d display: 1 random_seed: 17 snapshot: %d snapshot_prefix: '%s/snap'\n"
           "solver_mode: CPU\n%s\n",
           dir, max_iter, snapshot_every, dir, extra ? extra : "");
  tu_write_file(solver, text, strlen(text));
}

static inline void dpf_write_solver(const char *dir, const char *lmdb, int batch, int max_iter,
                                    int snapshot_every, const char *extra) {
  dpf_write_solver_tested(dir, lmdb, batch, 0, max_iter, snapshot_every, extra);
}

/* The parameters of a .caffemodel, flattened in layer and blob order. */
typedef struct dpf_params {
  float *v;
  size_t n;
} dpf_params;

static inline dpf_params dpf_read_caffemodel(const char *path) {
  size_t len = 0;
  char *bytes = tu_read_file(path, &len);
  if (!bytes) fail_msg("cannot read %s", path);
  Caffe__NetParameter *np = caffe__net_parameter__unpack(NULL, len, (const uint8_t *)bytes);
  if (!np) fail_msg("%s does not parse as a NetParameter", path);
  dpf_params p = {0};
  for (size_t l = 0; l < np->n_layer; l++)
    for (size_t b = 0; b < np->layer[l]->n_blobs; b++) {
      const Caffe__BlobProto *blob = np->layer[l]->blobs[b];
      p.v = realloc(p.v, (p.n + blob->n_data + 1) * sizeof(float));
      memcpy(p.v + p.n, blob->data, blob->n_data * sizeof(float));
      p.n += blob->n_data;
    }
  caffe__net_parameter__free_unpacked(np, NULL);
  free(bytes);
  return p;
}

/* max |a - b| / max(|b|, 0.01) over the parameters of two caffemodels,
 * which must have the same layout. */
static inline double dpf_caffemodel_rel_err(const char *a, const char *b) {
  dpf_params pa = dpf_read_caffemodel(a), pb = dpf_read_caffemodel(b);
  assert_int_equal(pa.n, pb.n);
  assert_true(pa.n > 0);
  double e = tu_max_rel_err(pa.v, pb.v, pa.n, 0.01);
  free(pa.v);
  free(pb.v);
  return e;
}

/* Runs `cortado train --solver=solver flags` under `mpirun -np ranks` as
 * the tests run it: several ranks on one machine (as root in CI: the
 * OMPI_ALLOW_RUN_AS_ROOT* variables come from ctest).  In sanitizer builds
 * the ranks check leaks with full stacks, so that what Open MPI never frees
 * can be suppressed (tests/data/lsan_mpi.supp).  *out gets the output. */
static inline int dpf_mpirun(int ranks, const char *solver, const char *flags, char **out) {
  const char *asan = getenv("ASAN_OPTIONS");
  char cmd[12000];
  snprintf(cmd, sizeof cmd,
           "ASAN_OPTIONS='%s%sfast_unwind_on_malloc=0' "
           "LSAN_OPTIONS='suppressions=%s:print_suppressions=0' "
           "mpirun -np %d --oversubscribe --bind-to none -x ASAN_OPTIONS -x LSAN_OPTIONS "
           "%s train --solver=%s %s 2>&1",
           asan ? asan : "", asan && *asan ? ":" : "", tu_src("tests/data/lsan_mpi.supp"), ranks,
           tu_cortado_bin(), solver, flags ? flags : "");
  return tu_run(cmd, out);
}

/* max |a - b| over two caffemodels' parameters (the same layout). */
static inline double dpf_max_abs_diff(const char *a, const char *b) {
  dpf_params pa = dpf_read_caffemodel(a), pb = dpf_read_caffemodel(b);
  assert_int_equal(pa.n, pb.n);
  assert_true(pa.n > 0);
  double m = 0;
  for (size_t k = 0; k < pa.n; k++) {
    const double d = (double)pa.v[k] - (double)pb.v[k];
    if ((d < 0 ? -d : d) > m) m = d < 0 ? -d : d;
  }
  free(pa.v);
  free(pb.v);
  return m;
}

/* How many files in dir have `part` in their names (e.g. ".caffemodel"). */
static inline int dpf_count_files(const char *dir, const char *part) {
  int n = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));)
    if (strstr(e->d_name, part)) n++;
  if (d) closedir(d);
  return n;
}

/* An equivalence check's two runs under tu_tmpdir(name): an LMDB of 45
 * records at lmdb, and the solvers ref/solver.prototxt (batch ref_batch)
 * and dp/solver.prototxt (batch b), 6 iterations each, snapshotting at the
 * end, with `extra` appended to both. */
typedef struct dpf_equiv {
  const char *base;
  char lmdb[4200], ref[4200], dp[4200];
  char ref_solver[4300], dp_solver[4300];
} dpf_equiv;

static inline void dpf_equiv_setup(dpf_equiv *e, const char *name, int ref_batch, int b,
                                   const char *extra) {
  e->base = tu_tmpdir(name);
  snprintf(e->lmdb, sizeof e->lmdb, "%s/db", e->base);
  dpf_write_lmdb(e->lmdb, 45, -1);
  snprintf(e->ref, sizeof e->ref, "%s/ref", e->base);
  snprintf(e->dp, sizeof e->dp, "%s/dp", e->base);
  mkdir(e->ref, 0755);
  mkdir(e->dp, 0755);
  dpf_write_solver(e->ref, e->lmdb, ref_batch, 6, 0, extra);
  dpf_write_solver(e->dp, e->lmdb, b, 6, 0, extra);
  snprintf(e->ref_solver, sizeof e->ref_solver, "%s/solver.prototxt", e->ref);
  snprintf(e->dp_solver, sizeof e->dp_solver, "%s/solver.prototxt", e->dp);
}

/* dpf_caffemodel_rel_err of the two runs' parameters after 6 iterations. */
static inline double dpf_equiv_err(const dpf_equiv *e) {
  char a[4300], c[4300];
  snprintf(a, sizeof a, "%s/snap_iter_6.caffemodel", e->dp);
  snprintf(c, sizeof c, "%s/snap_iter_6.caffemodel", e->ref);
  return dpf_caffemodel_rel_err(a, c);
}

/* The log's "effective batch" line for n workers of batch b (unit
 * "workers" or "GPUs"), with iter_size 2 when `extra` sets it. */
static inline void dpf_effective_batch(char *want, size_t size, int n, int b, const char *unit,
                                       const char *extra) {
  if (extra && strstr(extra, "iter_size: 2"))
    snprintf(want, size, "effective batch %d = %d x 2 iter_size x %d %s", 2 * b * n, b, n, unit);
  else
    snprintf(want, size, "effective batch %d = %d x %d %s", b * n, b, n, unit);
}

#endif
