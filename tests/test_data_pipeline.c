/* The prefetching pipeline over a synthetic source: sharding gives disjoint
 * and complete epochs and reads only the worker's own records, batches do
 * not depend on the thread count, shuffles are reproducible, positions
 * restore exactly, rand_skip, and errors reach ct_pipeline_next. */
#include <pthread.h>
#include <stdio.h>

#include "data/pipeline.h"
#include "testutil.h"
#include "core/cpu.h"

#define SAMPLE 3

/* Sample of record i: (i, a uniform draw from its rng, i * 10); label i. */
typedef struct synth {
  size_t count;
  long fail_index; /* -1: none */
  pthread_mutex_t mu;
  size_t *loads; /* (count) how often each record was loaded */
  int threads_made;
} synth;

static ct_status synth_thread_init(void *ctx, void **tstate, ct_error *err) {
  synth *s = ctx;
  pthread_mutex_lock(&s->mu);
  s->threads_made++;
  pthread_mutex_unlock(&s->mu);
  *tstate = NULL;
  return CT_OK;
}

static ct_status synth_load(void *ctx, void *tstate, size_t index, ct_rng *rng, float *data,
                            float *label, ct_error *err) {
  synth *s = ctx;
  pthread_mutex_lock(&s->mu);
  s->loads[index]++;
  pthread_mutex_unlock(&s->mu);
  if ((long)index == s->fail_index)
    return ct_error_set(err, CT_ERR_PARSE, "record %08zu of synth: corrupt", index);
  data[0] = (float)index;
  data[1] = ct_rng_uniform(rng, 0, 1);
  data[2] = (float)index * 10;
  *label = (float)index;
  return CT_OK;
}

static void synth_init(synth *s, size_t count) {
  memset(s, 0, sizeof *s);
  s->count = count;
  s->fail_index = -1;
  pthread_mutex_init(&s->mu, NULL);
  s->loads = calloc(count, sizeof *s->loads);
}

static void synth_free(synth *s) {
  free(s->loads);
  pthread_mutex_destroy(&s->mu);
}

static ct_pipeline_source synth_source(synth *s) {
  ct_pipeline_source src = {.ctx = s, .count = s->count, .thread_init = synth_thread_init,
                            .load = synth_load};
  return src;
}

static ct_pipeline_config config(int batch, int threads, uint64_t seed, bool shuffle, int rank,
                                 int world) {
  ct_pipeline_config c = {.batch_size = batch, .sample_count = SAMPLE, .prefetch = 3,
                          .threads = threads, .seed = seed, .shuffle = shuffle,
                          .rank = rank, .world = world};
  return c;
}

/* Takes nb batches into out (nb * batch * SAMPLE floats) and labels. */
static void take(ct_pipeline *p, int nb, int batch, float *out, float *labels) {
  for (int b = 0; b < nb; b++) {
    ct_batch *bt;
    ct_error err;
    assert_int_equal(ct_pipeline_next(p, &bt, &err), CT_OK);
    assert_int_equal(bt->n, batch);
    memcpy(out + (size_t)b * batch * SAMPLE, bt->data, sizeof(float) * batch * SAMPLE);
    if (labels) memcpy(labels + (size_t)b * batch, bt->label, sizeof(float) * batch);
    ct_pipeline_release(p, bt);
  }
}

static void test_pipeline_sharding_covers_epochs(void **state) {
  const size_t count = 23;
  const int B = 3, nb = 9;
  for (int shuffle = 0; shuffle < 2; shuffle++)
    for (int world = 1; world <= 4; world++) {
      int seen[2][23] = {{0}}; /* epochs 0 and 1 */
      for (int rank = 0; rank < world; rank++) {
        synth s;
        synth_init(&s, count);
        ct_pipeline_source src = synth_source(&s);
        ct_pipeline_config cfg = config(B, 2, 77, shuffle, rank, world);
        ct_pipeline *p;
        ct_error err;
        assert_int_equal(ct_pipeline_create(&cfg, &src, &p, &err), CT_OK);
        float out[9 * 3 * SAMPLE], labels[27];
        take(p, nb, B, out, labels);
        ct_pipeline_free(p);
        /* batch items are the stream positions g = m * world + rank; the
         * ring holds at most prefetch (3) batches beyond those taken */
        size_t allowed[23] = {0};
        for (int m = 0; m < (nb + 3) * B; m++) {
          uint64_t g = (uint64_t)m * world + rank;
          uint32_t perm[23];
          ct_pipeline_permutation(77, g / count, shuffle, count, perm);
          uint32_t want = perm[g % count];
          allowed[want]++;
          if (m < nb * B) {
            assert_float_equal(labels[m], (float)want, 0);
            assert_float_equal(out[m * SAMPLE + 2], want * 10.0f, 0);
            if (g < 2 * count) seen[g / count][want]++;
          }
        }
        /* it only ever loaded records of its own positions */
        for (size_t i = 0; i < count; i++) assert_true(s.loads[i] <= allowed[i]);
        assert_int_equal(s.threads_made, 2);
        synth_free(&s);
      }
      /* the workers together read each of the first two epochs exactly once */
      int total_needed = nb * B * world;
      for (int e = 0; e < 2; e++)
        if ((size_t)total_needed >= (e + 1) * count)
          for (size_t i = 0; i < count; i++) assert_int_equal(seen[e][i], 1);
    }
}

static void test_pipeline_same_batches_for_any_thread_count(void **state) {
  float ref[6 * 4 * SAMPLE], out[6 * 4 * SAMPLE];
  for (int threads = 1; threads <= 4; threads++) {
    synth s;
    synth_init(&s, 17);
    ct_pipeline_source src = synth_source(&s);
    ct_pipeline_config cfg = config(4, threads, 5, true, 0, 1);
    ct_pipeline *p;
    ct_error err;
    assert_int_equal(ct_pipeline_create(&cfg, &src, &p, &err), CT_OK);
    take(p, 6, 4, threads == 1 ? ref : out, NULL);
    ct_pipeline_free(p);
    if (threads > 1) assert_memory_equal(out, ref, sizeof ref);
    synth_free(&s);
  }
  /* the random draw is the record's own: the same record in two epochs
   * differs, and is what ct_pipeline_record_rng gives */
  for (int m = 0; m < 24; m++) {
    uint32_t perm[17];
    ct_pipeline_permutation(5, (uint64_t)m / 17, true, 17, perm);
    ct_rng r;
    ct_pipeline_record_rng(5, (uint64_t)m / 17, perm[m % 17], &r);
    assert_float_equal(ref[m * SAMPLE + 1], ct_rng_uniform(&r, 0, 1), 0);
    assert_float_equal(ref[m * SAMPLE], (float)perm[m % 17], 0);
  }
}

static void test_pipeline_shuffle_reproducible(void **state) {
  uint32_t a[50], b[50], c[50], d[50];
  ct_pipeline_permutation(9, 0, true, 50, a);
  ct_pipeline_permutation(9, 0, true, 50, b);
  ct_pipeline_permutation(9, 1, true, 50, c);
  ct_pipeline_permutation(10, 0, true, 50, d);
  assert_memory_equal(a, b, sizeof a);
  assert_memory_not_equal(a, c, sizeof a);
  assert_memory_not_equal(a, d, sizeof a);
  int hits[50] = {0};
  for (int i = 0; i < 50; i++) hits[a[i]]++;
  for (int i = 0; i < 50; i++) assert_int_equal(hits[i], 1);
  ct_pipeline_permutation(9, 3, false, 50, a);
  for (int i = 0; i < 50; i++) assert_int_equal(a[i], i);
  /* two runs with the same seed give the same batches */
  float r1[5 * 4 * SAMPLE], r2[5 * 4 * SAMPLE];
  for (int run = 0; run < 2; run++) {
    synth s;
    synth_init(&s, 13);
    ct_pipeline_source src = synth_source(&s);
    ct_pipeline_config cfg = config(4, 2, 1234, true, 0, 1);
    ct_pipeline *p;
    ct_error err;
    assert_int_equal(ct_pipeline_create(&cfg, &src, &p, &err), CT_OK);
    take(p, 5, 4, run ? r2 : r1, NULL);
    ct_pipeline_free(p);
    synth_free(&s);
  }
  assert_memory_equal(r1, r2, sizeof r1);
}

static void test_pipeline_position_restores_exactly(void **state) {
  for (int world = 1; world <= 2; world++) {
    synth s;
    synth_init(&s, 11);
    ct_pipeline_source src = synth_source(&s);
    ct_pipeline_config cfg = config(3, 2, 42, true, world - 1, world);
    ct_pipeline *a, *b;
    ct_error err;
    assert_int_equal(ct_pipeline_create(&cfg, &src, &a, &err), CT_OK);
    float head[4 * 3 * SAMPLE], tail[5 * 3 * SAMPLE], again[5 * 3 * SAMPLE];
    take(a, 4, 3, head, NULL);
    ct_data_position pos;
    ct_pipeline_get_position(a, &pos);
    /* 4 batches of 3 from every one of `world` workers */
    assert_int_equal(pos.epoch * 11 + pos.cursor, 12 * world);
    assert_int_equal(pos.seed, 42);
    take(a, 5, 3, tail, NULL);

    /* through the message a snapshot stores */
    Caffe__CortadoDataPosition msg = CAFFE__CORTADO_DATA_POSITION__INIT;
    ct_data_position_to_proto(&pos, "mnist", &msg);
    assert_string_equal(msg.layer, "mnist");
    ct_data_position back;
    ct_data_position_from_proto(&msg, &back);
    free(msg.layer);

    ct_pipeline_config cfg_b = cfg;
    cfg_b.threads = 3;
    cfg_b.seed = 999; /* replaced by the position's seed */
    assert_int_equal(ct_pipeline_create(&cfg_b, &src, &b, &err), CT_OK);
    take(b, 1, 3, again, NULL); /* prefetched batches are dropped by set_position */
    assert_int_equal(ct_pipeline_set_position(b, &back, &err), CT_OK);
    take(b, 5, 3, again, NULL);
    assert_memory_equal(again, tail, sizeof tail);
    /* rewinding the same pipeline */
    assert_int_equal(ct_pipeline_set_position(a, &back, &err), CT_OK);
    take(a, 5, 3, again, NULL);
    assert_memory_equal(again, tail, sizeof tail);
    ct_data_position bad = {0, 11, 42};
    assert_int_equal(ct_pipeline_set_position(a, &bad, &err), CT_ERR_INVALID);
    assert_string_equal(err.msg, "data position cursor 11 is past the 11 records of an epoch");
    ct_pipeline_free(a);
    ct_pipeline_free(b);
    synth_free(&s);
  }
}

static void test_pipeline_rand_skip(void **state) {
  int distinct = 0, last = -1;
  for (uint64_t seed = 1; seed <= 8; seed++) {
    synth s;
    synth_init(&s, 40);
    ct_pipeline_source src = synth_source(&s);
    ct_pipeline_config cfg = config(2, 1, seed, false, 0, 1);
    cfg.rand_skip = 30;
    ct_pipeline *p;
    ct_error err;
    assert_int_equal(ct_pipeline_create(&cfg, &src, &p, &err), CT_OK);
    ct_data_position pos;
    ct_pipeline_get_position(p, &pos);
    assert_true(pos.cursor < 30);
    float out[2 * SAMPLE], labels[2];
    take(p, 1, 2, out, labels);
    assert_float_equal(labels[0], (float)pos.cursor, 0);
    assert_float_equal(labels[1], (float)pos.cursor + 1, 0);
    if ((int)pos.cursor != last) distinct++;
    last = (int)pos.cursor;
    ct_pipeline_free(p);
    synth_free(&s);
  }
  assert_true(distinct > 2);
}

static void test_pipeline_errors(void **state) {
  synth s;
  synth_init(&s, 10);
  s.fail_index = 4;
  ct_pipeline_source src = synth_source(&s);
  ct_pipeline_config cfg = config(3, 2, 1, false, 0, 1);
  ct_pipeline *p;
  ct_error err;
  assert_int_equal(ct_pipeline_create(&cfg, &src, &p, &err), CT_OK);
  ct_batch *b;
  assert_int_equal(ct_pipeline_next(p, &b, &err), CT_OK);
  ct_pipeline_release(p, b);
  assert_int_equal(ct_pipeline_next(p, &b, &err), CT_ERR_PARSE); /* records 3, 4, 5 */
  assert_null(b);
  assert_string_equal(err.msg, "record 00000004 of synth: corrupt");
  assert_int_equal(ct_pipeline_next(p, &b, &err), CT_OK);
  assert_float_equal(b->label[0], 6, 0);
  ct_pipeline_release(p, b);
  ct_pipeline_free(p);

  cfg.batch_size = 0;
  assert_int_equal(ct_pipeline_create(&cfg, &src, &p, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "batch_size must be positive (got 0)");
  cfg.batch_size = 2;
  cfg.rank = 3;
  cfg.world = 2;
  assert_int_equal(ct_pipeline_create(&cfg, &src, &p, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "rank 3 out of range for world 2");
  cfg.rank = 0;
  src.count = 0;
  assert_int_equal(ct_pipeline_create(&cfg, &src, &p, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "the source has no records");
  synth_free(&s);
}

static void test_pipeline_default_threads(void **state) {
  setenv("CORTADO_DATA_THREADS", "3", 1);
  assert_int_equal(ct_pipeline_default_threads(false), 3);
  assert_int_equal(ct_pipeline_default_threads(true), 3);
  unsetenv("CORTADO_DATA_THREADS");
  int n = ct_pipeline_default_threads(false);
  assert_true(n >= 1 && n <= 16 && n <= ct_cpu_count());
  assert_int_equal(ct_pipeline_default_threads(true), 1); /* the compute pool has the CPUs */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pipeline_sharding_covers_epochs),
      cmocka_unit_test(test_pipeline_same_batches_for_any_thread_count),
      cmocka_unit_test(test_pipeline_shuffle_reproducible),
      cmocka_unit_test(test_pipeline_position_restores_exactly),
      cmocka_unit_test(test_pipeline_rand_skip),
      cmocka_unit_test(test_pipeline_errors),
      cmocka_unit_test(test_pipeline_default_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
