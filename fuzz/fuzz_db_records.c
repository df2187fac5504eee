/* libFuzzer harness: arbitrary records in a real LMDB or LevelDB, read by a
 * Data layer (the pipeline's threads: the record read, the Datum decode,
 * the transform with crop, mirror, scale and a mean), three forward passes;
 * and arbitrary bytes as an LMDB's data.mdb, opened, scanned and read (the
 * checks of a damaged file and the fault guard around liblmdb).  Nothing may
 * crash, leak or read out of bounds; an error naming the database is fine.
 *
 * Input: byte 0 picks the mode (bit 0: records / data.mdb; bit 1: LMDB /
 * LevelDB for records; bits 2-3: transform options), then records as
 * [u16 little-endian length][bytes], up to 16. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/log.h"
#include "data/db.h"
#include "net/net.h"
#include "proto/textformat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[256];
static unsigned g_run;

static void die(const char *what, const ct_error *err) {
  fprintf(stderr, "fuzz_db_records: %s: %s\n", what, err ? err->msg : "");
  abort();
}

static void setup(void) {
  ct_log_set_level(CT_LOG_FATAL);
  snprintf(g_dir, sizeof g_dir, "/tmp/fuzz_db_records.%ld", (long)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", g_dir, g_dir);
  if (system(cmd) != 0) die("scratch folder", NULL);
}

/* A fresh database path (removed after use). */
static void fresh_path(char *path, size_t cap) {
  snprintf(path, cap, "%s/db%u", g_dir, g_run++);
}

static void read_through_data_layer(const char *path, ct_db_backend backend, unsigned options) {
  char text[1024];
  snprintf(text, sizeof text,
           "name: 'f'\n"
           "layer { name: 'data' type: 'Data' top: 'x' top: 'y'\n"
           "  data_param { source: '%s' batch_size: 2 backend: %s }\n"
           "  transform_param { scale: 0.5 mirror: %s %s %s } }\n",
           path, backend == CT_DB_LMDB ? "LMDB" : "LEVELDB", options & 1 ? "true" : "false",
           options & 2 ? "crop_size: 3" : "", options & 1 ? "mean_value: 10 mean_value: 20" : "");
  ProtobufCMessage *m;
  ct_error err;
  if (ct_text_parse(&caffe__net_parameter__descriptor, text, strlen(text), "fuzz", &m, &err) != CT_OK)
    die("net text", &err);
  ct_context ctx;
  if (ct_context_init(&ctx, CT_DEVICE_CPU, 1, &err) != CT_OK) die("context", &err);
  ct_net *net = NULL;
  ct_net_opts o = {.quiet = true, .phase = CT_PHASE_TRAIN};
  if (ct_net_init(&net, (Caffe__NetParameter *)m, &o, &ctx, &err) == CT_OK) {
    for (int pass = 0; pass < 3; pass++) {
      double loss;
      if (ct_net_forward(net, &loss, &err) != CT_OK) break;
    }
    ct_net_free(net);
  }
  protobuf_c_message_free_unpacked(m, NULL);
  ct_context_free(&ctx);
}

static void records(const uint8_t *data, size_t size, ct_db_backend backend, unsigned options) {
  char path[300];
  fresh_path(path, sizeof path);
  ct_db *db;
  ct_error err;
  if (ct_db_open(&db, path, backend, CT_DB_NEW, &err) != CT_OK) die("create", &err);
  size_t at = 0;
  for (int i = 0; i < 16 && at + 2 <= size; i++) {
    size_t n = (size_t)data[at] | (size_t)data[at + 1] << 8;
    at += 2;
    if (n > size - at) n = size - at;
    char key[16];
    snprintf(key, sizeof key, "%08d", i);
    if (ct_db_put(db, key, 8, data + at, n, &err) != CT_OK) die("put", &err);
    at += n;
  }
  if (ct_db_commit(db, &err) != CT_OK) die("commit", &err);
  ct_db_close(db);
  read_through_data_layer(path, backend, options);
  ct_file_remove_tree(path);
}

/* The bytes as data.mdb of an LMDB folder: open, every record read. */
static void damaged_lmdb(const uint8_t *data, size_t size) {
  char path[300], file[340];
  fresh_path(path, sizeof path);
  if (mkdir(path, 0755) != 0) die("mkdir", NULL);
  snprintf(file, sizeof file, "%s/data.mdb", path);
  FILE *f = fopen(file, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) die("data.mdb", NULL);
  ct_db *db;
  ct_error err;
  if (ct_db_open(&db, path, CT_DB_LMDB, CT_DB_READ, &err) == CT_OK) {
    ct_db_reader *r;
    if (ct_db_reader_open(db, &r, &err) == CT_OK) {
      for (size_t i = 0; i < ct_db_count(db); i++) {
        const void *v;
        size_t n;
        if (ct_db_read_index(db, r, i, &v, &n, &err) != CT_OK) continue;
        volatile uint8_t sum = 0; /* every byte handed out must be readable */
        for (size_t k = 0; k < n; k++) sum += ((const uint8_t *)v)[k];
      }
      ct_db_reader_close(r);
    }
    ct_db_close(db);
  }
  ct_file_remove_tree(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) {
    setup();
    ready = 1;
  }
  if (size < 1) return 0;
  const unsigned mode = data[0];
  if (mode & 1) damaged_lmdb(data + 1, size - 1);
  else records(data + 1, size - 1, mode & 2 ? CT_DB_LEVELDB : CT_DB_LMDB, (mode >> 2) & 3);
  return 0;
}
