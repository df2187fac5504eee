/* The Data layer on real LMDB and LevelDB databases: batches against the
 * transformer's reference, labels, sharding by the context's rank/world,
 * encoded records, saved positions, and the errors for bad input (missing
 * database, corrupt record, wrong size, wrong mean file, undecodable image),
 * each with its exact message. */
#include <math.h>
#include <stdio.h>

#include "core/rng.h"
#include "data/datum.h"
#include "data/db.h"
#include "data/pipeline.h"
#include "layers/layer.h"
#include "proto/io.h"
#include "testutil.h"

#define C 3
#define H 8
#define W 8

static uint8_t pixel(int k, int c, int y, int x) { return (uint8_t)((k * 31 + c * 17 + y * 5 + x * 3) % 256); }

/* n raw colour records, label = index, key %08d. */
static void make_db(const char *path, ct_db_backend b, int n) {
  ct_db *db;
  ct_error err;
  assert_int_equal(ct_db_open(&db, path, b, CT_DB_NEW, &err), CT_OK);
  for (int k = 0; k < n; k++) {
    uint8_t chw[C * H * W];
    for (int c = 0; c < C; c++)
      for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) chw[(c * H + y) * W + x] = pixel(k, c, y, x);
    uint8_t *buf;
    size_t len;
    assert_int_equal(ct_datum_encode_raw(chw, C, H, W, k, &buf, &len, &err), CT_OK);
    char key[16];
    snprintf(key, sizeof key, "%08d", k);
    assert_int_equal(ct_db_put(db, key, 8, buf, len, &err), CT_OK);
    free(buf);
  }
  assert_int_equal(ct_db_commit(db, &err), CT_OK);
  ct_db_close(db);
}

/* Replaces record `key` of an LMDB with `len` bytes. */
static void put_raw(const char *path, ct_db_backend b, const char *key, const void *val, size_t len) {
  ct_db *db;
  ct_error err;
  assert_int_equal(ct_db_open(&db, path, b, CT_DB_WRITE, &err), CT_OK);
  assert_int_equal(ct_db_put(db, key, strlen(key), val, len, &err), CT_OK);
  assert_int_equal(ct_db_commit(db, &err), CT_OK);
  ct_db_close(db);
}

typedef struct run {
  ct_context ctx;
  Caffe__LayerParameter lp;
  Caffe__DataParameter dp;
  Caffe__TransformationParameter tp;
  char *tops[2];
  ct_layer *l;
  ct_tensor *top[2];
} run;

static void run_init(run *r, const char *source, ct_db_backend b, int batch, int ntop) {
  memset(r, 0, sizeof *r);
  ct_error err;
  assert_int_equal(ct_context_init(&r->ctx, CT_DEVICE_CPU, 1234, &err), CT_OK);
  caffe__layer_parameter__init(&r->lp);
  caffe__data_parameter__init(&r->dp);
  caffe__transformation_parameter__init(&r->tp);
  r->lp.name = "data";
  r->lp.type = "Data";
  r->tops[0] = "data";
  r->tops[1] = "label";
  r->lp.top = r->tops;
  r->lp.n_top = (size_t)ntop;
  r->lp.data_param = &r->dp;
  r->lp.transform_param = &r->tp;
  r->dp.source = (char *)source;
  r->dp.has_batch_size = 1;
  r->dp.batch_size = (uint32_t)batch;
  r->dp.has_backend = 1;
  r->dp.backend = b == CT_DB_LMDB ? CAFFE__DATA_PARAMETER__DB__LMDB : CAFFE__DATA_PARAMETER__DB__LEVELDB;
  r->top[0] = ct_tensor_new(CT_DEVICE_CPU, "data");
  r->top[1] = ct_tensor_new(CT_DEVICE_CPU, "label");
}

static ct_status run_setup(run *r, ct_phase phase, ct_error *err) {
  CT_TRY(ct_layer_create(&r->lp, phase, &r->ctx, 0, (int)r->lp.n_top, &r->l, err));
  return ct_layer_setup(r->l, NULL, r->top, err);
}

static void run_free(run *r) {
  ct_layer_free(r->l);
  ct_tensor_free(r->top[0]);
  ct_tensor_free(r->top[1]);
  ct_context_free(&r->ctx);
}

/* Expected sample of record k: Caffe's arithmetic with the draws of the
 * record's own generator. */
static void expected(const run *r, ct_phase phase, uint64_t epoch, int k, const float *mv, float *out) {
  int crop = (int)r->tp.crop_size, oh = crop ? crop : H, ow = crop ? crop : W;
  ct_rng rng;
  ct_pipeline_record_rng(1234, epoch, (uint64_t)k, &rng);
  bool mirror = r->tp.mirror && ct_rng_below(&rng, 2);
  int h_off = crop ? (H - crop) / 2 : 0, w_off = h_off;
  if (crop && phase == CT_PHASE_TRAIN) {
    h_off = (int)ct_rng_below(&rng, (uint64_t)(H - crop + 1));
    w_off = (int)ct_rng_below(&rng, (uint64_t)(W - crop + 1));
  }
  for (int c = 0; c < C; c++)
    for (int y = 0; y < oh; y++)
      for (int x = 0; x < ow; x++) {
        float v = pixel(k, c, h_off + y, w_off + x);
        out[(c * oh + y) * ow + (mirror ? ow - 1 - x : x)] = (v - (mv ? mv[c] : 0)) * r->tp.scale;
      }
}

static void test_data_layer_batches(void **state) {
  const char *dir = tu_tmpdir("data_layer_batches");
  ct_db_backend backends[2] = {CT_DB_LMDB, CT_DB_LEVELDB};
  float mv[3] = {10, 20, 30};
  for (int bi = 0; bi < 2; bi++)
    for (int ph = 0; ph < 2; ph++) {
      ct_phase phase = ph ? CT_PHASE_TEST : CT_PHASE_TRAIN;
      char path[4200];
      snprintf(path, sizeof path, "%s/%s_%d", dir, ct_db_backend_name(backends[bi]), ph);
      make_db(path, backends[bi], 10);
      run r;
      run_init(&r, path, backends[bi], 4, 2);
      r.tp.crop_size = 5;
      r.tp.mirror = 1;
      r.tp.scale = 0.5f;
      r.tp.n_mean_value = 3;
      r.tp.mean_value = mv;
      ct_error err;
      assert_int_equal(run_setup(&r, phase, &err), CT_OK);
      assert_int_equal(r.top[0]->ndim, 4);
      assert_int_equal(r.top[0]->shape[0], 4);
      assert_int_equal(r.top[0]->shape[1], 3);
      assert_int_equal(r.top[0]->shape[2], 5);
      assert_int_equal(r.top[0]->shape[3], 5);
      assert_int_equal(r.top[1]->ndim, 1);
      assert_int_equal(r.top[1]->shape[0], 4);
      int stream = 0;
      for (int it = 0; it < 4; it++) {
        assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
        for (int i = 0; i < 4; i++, stream++) {
          int k = stream % 10;
          assert_float_equal(ct_f32(r.top[1])[i], (float)k, 0);
          float want[C * 25];
          expected(&r, phase, (uint64_t)stream / 10, k, mv, want);
          assert_memory_equal(ct_f32(r.top[0]) + i * C * 25, want, sizeof want);
        }
      }
      run_free(&r);
    }
}

static void test_data_layer_shards_by_rank(void **state) {
  const char *dir = tu_tmpdir("data_layer_shards");
  char path[4200];
  snprintf(path, sizeof path, "%s/lmdb", dir);
  make_db(path, CT_DB_LMDB, 9);
  for (int ph = 0; ph < 2; ph++) {
    int seen[9] = {0};
    for (int rank = 0; rank < 3; rank++) {
      run r;
      run_init(&r, path, CT_DB_LMDB, 2, 2);
      r.ctx.rank = rank;
      r.ctx.world = 3;
      ct_error err;
      assert_int_equal(run_setup(&r, ph ? CT_PHASE_TEST : CT_PHASE_TRAIN, &err), CT_OK);
      for (int it = 0; it < 2; it++) {
        assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
        for (int i = 0; i < 2; i++) {
          int m = it * 2 + i, want = ph ? m : (m * 3 + rank) % 9;
          assert_float_equal(ct_f32(r.top[1])[i], (float)want, 0);
          if (m * 3 + rank < 9) seen[want]++;
        }
      }
      run_free(&r);
    }
    if (!ph)
      for (int k = 0; k < 9; k++) assert_int_equal(seen[k], 1); /* TRAIN: one epoch, split 3 ways */
  }
}

/* NVCaffe's data_param.shuffle: every epoch a new order, the pipeline's
 * permutation of that epoch from the run's seed; threads sizes the pool. */
static void test_data_layer_shuffle(void **state) {
  const char *dir = tu_tmpdir("data_layer_shuffle");
  char path[4200];
  snprintf(path, sizeof path, "%s/lmdb", dir);
  make_db(path, CT_DB_LMDB, 10);
  run r;
  run_init(&r, path, CT_DB_LMDB, 5, 2);
  r.dp.has_shuffle = 1;
  r.dp.shuffle = 1;
  r.dp.has_threads = 1;
  r.dp.threads = 3;
  ct_error err;
  assert_int_equal(run_setup(&r, CT_PHASE_TRAIN, &err), CT_OK);
  int order[3][10];
  for (int it = 0; it < 6; it++) {
    assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
    for (int i = 0; i < 5; i++) order[it / 2][(it % 2) * 5 + i] = (int)ct_f32(r.top[1])[i];
  }
  for (int e = 0; e < 3; e++) {
    uint32_t perm[10];
    ct_pipeline_permutation(1234, (uint64_t)e, true, 10, perm);
    int seen[10] = {0};
    for (int j = 0; j < 10; j++) {
      assert_int_equal(order[e][j], (int)perm[j]);
      seen[order[e][j]]++;
    }
    for (int k = 0; k < 10; k++) assert_int_equal(seen[k], 1);
  }
  assert_memory_not_equal(order[0], order[1], sizeof order[0]);
  bool identity = true;
  for (int j = 0; j < 10; j++) identity = identity && order[0][j] == j;
  assert_false(identity);
  run_free(&r);
  /* more threads than any machine needs is an error naming the field */
  run_init(&r, path, CT_DB_LMDB, 5, 2);
  r.dp.threads = 1000;
  assert_int_equal(run_setup(&r, CT_PHASE_TRAIN, &err), CT_ERR_INVALID);
  assert_non_null(strstr(err.msg, "data_param.threads/parser_threads: at most 64, got 1000"));
  run_free(&r);
}

static void test_data_layer_encoded_and_position(void **state) {
  const char *dir = tu_tmpdir("data_layer_encoded");
  char path[4200];
  snprintf(path, sizeof path, "%s/png_leveldb", dir);
  ct_db *db;
  ct_error err;
  assert_int_equal(ct_db_open(&db, path, CT_DB_LEVELDB, CT_DB_NEW, &err), CT_OK);
  for (int k = 0; k < 7; k++) {
    ct_image img;
    ct_image_alloc(&img, H, W, 3);
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++)
        for (int c = 0; c < 3; c++) img.data[(y * W + x) * 3 + c] = pixel(k, c, y, x);
    uint8_t *buf;
    size_t len;
    assert_int_equal(ct_datum_encode_image(&img, CT_IMAGE_PNG, 0, k, &buf, &len, &err), CT_OK);
    char key[16];
    snprintf(key, sizeof key, "%08d", k);
    assert_int_equal(ct_db_put(db, key, 8, buf, len, &err), CT_OK);
    free(buf);
    ct_image_free(&img);
  }
  assert_int_equal(ct_db_commit(db, &err), CT_OK);
  ct_db_close(db);

  run a, b;
  run_init(&a, path, CT_DB_LEVELDB, 3, 2);
  a.tp.force_gray = 1;
  assert_int_equal(run_setup(&a, CT_PHASE_TRAIN, &err), CT_OK);
  assert_int_equal(a.top[0]->shape[1], 1);
  assert_int_equal(ct_layer_forward(a.l, NULL, a.top, NULL, &err), CT_OK);
  /* gray from BGR with cvtColor's weights */
  int g = (pixel(0, 0, 0, 0) * 1868 + pixel(0, 1, 0, 0) * 9617 + pixel(0, 2, 0, 0) * 4899 + 8192) >> 14;
  assert_float_equal(ct_f32(a.top[0])[0], (float)g, 0);
  assert_int_equal(ct_layer_forward(a.l, NULL, a.top, NULL, &err), CT_OK);
  Caffe__CortadoDataPosition pos = CAFFE__CORTADO_DATA_POSITION__INIT;
  assert_non_null(a.l->ops->get_position);
  assert_int_equal(a.l->ops->get_position(a.l, &pos), CT_OK);
  assert_string_equal(pos.layer, "data");
  assert_int_equal(pos.cursor, 6);
  assert_int_equal(ct_layer_forward(a.l, NULL, a.top, NULL, &err), CT_OK);
  float next[3 * 64], labels[3];
  memcpy(next, a.top[0]->data, sizeof next);
  memcpy(labels, a.top[1]->data, sizeof labels);
  assert_float_equal(labels[0], 6, 0);
  assert_float_equal(labels[1], 0, 0);
  run_free(&a); /* LevelDB allows one process-wide handle: close before reopening */

  run_init(&b, path, CT_DB_LEVELDB, 3, 2);
  b.tp.force_gray = 1;
  assert_int_equal(run_setup(&b, CT_PHASE_TRAIN, &err), CT_OK);
  assert_int_equal(b.l->ops->set_position(b.l, &pos, &err), CT_OK);
  assert_int_equal(ct_layer_forward(b.l, NULL, b.top, NULL, &err), CT_OK);
  assert_memory_equal(b.top[0]->data, next, sizeof next);
  assert_memory_equal(b.top[1]->data, labels, sizeof labels);
  free(pos.layer);
  run_free(&b);
}

/* The batch hooks a GPU program feeds through (next_batch / release_batch):
 * the batches come in the stream's order, the same as forward gives; a
 * batch out through them (the one staged for the next iteration) is not
 * counted by the position, so a resumed run reads it first. */
static void test_data_layer_batch_hooks(void **state) {
  const char *dir = tu_tmpdir("data_layer_hooks");
  char path[4200];
  snprintf(path, sizeof path, "%s/lmdb", dir);
  make_db(path, CT_DB_LMDB, 10);
  run r;
  run_init(&r, path, CT_DB_LMDB, 4, 2);
  ct_error err;
  assert_int_equal(run_setup(&r, CT_PHASE_TRAIN, &err), CT_OK);
  assert_non_null(r.l->ops->next_batch);
  assert_non_null(r.l->ops->release_batch);
  const float *host[2] = {NULL, NULL};
  void *token = NULL;
  Caffe__CortadoDataPosition pos = CAFFE__CORTADO_DATA_POSITION__INIT;
  /* batch 0 through forward, batch 1 through the hooks */
  assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
  assert_int_equal(r.l->ops->next_batch(r.l, host, &token, &err), CT_OK);
  assert_non_null(host[0]);
  assert_non_null(host[1]);
  for (int i = 0; i < 4; i++) assert_float_equal(host[1][i], (float)(4 + i), 0);
  float want[C * H * W];
  expected(&r, CT_PHASE_TRAIN, 0, 5, NULL, want);
  assert_memory_equal(host[0] + C * H * W, want, sizeof want);
  /* staged, not consumed: the position stays after batch 0 */
  assert_int_equal(r.l->ops->get_position(r.l, &pos), CT_OK);
  assert_int_equal(pos.cursor, 4);
  free(pos.layer);
  r.l->ops->release_batch(r.l, token);
  /* released (consumed): after batch 1 */
  caffe__cortado_data_position__init(&pos);
  assert_int_equal(r.l->ops->get_position(r.l, &pos), CT_OK);
  assert_int_equal(pos.cursor, 8);
  free(pos.layer);
  /* the stream goes on with batch 2: records 8, 9, 0, 1 */
  assert_int_equal(ct_layer_forward(r.l, NULL, r.top, NULL, &err), CT_OK);
  const float labels[4] = {8, 9, 0, 1};
  assert_memory_equal(r.top[1]->data, labels, sizeof labels);
  run_free(&r);
}

/* Sets up a Data layer on path and expects setup to fail with `want`
 * (or, when forward_fails, setup to pass and the first forward to fail). */
static void expect_error(const char *path, ct_db_backend b, bool forward_fails, ct_status code,
                         const char *want, Caffe__TransformationParameter *tp) {
  run r;
  run_init(&r, path, b, 4, 2);
  if (tp) r.tp = *tp;
  ct_error err;
  ct_status s = run_setup(&r, CT_PHASE_TRAIN, &err);
  if (forward_fails) {
    assert_int_equal(s, CT_OK);
    s = ct_layer_forward(r.l, NULL, r.top, NULL, &err);
  }
  assert_int_equal(s, code);
  assert_string_equal(err.msg, want);
  run_free(&r);
}

static void test_data_layer_bad_input(void **state) {
  const char *dir = tu_tmpdir("data_layer_bad_input");
  char path[4200], want[9000];

  snprintf(path, sizeof path, "%s/missing_lmdb", dir);
  snprintf(want, sizeof want,
           "layer 'data' (Data): %s: cannot open LMDB for reading: No such file or directory", path);
  expect_error(path, CT_DB_LMDB, false, CT_ERR_NOTFOUND, want, NULL);

  /* a corrupt record in the middle */
  snprintf(path, sizeof path, "%s/corrupt", dir);
  make_db(path, CT_DB_LMDB, 8);
  put_raw(path, CT_DB_LMDB, "00000002", "\x0a\xff\xff\xff", 4);
  snprintf(want, sizeof want,
           "layer 'data' (Data): record 00000002 of %s: not a valid caffe.Datum (truncated or corrupt, 4 bytes)",
           path);
  expect_error(path, CT_DB_LMDB, true, CT_ERR_PARSE, want, NULL);

  /* a datum whose bytes disagree with its shape */
  snprintf(path, sizeof path, "%s/short", dir);
  make_db(path, CT_DB_LEVELDB, 8);
  uint8_t *buf;
  size_t len;
  ct_error err;
  uint8_t px[C * H * W] = {0};
  Caffe__Datum d = CAFFE__DATUM__INIT;
  d.has_channels = d.has_height = d.has_width = d.has_data = 1;
  d.channels = C;
  d.height = H;
  d.width = W;
  d.data.data = px;
  d.data.len = 190;
  len = caffe__datum__get_packed_size(&d);
  buf = malloc(len);
  caffe__datum__pack(&d, buf);
  put_raw(path, CT_DB_LEVELDB, "00000001", buf, len);
  free(buf);
  snprintf(want, sizeof want,
           "layer 'data' (Data): record 00000001 of %s: data has 190 bytes for shape 3x8x8 = 192", path);
  expect_error(path, CT_DB_LEVELDB, true, CT_ERR_INVALID, want, NULL);

  /* a record of another shape than the first */
  snprintf(path, sizeof path, "%s/mixed", dir);
  make_db(path, CT_DB_LMDB, 8);
  assert_int_equal(ct_datum_encode_raw(px, 1, 8, 8, 0, &buf, &len, &err), CT_OK);
  put_raw(path, CT_DB_LMDB, "00000003", buf, len);
  free(buf);
  snprintf(want, sizeof want,
           "layer 'data' (Data): record 00000003 of %s: image 1x8x8 does not fit the top shape 3x8x8 set from the first record",
           path);
  expect_error(path, CT_DB_LMDB, true, CT_ERR_INVALID, want, NULL);

  /* an encoded record that does not decode */
  snprintf(path, sizeof path, "%s/badjpeg", dir);
  make_db(path, CT_DB_LMDB, 8);
  ct_image img;
  ct_image_alloc(&img, H, W, 3);
  uint8_t *jpg;
  size_t jlen;
  assert_int_equal(ct_image_encode_jpeg(&img, 90, &jpg, &jlen, &err), CT_OK);
  assert_int_equal(ct_datum_encode_file_bytes(jpg, jlen / 2, 0, &buf, &len, &err), CT_OK);
  put_raw(path, CT_DB_LMDB, "00000000", buf, len);
  free(buf);
  free(jpg);
  ct_image_free(&img);
  snprintf(want, sizeof want,
           "layer 'data' (Data): record 00000000 of %s: corrupt JPEG: Premature end of JPEG file (truncated data)",
           path);
  expect_error(path, CT_DB_LMDB, false, CT_ERR_PARSE, want, NULL);

  /* a mean file of the wrong shape */
  snprintf(path, sizeof path, "%s/good", dir);
  make_db(path, CT_DB_LMDB, 4);
  char mean[4300];
  snprintf(mean, sizeof mean, "%s/mean.binaryproto", dir);
  float mv[C * 4 * 4] = {0};
  Caffe__BlobProto bp = CAFFE__BLOB_PROTO__INIT;
  bp.has_num = bp.has_channels = bp.has_height = bp.has_width = 1;
  bp.num = 1;
  bp.channels = C;
  bp.height = bp.width = 4;
  bp.n_data = C * 16;
  bp.data = mv;
  assert_int_equal(ct_proto_write_binary((ProtobufCMessage *)&bp, mean, &err), CT_OK);
  Caffe__TransformationParameter tp = CAFFE__TRANSFORMATION_PARAMETER__INIT;
  tp.mean_file = mean;
  snprintf(want, sizeof want,
           "layer 'data' (Data): record 00000000 of %s: image 3x8x8 does not match mean_file %s (3x4x4)", path,
           mean);
  expect_error(path, CT_DB_LMDB, false, CT_ERR_INVALID, want, &tp);

  /* an empty database; parameters missing */
  snprintf(path, sizeof path, "%s/empty", dir);
  ct_db *db;
  assert_int_equal(ct_db_open(&db, path, CT_DB_LMDB, CT_DB_NEW, &err), CT_OK);
  ct_db_close(db);
  snprintf(want, sizeof want, "layer 'data' (Data): %s: the database has no records", path);
  expect_error(path, CT_DB_LMDB, false, CT_ERR_INVALID, want, NULL);
  expect_error("", CT_DB_LMDB, false, CT_ERR_INVALID,
               "layer 'data' (Data): data_param.source must be given", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_data_layer_batches),
      cmocka_unit_test(test_data_layer_shards_by_rank),
      cmocka_unit_test(test_data_layer_shuffle),
      cmocka_unit_test(test_data_layer_encoded_and_position),
      cmocka_unit_test(test_data_layer_batch_hooks),
      cmocka_unit_test(test_data_layer_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
