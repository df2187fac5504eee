/* Data: batches of Datum records from an LMDB or LevelDB, transformed by
 * transform_param and prefetched by a pool of threads (src/data/pipeline.h).
 * Tops: data (batch_size, C, H, W) and optionally label (batch_size). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "data/datum.h"
#include "data/db.h"
#include "layers/data_feed.h"
#include "data/transform.h"
#include "layers/layer.h"

typedef struct data_priv {
  ct_feed feed; /* first: the shared ops in layers/data_feed.h find it at l->priv */
  ct_db *db;
  ct_transform *tf;
  ct_color_mode color;
} data_priv;
_Static_assert(offsetof(data_priv, feed) == 0, "ct_feed_* ops read the feed at l->priv");

typedef struct data_thread {
  ct_db_reader *reader;
  ct_image scratch;
} data_thread;

static ct_status data_thread_init(void *ctx, void **tstate, ct_error *err) {
  data_priv *p = ctx;
  data_thread *t = ct_xcalloc(1, sizeof *t);
  ct_status s = ct_db_reader_open(p->db, &t->reader, err);
  if (s != CT_OK) {
    free(t);
    return s;
  }
  *tstate = t;
  return CT_OK;
}

static void data_thread_free(void *ctx, void *tstate) {
  data_thread *t = tstate;
  ct_db_reader_close(t->reader);
  ct_image_free(&t->scratch);
  free(t);
}

/* Reads, decodes and transforms record `index` into one sample. */
static ct_status data_load(void *ctx, void *tstate, size_t index, ct_rng *rng, float *data,
                           float *label, ct_error *err) {
  data_priv *p = ctx;
  data_thread *t = tstate;
  const void *val;
  size_t len;
  CT_TRY(ct_db_read_index(p->db, t->reader, index, &val, &len, err));
  char where[512];
  size_t klen;
  const char *key = ct_db_key(p->db, index, &klen);
  ct_datum_where(where, sizeof where, key, klen, ct_db_path(p->db));
  Caffe__Datum *d;
  CT_TRY(ct_datum_parse(val, len, where, &d, err));
  ct_pixels px;
  ct_status s = ct_datum_pixels(d, p->color, &t->scratch, &px, where, err);
  if (s == CT_OK && (px.c != p->feed.c || (ct_transform_crop_size(p->tf) == 0 &&
                                           (px.h != p->feed.h || px.w != p->feed.w))))
    s = ct_error_set(err, CT_ERR_INVALID,
                     "%s: image %dx%dx%d does not fit the top shape %dx%dx%d set from the first record",
                     where, px.c, px.h, px.w, p->feed.c, p->feed.h, p->feed.w);
  if (s == CT_OK) s = ct_transform_apply(p->tf, &px, rng, data, where, err);
  if (s == CT_OK) *label = (float)d->label;
  ct_datum_free(d);
  return s;
}

static void data_destroy(ct_layer *l) {
  data_priv *p = l->priv;
  if (!p) return;
  ct_feed_stop(&p->feed);
  ct_transform_free(p->tf);
  ct_db_close(p->db);
  free(p);
  l->priv = NULL;
}

/* The shape of record 0 after the transform. */
static ct_status first_shape(data_priv *p, ct_error *err) {
  ct_db_reader *r;
  CT_TRY(ct_db_reader_open(p->db, &r, err));
  const void *val;
  size_t len, klen;
  char where[512];
  ct_status s = ct_db_read_index(p->db, r, 0, &val, &len, err);
  Caffe__Datum *d = NULL;
  if (s == CT_OK) {
    const char *key = ct_db_key(p->db, 0, &klen);
    ct_datum_where(where, sizeof where, key, klen, ct_db_path(p->db));
    s = ct_datum_parse(val, len, where, &d, err);
  }
  int c, h, w;
  if (s == CT_OK) s = ct_datum_shape(d, p->color, &c, &h, &w, where, err);
  if (s == CT_OK) s = ct_transform_output_shape(p->tf, c, h, w, &p->feed.c, &p->feed.h, &p->feed.w,
                                                where, err);
  if (s == CT_OK && !d->encoded && p->color != CT_COLOR_NATIVE)
    LOG_WARNING("%s: force_color and force_gray apply to encoded datums only; ignored", where);
  ct_datum_free(d);
  ct_db_reader_close(r);
  return s;
}

static ct_status data_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                            ct_error *err) {
  const Caffe__DataParameter *dp = l->param->data_param;
  if (!dp || !dp->source || !dp->source[0])
    return ct_error_set(err, CT_ERR_INVALID, "data_param.source must be given");
  if (!dp->has_batch_size || dp->batch_size == 0)
    return ct_error_set(err, CT_ERR_INVALID, "data_param.batch_size must be positive");
  if (dp->has_scale || dp->has_crop_size || dp->has_mirror || dp->mean_file)
    LOG_WARNING("layer %s: data_param's scale/mean_file/crop_size/mirror are ignored; "
                "put them in transform_param", l->name);
  data_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  CT_TRY(ct_transform_create(l->param->transform_param, l->phase, &p->tf, err));
  p->color = ct_transform_color_mode(p->tf);
  ct_db_backend backend = dp->backend == CAFFE__DATA_PARAMETER__DB__LMDB ? CT_DB_LMDB : CT_DB_LEVELDB;
  CT_TRY(ct_db_open(&p->db, dp->source, backend, CT_DB_READ, err));
  if (ct_db_count(p->db) == 0)
    return ct_error_set(err, CT_ERR_INVALID, "%s: the database has no records", dp->source);
  CT_TRY(first_shape(p, err));
  p->feed.has_label = l->ntop > 1;
  p->feed.source = (ct_pipeline_source){.ctx = p,
                                        .count = ct_db_count(p->db),
                                        .thread_init = data_thread_init,
                                        .thread_free = data_thread_free,
                                        .load = data_load};
  /* NVCaffe's shuffle: a permutation per epoch drawn from the run's seed
   * (the same on every rank, so the shards stay disjoint; resumed exactly).
   * Its threads/parser_threads: one pool here reads and decodes, sized by
   * the larger.  Its cache: the records are read from the memory-mapped
   * database (LMDB) or LevelDB's block cache every epoch, which the page
   * cache already keeps in memory. */
  ct_pipeline_config cfg = ct_feed_config(l, (int)dp->batch_size, (int)dp->prefetch, dp->shuffle,
                                          dp->rand_skip);
  const uint32_t threads = dp->threads > dp->parser_threads ? dp->threads : dp->parser_threads;
  if (threads > 64)
    return ct_error_set(err, CT_ERR_INVALID, "data_param.threads/parser_threads: at most 64, got %u",
                        threads);
  cfg.threads = (int)threads;
  if (dp->cache)
    LOG_INFO("layer %s: data_param.cache: records are read through the database's memory map, "
             "which the page cache keeps in memory",
             l->name);
  CT_TRY(ct_feed_start(&p->feed, &cfg, top, err));
  LOG_INFO("layer %s: %zu records in %s, output data size: %d,%d,%d,%d", l->name,
           ct_db_count(p->db), dp->source, (int)dp->batch_size, p->feed.c, p->feed.h, p->feed.w);
  return CT_OK;
}

const ct_layer_ops ct_data_ops = {
    .type = "Data",
    .min_bottoms = 0, .max_bottoms = 0, .min_tops = 1, .max_tops = 2,
    .flags = CT_LAYER_DATA | CT_LAYER_NO_BACKWARD,
    .setup = data_setup,
    .reshape = ct_feed_reshape,
    .forward_cpu = ct_feed_forward,
    .forward_gpu = ct_feed_forward,
    .destroy = data_destroy,
    .get_position = ct_feed_get_position,
    .set_position = ct_feed_set_position,
    .next_batch = ct_feed_next_batch,
    .release_batch = ct_feed_release_batch,
};
