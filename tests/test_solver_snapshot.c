/* Snapshots: exact resume, the .solverstate contents, restore errors, and a
 * snapshot killed in the middle of its write. */
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "math/math.h"
#include "proto/io.h"
#include "test_solver_fixture.h"

static int setup(void **state) {
  tsf_require_layers();
  ct_log_set_level(CT_LOG_WARNING);
  return 0;
}

/* DummyData refills x and y from the context RNG on every forward, so a
 * resume that lost the RNG state would see other data. */
static const char *k_random_net =
    "name: 'rand'\n"
    "layer { name: 'data' type: 'DummyData' top: 'x' top: 'y'\n"
    "  dummy_data_param { shape { dim: 4 dim: 3 } shape { dim: 4 dim: 2 }\n"
    "    data_filler { type: 'gaussian' std: 1 } data_filler { type: 'uniform' min: -1 max: 1 } } }\n"
    "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'pred'\n"
    "  param { lr_mult: 1 } param { lr_mult: 2 decay_mult: 0 }\n"
    "  inner_product_param { num_output: 2 weight_filler { type: 'gaussian' std: 0.5 } } }\n"
    "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'pred' bottom: 'y' top: 'loss' }\n";

static ct_solver *random_solver(ct_context *ctx, const char *rule, const char *prefix,
                                int snapshot) {
  char rest[1024];
  snprintf(rest, sizeof rest,
           "%s lr_policy: 'multistep' stepvalue: 1 stepvalue: 2 gamma: 0.5 base_lr: 0.02 "
           "weight_decay: 0.01 random_seed: 77 snapshot: %d snapshot_prefix: '%s'",
           rule, snapshot, prefix);
  assert_int_equal(ct_context_init(ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  return tsf_solver(k_random_net, rest, ctx);
}

static size_t history_bytes(const ct_solver *s) {
  return (size_t)s->rule->nslots * s->net->flat_count * sizeof(float);
}

/* Snapshot at 3 and resume to 6 equals 6 uninterrupted iterations, bit for
 * bit: weights, history, RNG, current_step. */
static void check_resume(const char *rule) {
  const char *dir = tu_tmpdir("solver_resume");
  char prefix[4200], state3[4300];
  snprintf(prefix, sizeof prefix, "%s/run", dir);
  snprintf(state3, sizeof state3, "%s_iter_3.solverstate", prefix);
  ct_context ca, cb, cc;
  ct_solver *a = random_solver(&ca, rule, prefix, 3);
  ct_error err;
  assert_int_equal(ct_solver_step(a, 6, &err), CT_OK);

  ct_solver *b = random_solver(&cb, rule, prefix, 0);
  assert_int_equal(ct_solver_restore(b, state3, &err), CT_OK);
  assert_int_equal(b->iter, 3);
  assert_int_equal(b->current_step, 2);
  assert_int_equal(ct_solver_step(b, 3, &err), CT_OK);
  assert_int_equal(b->iter, 6);
  assert_int_equal(a->net->flat_count, b->net->flat_count);
  assert_memory_equal(a->net->flat_data, b->net->flat_data, a->net->flat_count * sizeof(float));
  assert_memory_equal(a->history, b->history, history_bytes(a));
  uint8_t ra[CT_RNG_STATE_BYTES], rb[CT_RNG_STATE_BYTES];
  ct_rng_save(&ca.rng, ra);
  ct_rng_save(&cb.rng, rb);
  assert_memory_equal(ra, rb, sizeof ra);
  assert_int_equal(a->current_step, b->current_step);

  /* the comparison can fail: the same resume with a different RNG differs */
  ct_solver *c = random_solver(&cc, rule, prefix, 0);
  assert_int_equal(ct_solver_restore(c, state3, &err), CT_OK);
  ct_rng_seed(&cc.rng, 12345);
  assert_int_equal(ct_solver_step(c, 3, &err), CT_OK);
  assert_memory_not_equal(a->net->flat_data, c->net->flat_data, a->net->flat_count * sizeof(float));

  ct_solver_free(a);
  ct_solver_free(b);
  ct_solver_free(c);
  ct_context_free(&ca);
  ct_context_free(&cb);
  ct_context_free(&cc);
}

static void test_resume_exact_sgd(void **state) { check_resume("type: 'SGD' momentum: 0.9"); }
static void test_resume_exact_adam(void **state) { check_resume("type: 'Adam' momentum: 0.9"); }
static void test_resume_exact_adadelta(void **state) {
  check_resume("type: 'AdaDelta' momentum: 0.9 delta: 1e-6");
}

/* The .solverstate decodes with the schema's SolverState and holds Caffe's
 * fields: one history blob per parameter per slot, in Caffe's order. */
static void test_solverstate_contents(void **state) {
  const char *dir = tu_tmpdir("solver_state");
  char prefix[4200], path[4300], model[4300];
  snprintf(prefix, sizeof prefix, "%s/adam", dir);
  ct_context ctx;
  ct_solver *s = random_solver(&ctx, "type: 'Adam' momentum: 0.9", prefix, 2);
  ct_error err;
  assert_int_equal(ct_solver_step(s, 2, &err), CT_OK);
  snprintf(path, sizeof path, "%s_iter_2.solverstate", prefix);
  snprintf(model, sizeof model, "%s_iter_2.caffemodel", prefix);
  ProtobufCMessage *m;
  assert_int_equal(ct_proto_read_binary(&caffe__solver_state__descriptor, path, &m, &err), CT_OK);
  Caffe__SolverState *st = (Caffe__SolverState *)m;
  assert_int_equal(st->iter, 2);
  assert_string_equal(st->learned_net, model);
  assert_int_equal(st->current_step, 1); /* stepvalue 1 passed at iteration 1 */
  assert_int_equal(st->n_history, 4); /* (W, b) x (m, v) */
  const int64_t shapes[4][2] = {{2, 3}, {2, 0}, {2, 3}, {2, 0}};
  const int ndims[4] = {2, 1, 2, 1};
  for (int i = 0; i < 4; i++) {
    Caffe__BlobProto *bp = st->history[i];
    assert_non_null(bp->shape);
    assert_int_equal(bp->shape->n_dim, ndims[i]);
    for (int a = 0; a < ndims[i]; a++) assert_int_equal(bp->shape->dim[a], shapes[i][a]);
    const ct_tensor *t = tsf_param(s->net, "ip", i % 2);
    assert_int_equal(bp->n_data, t->count);
    size_t offset = (t->data - s->net->flat_data) + (size_t)(i / 2) * s->net->flat_count;
    assert_memory_equal(bp->data, s->history + offset, t->count * sizeof(float));
  }
  /* Adam moved m and v away from zero */
  assert_true(st->history[0]->data[0] != 0.0f && st->history[2]->data[0] > 0.0f);
  assert_true(st->has_cortado_rng_state);
  assert_int_equal(st->cortado_rng_state.len, CT_RNG_STATE_BYTES);
  uint8_t rng[CT_RNG_STATE_BYTES];
  ct_rng_save(&ctx.rng, rng);
  assert_memory_equal(st->cortado_rng_state.data, rng, sizeof rng);
  assert_true(st->has_cortado_extension_version);
  assert_int_equal(st->cortado_extension_version, 1);
  protobuf_c_message_free_unpacked(m, NULL);

  /* the model holds the weights of iteration 2 */
  assert_int_equal(ct_proto_read_binary(&caffe__net_parameter__descriptor, model, &m, &err), CT_OK);
  Caffe__NetParameter *np = (Caffe__NetParameter *)m;
  bool found = false;
  for (size_t i = 0; i < np->n_layer; i++)
    if (!strcmp(np->layer[i]->name, "ip")) {
      found = true;
      assert_int_equal(np->layer[i]->n_blobs, 2);
      const ct_tensor *w = tsf_param(s->net, "ip", 0);
      assert_memory_equal(np->layer[i]->blobs[0]->data, w->data, w->count * sizeof(float));
      assert_int_equal(np->layer[i]->blobs[0]->n_diff, 0);
    }
  assert_true(found);
  protobuf_c_message_free_unpacked(m, NULL);

  /* SGD keeps one slot */
  ct_context c2;
  snprintf(prefix, sizeof prefix, "%s/sgd", dir);
  ct_solver *sgd = random_solver(&c2, "type: 'SGD' momentum: 0.9", prefix, 1);
  assert_int_equal(ct_solver_step(sgd, 1, &err), CT_OK);
  snprintf(path, sizeof path, "%s_iter_1.solverstate", prefix);
  assert_int_equal(ct_proto_read_binary(&caffe__solver_state__descriptor, path, &m, &err), CT_OK);
  assert_int_equal(((Caffe__SolverState *)m)->n_history, 2);
  protobuf_c_message_free_unpacked(m, NULL);
  ct_solver_free(sgd);
  ct_context_free(&c2);
  ct_solver_free(s);
  ct_context_free(&ctx);
}

/* snapshot_diff writes the update of the last iteration as the diffs. */
static void test_snapshot_diff(void **state) {
  const char *dir = tu_tmpdir("solver_diff");
  char rest[4600], model[4300];
  snprintf(rest, sizeof rest,
           "type: 'SGD' base_lr: 0.1 lr_policy: 'fixed' snapshot: 1 snapshot_diff: true "
           "snapshot_prefix: '%s/d' random_seed: 1",
           dir);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_solver *s = tsf_solver(k_random_net, rest, &ctx);
  const ct_tensor *w = tsf_param(s->net, "ip", 0);
  float before[6];
  memcpy(before, w->data, sizeof before);
  ct_error err;
  assert_int_equal(ct_solver_step(s, 1, &err), CT_OK);
  snprintf(model, sizeof model, "%s/d_iter_1.caffemodel", dir);
  ProtobufCMessage *m;
  assert_int_equal(ct_proto_read_binary(&caffe__net_parameter__descriptor, model, &m, &err), CT_OK);
  Caffe__NetParameter *np = (Caffe__NetParameter *)m;
  for (size_t i = 0; i < np->n_layer; i++)
    if (!strcmp(np->layer[i]->name, "ip")) {
      Caffe__BlobProto *bp = np->layer[i]->blobs[0];
      assert_int_equal(bp->n_diff, 6);
      for (int k = 0; k < 6; k++) assert_float_equal(bp->diff[k], before[k] - w->data[k], 1e-6);
    }
  protobuf_c_message_free_unpacked(m, NULL);
  ct_solver_free(s);
  ct_context_free(&ctx);
}

static void test_restore_errors(void **state) {
  const char *dir = tu_tmpdir("solver_restore_errors");
  char prefix[4200], path[4300], msg[8800];
  snprintf(prefix, sizeof prefix, "%s/sgd", dir);
  ct_context c1, c2;
  ct_solver *sgd = random_solver(&c1, "type: 'SGD'", prefix, 1);
  ct_error err;
  assert_int_equal(ct_solver_step(sgd, 1, &err), CT_OK);
  snprintf(path, sizeof path, "%s_iter_1.solverstate", prefix);

  ct_solver *adam = random_solver(&c2, "type: 'Adam'", prefix, 0);
  float before[6];
  memcpy(before, tsf_param(adam->net, "ip", 0)->data, sizeof before);
  assert_int_equal(ct_solver_restore(adam, path, &err), CT_ERR_INVALID);
  snprintf(msg, sizeof msg,
           "%s: 2 history blobs, but the Adam solver of this net keeps 4 (Incorrect length of "
           "history blobs.)",
           path);
  assert_string_equal(err.msg, msg);
  /* nothing changed */
  assert_int_equal(adam->iter, 0);
  assert_memory_equal(before, tsf_param(adam->net, "ip", 0)->data, sizeof before);

  snprintf(path, sizeof path, "%s/missing.solverstate", dir);
  assert_int_equal(ct_solver_restore(adam, path, &err), CT_ERR_NOTFOUND);
  snprintf(msg, sizeof msg, "%s: cannot open: No such file or directory", path);
  assert_string_equal(err.msg, msg);

  assert_int_equal(ct_solver_restore(adam, "run_iter_5.solverstate.h5", &err), CT_ERR_UNSUPPORTED);
  assert_string_equal(err.msg, "run_iter_5.solverstate.h5: HDF5 solver states are not supported; "
                               "use a .solverstate written with snapshot_format BINARYPROTO");

  /* a state of a net with other shapes */
  char rest[4600];
  snprintf(rest, sizeof rest, "type: 'SGD' base_lr: 0.1 lr_policy: 'fixed' random_seed: 1");
  ct_context c3;
  assert_int_equal(ct_context_init(&c3, CT_DEVICE_CPU, 1, NULL), CT_OK);
  char *wide = quad_net_text(4, 5, 2);
  ct_solver *other = tsf_solver(wide, rest, &c3);
  free(wide);
  snprintf(path, sizeof path, "%s_iter_1.solverstate", prefix);
  assert_int_equal(ct_solver_restore(other, path, &err), CT_ERR_INVALID);
  snprintf(msg, sizeof msg, "%s: history blob 0 does not fit parameter ip_0 of shape 2 5 (10)",
           path);
  assert_string_equal(err.msg, msg);
  ct_solver_free(other);
  ct_context_free(&c3);
  ct_solver_free(adam);
  ct_solver_free(sgd);
  ct_context_free(&c1);
  ct_context_free(&c2);
}

/* A run folder moved elsewhere still restores: learned_net is looked up next
 * to the state when its stored path is gone. */
static void test_restore_moved_folder(void **state) {
  const char *dir = tu_tmpdir("solver_moved");
  char prefix[4200], moved[4300], path[4400], cmd[9000];
  snprintf(prefix, sizeof prefix, "%s/a/run", dir);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/a'", dir);
  assert_int_equal(system(cmd), 0);
  ct_context c1, c2;
  ct_solver *a = random_solver(&c1, "type: 'SGD' momentum: 0.9", prefix, 2);
  ct_error err;
  assert_int_equal(ct_solver_step(a, 2, &err), CT_OK);
  snprintf(moved, sizeof moved, "%s/b", dir);
  snprintf(cmd, sizeof cmd, "mv '%s/a' '%s'", dir, moved);
  assert_int_equal(system(cmd), 0);
  snprintf(path, sizeof path, "%s/run_iter_2.solverstate", moved);
  ct_solver *b = random_solver(&c2, "type: 'SGD' momentum: 0.9", prefix, 0);
  assert_int_equal(ct_solver_restore(b, path, &err), CT_OK);
  assert_memory_equal(a->net->flat_data, b->net->flat_data, a->net->flat_count * sizeof(float));
  ct_solver_free(a);
  ct_solver_free(b);
  ct_context_free(&c1);
  ct_context_free(&c2);
}

/* ------------------------------------------------------------- crash test */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Size of the first "<base>.tmp.*" file in dir, or -1 when there is none. */
static long long tmp_file_size(const char *dir, const char *base, char *name, size_t cap) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  struct dirent *e;
  long long size = -1;
  size_t n = strlen(base);
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, base, n) == 0 && strncmp(e->d_name + n, ".tmp.", 5) == 0) {
      char p[8192];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      struct stat st;
      if (stat(p, &st) == 0) {
        size = st.st_size;
        snprintf(name, cap, "%s", e->d_name);
        break;
      }
    }
  }
  closedir(d);
  return size;
}

/* Every weight of layer 'ip' in the model at path equals v1 or every one
 * equals v2; returns which (1 or 2), failing the test otherwise. */
static int model_weights_are(const char *path, float v1, float v2, size_t count) {
  ProtobufCMessage *m;
  ct_error err;
  if (ct_proto_read_binary(&caffe__net_parameter__descriptor, path, &m, &err) != CT_OK)
    fail_msg("%s", err.msg);
  Caffe__NetParameter *np = (Caffe__NetParameter *)m;
  int which = 0;
  for (size_t i = 0; i < np->n_layer; i++) {
    if (strcmp(np->layer[i]->name, "ip") != 0) continue;
    Caffe__BlobProto *bp = np->layer[i]->blobs[0];
    assert_int_equal(bp->n_data, count);
    which = bp->data[0] == v1 ? 1 : bp->data[0] == v2 ? 2 : 0;
    assert_true(which != 0);
    float v = which == 1 ? v1 : v2;
    for (size_t k = 0; k < count; k++)
      if (bp->data[k] != v) fail_msg("%s: weight %zu is %g, not %g", path, k, bp->data[k], v);
  }
  protobuf_c_message_free_unpacked(m, NULL);
  assert_true(which != 0);
  return which;
}

/* A child rewriting a 200 MB snapshot is killed with SIGKILL in the middle
 * of the write: the snapshot at that path is still the previous complete
 * one (or a complete new one), never a torn file, and it loads; the torn
 * temporary is removed by the run's next snapshot. */
static void test_kill_during_snapshot(void **state) {
  const char *dir = tu_tmpdir("solver_kill");
  char prefix[4200], model[4300], solverstate[4300];
  snprintf(prefix, sizeof prefix, "%s/big", dir);
  snprintf(model, sizeof model, "%s_iter_0.caffemodel", prefix);
  snprintf(solverstate, sizeof solverstate, "%s_iter_0.solverstate", prefix);
  /* 10000 x 5000 weights: 50 M floats, 200 MB */
  const int D = 5000, K = 10000;
  const size_t count = (size_t)D * K;
  char net[2048], rest[4600];
  snprintf(net, sizeof net,
           "name: 'big'\n"
           "layer { name: 'data' type: 'Input' top: 'x' top: 'y'\n"
           "  input_param { shape { dim: 1 dim: %d } shape { dim: 1 dim: %d } } }\n"
           "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'pred'\n"
           "  inner_product_param { num_output: %d bias_term: true\n"
           "    weight_filler { type: 'constant' value: 1 } } }\n"
           "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'pred' bottom: 'y' top: 'loss' }\n",
           D, K, K);
  snprintf(rest, sizeof rest,
           "type: 'SGD' base_lr: 0.1 lr_policy: 'fixed' random_seed: 1 snapshot_prefix: '%s'",
           prefix);
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_solver *s = tsf_solver(net, rest, &ctx);
  ct_error err;
  double t0 = now_s();
  assert_int_equal(ct_solver_snapshot(s, &err), CT_OK); /* the previous snapshot: all 1.0 */
  double write_time = now_s() - t0;
  struct stat full;
  assert_int_equal(stat(model, &full), 0);
  assert_true(full.st_size > (off_t)(count * 4));

  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* the child: new weights, rewritten to the same files until killed */
    ct_cpu_set(s->net->flat_count, 2.0f, s->net->flat_data);
    for (;;)
      if (ct_solver_snapshot(s, &err) != CT_OK) _exit(3);
  }
  const char *base = strrchr(model, '/') + 1;
  char tmp_name[512] = "";
  long long seen = -1;
  double deadline = now_s() + 30 + 10 * write_time;
  while (now_s() < deadline) {
    seen = tmp_file_size(dir, base, tmp_name, sizeof tmp_name);
    if (seen >= (1 << 20) && seen < (long long)full.st_size) break;
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) fail_msg("the writer exited early (%d)", status);
  }
  kill(pid, SIGKILL);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  if (!(seen >= (1 << 20) && seen < (long long)full.st_size))
    fail_msg("never saw a partly written temporary file (last size %lld)", seen);

  /* the torn temporary file is still there, under its own name */
  char tmp_path[8192];
  snprintf(tmp_path, sizeof tmp_path, "%s/%s", dir, tmp_name);
  struct stat torn;
  assert_int_equal(stat(tmp_path, &torn), 0);
  assert_true(torn.st_size < full.st_size);
  /* the snapshot at the path is complete: all 1.0 (or a finished rewrite) */
  struct stat now;
  assert_int_equal(stat(model, &now), 0);
  assert_int_equal(now.st_size, full.st_size);
  int which = model_weights_are(model, 1.0f, 2.0f, count);
  /* and the solver state next to it restores into a fresh solver */
  ct_solver_free(s);
  s = tsf_solver(net, rest, &ctx);
  ct_cpu_set(s->net->flat_count, 5.0f, s->net->flat_data);
  assert_int_equal(ct_solver_restore(s, solverstate, &err), CT_OK);
  assert_float_equal(tsf_param(s->net, "ip", 0)->data[count - 1], which == 1 ? 1.0f : 2.0f, 0);
  /* the next snapshot of the run (another iteration, other file names)
   * removes the torn temporary of the dead writer */
  char model1[4300], state1[4300];
  snprintf(model1, sizeof model1, "%s_iter_1.caffemodel", prefix);
  snprintf(state1, sizeof state1, "%s_iter_1.solverstate", prefix);
  s->iter = 1;
  assert_int_equal(ct_solver_snapshot(s, &err), CT_OK);
  assert_int_equal(stat(tmp_path, &torn), -1);
  unlink(model1);
  unlink(state1);
  unlink(model);
  unlink(solverstate);
  ct_solver_free(s);
  ct_context_free(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_resume_exact_sgd),   cmocka_unit_test(test_resume_exact_adam),
      cmocka_unit_test(test_resume_exact_adadelta), cmocka_unit_test(test_solverstate_contents),
      cmocka_unit_test(test_snapshot_diff),       cmocka_unit_test(test_restore_errors),
      cmocka_unit_test(test_restore_moved_folder), cmocka_unit_test(test_kill_during_snapshot),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
