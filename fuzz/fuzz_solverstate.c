/* libFuzzer harness: arbitrary bytes as a .solverstate restored into a real
 * solver (a Data layer over a small LMDB made at start, an InnerProduct, a
 * loss; SGD with momentum and a multistep rate), values and all: iter,
 * current_step, the history blobs, the RNG state, the data positions.  A
 * state that restores is then trained for two iterations, so that the
 * restored values reach the rate, the update and the data pipeline.
 * Nothing may crash, leak, read out of bounds or abort; an error is fine.
 *
 * learned_net, when set, is pointed at the run's own weights file (the
 * fuzzer must not read files of the machine it runs on). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/log.h"
#include "data/db.h"
#include "proto/io.h"
#include "proto/textformat.h"
#include "solvers/solver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[256], g_model[320], g_state[320];
static Caffe__SolverParameter *g_param;
static ct_context g_ctx;
static ct_solver *g_solver;

static void die(const char *what, const ct_error *err) {
  fprintf(stderr, "fuzz_solverstate setup: %s: %s\n", what, err ? err->msg : "");
  abort();
}

/* 8 records of 1x4x4 raw pixels, labels 0..3. */
static void make_db(const char *path) {
  ct_db *db;
  ct_error err;
  if (ct_db_open(&db, path, CT_DB_LMDB, CT_DB_NEW, &err) != CT_OK) die("db", &err);
  for (int i = 0; i < 8; i++) {
    Caffe__Datum d = CAFFE__DATUM__INIT;
    uint8_t px[16];
    for (int k = 0; k < 16; k++) px[k] = (uint8_t)(i * 16 + k);
    d.has_channels = d.has_height = d.has_width = d.has_label = d.has_data = 1;
    d.channels = 1, d.height = 4, d.width = 4, d.label = i % 4;
    d.data.data = px, d.data.len = 16;
    uint8_t buf[64];
    size_t n = caffe__datum__pack(&d, buf);
    char key[16];
    snprintf(key, sizeof key, "%08d", i);
    if (ct_db_put(db, key, 8, buf, n, &err) != CT_OK) die("put", &err);
  }
  if (ct_db_commit(db, &err) != CT_OK) die("commit", &err);
  ct_db_close(db);
}

static void new_solver(void) {
  ct_solver_free(g_solver);
  ct_context_free(&g_ctx);
  ct_error err;
  if (ct_context_init(&g_ctx, CT_DEVICE_CPU, 1, &err) != CT_OK) die("context", &err);
  ct_solver_opts o = {.quiet_nets = true};
  if (ct_solver_init(&g_solver, g_param, &o, &g_ctx, &err) != CT_OK) die("solver", &err);
}

static void setup(void) {
  ct_log_set_level(CT_LOG_FATAL);
  snprintf(g_dir, sizeof g_dir, "/tmp/fuzz_solverstate.%ld", (long)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", g_dir, g_dir);
  if (system(cmd) != 0) die("scratch folder", NULL);
  char db[300];
  snprintf(db, sizeof db, "%s/db", g_dir);
  make_db(db);
  char text[2048];
  snprintf(text, sizeof text,
           "net_param { name: 'f'\n"
           "  layer { name: 'data' type: 'Data' top: 'x' top: 'y'\n"
           "    data_param { source: '%s' batch_size: 3 backend: LMDB } transform_param { mirror: true } }\n"
           "  layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'p'\n"
           "    inner_product_param { num_output: 4 weight_filler { type: 'gaussian' std: 0.1 } } }\n"
           "  layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'p' bottom: 'y' top: 'loss' } }\n"
           "type: 'SGD' momentum: 0.9 base_lr: 0.01 lr_policy: 'multistep' stepvalue: 2 stepvalue: 5 "
           "gamma: 0.5 max_iter: 1000 random_seed: 3 snapshot_prefix: '%s/run'",
           db, g_dir);
  ProtobufCMessage *m;
  ct_error err;
  if (ct_text_parse(&caffe__solver_parameter__descriptor, text, strlen(text), "fuzz", &m, &err) != CT_OK)
    die("solver text", &err);
  g_param = (Caffe__SolverParameter *)m;
  new_solver();
  if (ct_solver_snapshot(g_solver, &err) != CT_OK) die("snapshot", &err);
  snprintf(g_model, sizeof g_model, "%s/run_iter_0.caffemodel", g_dir);
  snprintf(g_state, sizeof g_state, "%s/input.solverstate", g_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) {
    setup();
    ready = 1;
  }
  ct_error err;
  /* a state that decodes gets learned_net pointed at the run's weights */
  Caffe__SolverState *st = caffe__solver_state__unpack(NULL, size, data);
  if (st && st->learned_net) {
    free(st->learned_net);
    st->learned_net = strdup(g_model);
    if (ct_proto_write_binary(&st->base, g_state, &err) != CT_OK) die("write", &err);
  } else if (ct_file_write_atomic(g_state, data, size, &err) != CT_OK) {
    die("write", &err);
  }
  if (st) caffe__solver_state__free_unpacked(st, NULL);
  if (ct_solver_restore(g_solver, g_state, &err) == CT_OK) {
    (void)ct_solver_step(g_solver, 2, &err);
    new_solver(); /* a clean solver for the next input */
  }
  return 0;
}
