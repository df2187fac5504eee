/* The prefetching pipeline: a pool of threads fills a ring of batches one
 * record at a time; the consumer takes batches in order.  See pipeline.h for
 * the stream, sharding and determinism rules.
 *
 * Work is handed out as item numbers n = seq * batch_size + i (sample i of
 * batch seq, counted from the last set_position).  Batch seq lives in slot
 * seq % nslots and may be filled once batch seq - nslots was released, i.e.
 * while seq < released + nslots. */
#include "data/pipeline.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/mem.h"
#include "core/settings.h"
#include "core/signals.h"
#include "core/trace.h"

#define PERM_CACHE 4

typedef struct slot {
  ct_batch b;
  int done;        /* samples written so far */
  ct_status status; /* the first error among them */
  ct_error err;
} slot;

typedef struct perm_entry {
  bool valid;
  uint64_t epoch, last_use;
  uint32_t *perm; /* (count) */
} perm_entry;

struct ct_pipeline {
  ct_pipeline_config cfg;
  ct_pipeline_source src;
  size_t count;
  int world, rank, nslots;
  slot *slots; /* (nslots) */
  pthread_mutex_t mu;
  pthread_cond_t cv_work;  /* workers: an item may be claimable */
  pthread_cond_t cv_done;  /* consumer: a batch is complete; set_position: no load in flight */
  uint64_t seed;
  uint64_t base_g;    /* stream position of item 0 */
  uint64_t next_item; /* next item to claim */
  uint64_t handed;    /* batches handed out */
  uint64_t released;  /* batches given back */
  int active;         /* items being loaded right now */
  bool paused, stop, out;
  perm_entry perms[PERM_CACHE];
  uint64_t use_clock;
  int nthreads;
  pthread_t *threads;
  void **tstates; /* (nthreads) */
};

/* ------------------------------------------------------------- helpers */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void ct_pipeline_record_rng(uint64_t seed, uint64_t epoch, uint64_t index, ct_rng *rng) {
  uint64_t x = mix64(seed ^ 0x5245434f52445321ull);
  x = mix64(x + 0x9E3779B97F4A7C15ull * (epoch + 1));
  x = mix64(x + 0xD1B54A32D192ED03ull * (index + 1));
  ct_rng_seed(rng, x);
}

void ct_pipeline_permutation(uint64_t seed, uint64_t epoch, bool shuffle, size_t count,
                             uint32_t *perm) {
  for (size_t j = 0; j < count; j++) perm[j] = (uint32_t)j;
  if (!shuffle) return;
  ct_rng r;
  ct_rng_seed(&r, mix64(mix64(seed ^ 0x5045524d5554452eull) + 0x9E3779B97F4A7C15ull * (epoch + 1)));
  for (size_t j = count; j > 1; j--) {
    size_t k = (size_t)ct_rng_below(&r, j);
    uint32_t t = perm[j - 1];
    perm[j - 1] = perm[k];
    perm[k] = t;
  }
}

static int g_local_workers = 1;

void ct_pipeline_set_local_workers(int n) { g_local_workers = n > 0 ? n : 1; }

int ct_pipeline_default_threads(bool host_compute) {
  long given;
  if (ct_setting_given_int("CORTADO_DATA_THREADS", &given)) return (int)given;
  if (host_compute) return 1;
  long cores = ct_cpu_count();
  long workers = g_local_workers;
  const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int local_size = local ? atoi(local) : 0;
  if (local_size > 0) workers *= local_size;
  long n = cores / workers;
  return n < 1 ? 1 : n > 16 ? 16 : (int)n;
}

/* The record at stream position g; call with mu held. */
static size_t record_at(ct_pipeline *p, uint64_t g, uint64_t *epoch) {
  *epoch = g / p->count;
  size_t j = (size_t)(g % p->count);
  if (!p->cfg.shuffle) return j;
  perm_entry *hit = NULL, *lru = &p->perms[0];
  for (int i = 0; i < PERM_CACHE; i++) {
    perm_entry *e = &p->perms[i];
    if (e->valid && e->epoch == *epoch) hit = e;
    if (!e->valid || (lru->valid && e->last_use < lru->last_use)) lru = e;
  }
  if (!hit) {
    hit = lru;
    if (!hit->perm) hit->perm = ct_xcalloc(p->count, sizeof *hit->perm);
    ct_pipeline_permutation(p->seed, *epoch, true, p->count, hit->perm);
    hit->valid = true;
    hit->epoch = *epoch;
  }
  hit->last_use = ++p->use_clock;
  return hit->perm[j];
}

static void reset_slot(slot *s) {
  s->done = 0;
  s->status = CT_OK;
  s->err.code = CT_OK;
  s->err.msg[0] = 0;
}

/* -------------------------------------------------------------- workers */
typedef struct worker_arg {
  ct_pipeline *p;
  int index;
} worker_arg;

static void *worker_main(void *arg_) {
  worker_arg *arg = arg_;
  ct_pipeline *p = arg->p;
  void *tstate = p->tstates[arg->index];
  free(arg);
  ct_cpu_flush_subnormals(); /* decoding and transforms compute in floats */
  ct_signals_block_async(NULL);
  const int B = p->cfg.batch_size;
  ct_error err;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && (p->paused || p->next_item / B >= p->released + p->nslots))
      pthread_cond_wait(&p->cv_work, &p->mu);
    if (p->stop) break;
    uint64_t n = p->next_item++;
    uint64_t seq = n / B;
    int i = (int)(n % B);
    slot *s = &p->slots[seq % p->nslots];
    uint64_t g = p->base_g + n * p->world + p->rank, epoch;
    size_t record = record_at(p, g, &epoch);
    uint64_t seed = p->seed;
    p->active++;
    pthread_mutex_unlock(&p->mu);

    ct_rng rng;
    ct_pipeline_record_rng(seed, epoch, record, &rng);
    err.code = CT_OK;
    err.msg[0] = 0;
    const bool traced = ct_trace_on();
    const double t0 = traced ? ct_trace_now() : 0;
    ct_status st = p->src.load(p->src.ctx, tstate, record, &rng,
                               s->b.data + (size_t)i * p->cfg.sample_count, s->b.label + i, &err);
    if (traced) {
      const ct_trace_args a = {.index_name = "record", .index = (long long)record};
      ct_trace_complete(CT_TRACE_DATA, "data", "load", t0, ct_trace_now(), &a);
    }

    pthread_mutex_lock(&p->mu);
    p->active--;
    if (st != CT_OK && s->status == CT_OK) {
      s->status = st;
      s->err = err;
      s->err.code = st;
    }
    if (i == 0) s->b.epoch = epoch;
    /* wake the consumer once per batch (not per sample), and
     * set_position when the last load in flight ends */
    if (++s->done == B) {
      s->b.seq = seq;
      pthread_cond_broadcast(&p->cv_done);
    } else if (p->paused && p->active == 0) {
      pthread_cond_broadcast(&p->cv_done);
    }
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* ------------------------------------------------------------ lifecycle */
static uint64_t initial_skip(uint64_t seed, uint32_t rand_skip) {
  if (rand_skip == 0) return 0;
  ct_rng r;
  ct_rng_seed(&r, mix64(seed ^ 0x52414e44534b4950ull));
  return ct_rng_below(&r, rand_skip);
}

static void stop_threads(ct_pipeline *p, int started) {
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  pthread_cond_broadcast(&p->cv_work);
  pthread_mutex_unlock(&p->mu);
  for (int t = 0; t < started; t++) pthread_join(p->threads[t], NULL);
}

static void free_all(ct_pipeline *p) {
  if (p->tstates)
    for (int t = 0; t < p->nthreads; t++)
      if (p->tstates[t] && p->src.thread_free) p->src.thread_free(p->src.ctx, p->tstates[t]);
  for (int i = 0; i < p->nslots; i++) {
    ct_mem_free_pinned(p->slots[i].b.data);
    ct_mem_free_pinned(p->slots[i].b.label);
  }
  for (int i = 0; i < PERM_CACHE; i++) free(p->perms[i].perm);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv_work);
  pthread_cond_destroy(&p->cv_done);
  free(p->slots);
  free(p->threads);
  free(p->tstates);
  free(p);
}

ct_status ct_pipeline_create(const ct_pipeline_config *cfg, const ct_pipeline_source *src,
                             ct_pipeline **out, ct_error *err) {
  *out = NULL;
  int world = cfg->world > 0 ? cfg->world : 1;
  if (cfg->batch_size <= 0)
    return ct_error_set(err, CT_ERR_INVALID, "batch_size must be positive (got %d)", cfg->batch_size);
  if (cfg->sample_count == 0)
    return ct_error_set(err, CT_ERR_INVALID, "samples must have at least one value");
  if (cfg->rank < 0 || cfg->rank >= world)
    return ct_error_set(err, CT_ERR_INVALID, "rank %d out of range for world %d", cfg->rank, world);
  if (src->count == 0) return ct_error_set(err, CT_ERR_INVALID, "the source has no records");
  if (src->count > UINT32_MAX)
    return ct_error_set(err, CT_ERR_UNSUPPORTED, "%zu records (at most %u are supported)",
                        src->count, UINT32_MAX);
  if (cfg->prefetch < 0 || cfg->threads < 0)
    return ct_error_set(err, CT_ERR_INVALID, "prefetch and threads must not be negative");
  ct_pipeline *p = ct_xcalloc(1, sizeof *p);
  p->cfg = *cfg;
  p->src = *src;
  p->count = src->count;
  p->world = world;
  p->rank = cfg->rank;
  p->nslots = cfg->prefetch > 0 ? cfg->prefetch : 4;
  p->nthreads = cfg->threads > 0 ? cfg->threads : ct_pipeline_default_threads(cfg->host_compute);
  p->seed = cfg->seed;
  p->base_g = initial_skip(cfg->seed, cfg->rand_skip);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv_work, NULL);
  pthread_cond_init(&p->cv_done, NULL);
  p->slots = ct_xcalloc((size_t)p->nslots, sizeof *p->slots);
  for (int i = 0; i < p->nslots; i++) {
    p->slots[i].b.n = cfg->batch_size;
    p->slots[i].b.data = ct_mem_alloc_pinned((size_t)cfg->batch_size * cfg->sample_count * sizeof(float));
    p->slots[i].b.label = ct_mem_alloc_pinned((size_t)cfg->batch_size * sizeof(float));
    reset_slot(&p->slots[i]);
  }
  p->threads = ct_xcalloc((size_t)p->nthreads, sizeof *p->threads);
  p->tstates = ct_xcalloc((size_t)p->nthreads, sizeof *p->tstates);
  for (int t = 0; t < p->nthreads; t++) {
    if (!src->thread_init) break;
    ct_status s = src->thread_init(src->ctx, &p->tstates[t], err);
    if (s != CT_OK) {
      free_all(p);
      return s;
    }
  }
  for (int t = 0; t < p->nthreads; t++) {
    worker_arg *a = ct_xcalloc(1, sizeof *a);
    a->p = p;
    a->index = t;
    int rc = pthread_create(&p->threads[t], NULL, worker_main, a);
    if (rc != 0) {
      free(a);
      stop_threads(p, t);
      free_all(p);
      return ct_error_set(err, CT_ERR_IO, "cannot start data thread %d of %d: %s", t + 1,
                          p->nthreads, strerror(rc));
    }
  }
  *out = p;
  return CT_OK;
}

void ct_pipeline_free(ct_pipeline *p) {
  if (!p) return;
  stop_threads(p, p->nthreads);
  free_all(p);
}

/* ----------------------------------------------------------- consuming */
ct_status ct_pipeline_next(ct_pipeline *p, ct_batch **batch, ct_error *err) {
  *batch = NULL;
  pthread_mutex_lock(&p->mu);
  CT_ASSERTF(!p->out, "ct_pipeline_next: the previous batch was not released");
  slot *s = &p->slots[p->handed % p->nslots];
  const bool waits = s->done < p->cfg.batch_size && ct_trace_on();
  const double t0 = waits ? ct_trace_now() : 0;
  while (s->done < p->cfg.batch_size) pthread_cond_wait(&p->cv_done, &p->mu);
  if (waits) ct_trace_complete(CT_TRACE_COMPUTE, "data", "data wait", t0, ct_trace_now(), NULL);
  p->handed++;
  if (s->status != CT_OK) {
    ct_status st = s->status;
    if (err) *err = s->err;
    reset_slot(s);
    p->released++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    return st;
  }
  p->out = true;
  *batch = &s->b;
  pthread_mutex_unlock(&p->mu);
  return CT_OK;
}

void ct_pipeline_release(ct_pipeline *p, ct_batch *batch) {
  pthread_mutex_lock(&p->mu);
  slot *s = &p->slots[p->released % p->nslots];
  CT_ASSERTF(p->out && batch == &s->b, "ct_pipeline_release: not the batch handed out");
  reset_slot(s);
  p->released++;
  p->out = false;
  pthread_cond_broadcast(&p->cv_work);
  pthread_mutex_unlock(&p->mu);
}

void ct_pipeline_get_position(const ct_pipeline *p, ct_data_position *pos) {
  ct_pipeline_get_position_behind(p, 0, pos);
}

void ct_pipeline_get_position_behind(const ct_pipeline *p, int behind, ct_data_position *pos) {
  ct_pipeline *mp = (ct_pipeline *)p;
  pthread_mutex_lock(&mp->mu);
  CT_ASSERT(behind == 0 || (behind == 1 && p->out && p->handed >= 1));
  uint64_t g = p->base_g + (p->handed - (uint64_t)behind) * (uint64_t)p->cfg.batch_size * p->world;
  pos->epoch = g / p->count;
  pos->cursor = g % p->count;
  pos->seed = p->seed;
  pthread_mutex_unlock(&mp->mu);
}

ct_status ct_pipeline_set_position(ct_pipeline *p, const ct_data_position *pos, ct_error *err) {
  if (pos->cursor >= p->count)
    return ct_error_set(err, CT_ERR_INVALID,
                        "data position cursor %llu is past the %zu records of an epoch",
                        (unsigned long long)pos->cursor, p->count);
  if (pos->epoch > (UINT64_MAX - pos->cursor) / p->count)
    return ct_error_set(err, CT_ERR_INVALID,
                        "data position epoch %llu is beyond any run (%zu records an epoch)",
                        (unsigned long long)pos->epoch, p->count);
  pthread_mutex_lock(&p->mu);
  CT_ASSERTF(!p->out, "ct_pipeline_set_position: a batch is still out");
  p->paused = true;
  while (p->active > 0) pthread_cond_wait(&p->cv_done, &p->mu);
  if (pos->seed != p->seed)
    for (int i = 0; i < PERM_CACHE; i++) p->perms[i].valid = false;
  p->seed = pos->seed;
  p->base_g = pos->epoch * p->count + pos->cursor;
  p->next_item = p->handed = p->released = 0;
  for (int i = 0; i < p->nslots; i++) reset_slot(&p->slots[i]);
  p->paused = false;
  pthread_cond_broadcast(&p->cv_work);
  pthread_mutex_unlock(&p->mu);
  return CT_OK;
}

void ct_data_position_to_proto(const ct_data_position *pos, const char *layer,
                               Caffe__CortadoDataPosition *msg) {
  free(msg->layer);
  msg->layer = ct_xstrdup(layer ? layer : "");
  msg->has_epoch = msg->has_cursor = msg->has_seed = 1;
  msg->epoch = pos->epoch;
  msg->cursor = pos->cursor;
  msg->seed = pos->seed;
}

void ct_data_position_from_proto(const Caffe__CortadoDataPosition *msg, ct_data_position *pos) {
  pos->epoch = msg->has_epoch ? msg->epoch : 0;
  pos->cursor = msg->has_cursor ? msg->cursor : 0;
  pos->seed = msg->has_seed ? msg->seed : 0;
}
