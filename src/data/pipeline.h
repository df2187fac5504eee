/* The prefetching data pipeline: worker threads read, decode and transform
 * records into a ring of batches that the training loop takes in order.
 *
 * Records and their order.  A source has `count` records, numbered
 * 0..count-1 (e.g. DB index order).  The pipeline reads an endless stream:
 * epoch e is the records in order, or, with shuffle, in the permutation P_e
 * drawn from (seed, e) -- the same on every run and every worker.  Position
 * g of the stream (g = e * count + j) is record P_e[j].
 *
 * Sharding.  With `world` workers, worker `rank` takes the stream positions
 * g with g % world == rank (Caffe 1.0's DataLayer rule), so the workers
 * together read each epoch exactly once, disjointly, and every worker reads
 * only its own records (by index: nothing is read and thrown away).  All
 * workers advance together: after each has taken m records the stream
 * position is G = G0 + m * world on all of them, so one position describes
 * them all.
 *
 * Determinism.  Each record's randomness (crop, mirror) comes from a ct_rng
 * seeded from (seed, epoch, record index), never from which thread ran it,
 * so batches are identical for any number of threads.
 *
 * Position.  (epoch, cursor) = divmod(G, count) counts the batches handed
 * out by ct_pipeline_next (not those prefetched).  rand_skip starts G0 at a
 * number drawn from the seed in [0, rand_skip), as Caffe skips a random
 * number of records at the start.
 *
 * Batches.  A batch holds batch_size samples of sample_count floats each
 * (N, C, H, W) and batch_size labels (N), in pinned host memory
 * (ct_mem_alloc_pinned) so a GPU engine can copy them asynchronously. */
#ifndef CT_DATA_PIPELINE_H
#define CT_DATA_PIPELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "caffe.pb-c.h"
#include "core/rng.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where the records come from.  All callbacks may run concurrently on
 * different threads, each with its own thread state. */
typedef struct ct_pipeline_source {
  void *ctx;     /* the source's own data (borrowed; outlives the pipeline) */
  size_t count;  /* records per epoch (> 0) */
  /* Makes the state one worker thread needs (e.g. a DB reader); may be NULL. */
  ct_status (*thread_init)(void *ctx, void **tstate, ct_error *err);
  void (*thread_free)(void *ctx, void *tstate);
  /* Reads record `index` (0 <= index < count), transforms it with the
   * randomness of `rng`, writes sample_count floats to `data` and the label
   * to *label.  Errors name the record (e.g. its DB key). */
  ct_status (*load)(void *ctx, void *tstate, size_t index, ct_rng *rng, float *data, float *label,
                    ct_error *err);
} ct_pipeline_source;

typedef struct ct_pipeline_config {
  int batch_size;       /* samples per batch (> 0) */
  size_t sample_count;  /* floats per sample, e.g. C*H*W (> 0) */
  int prefetch;         /* batches in the ring (0: 4, Caffe's data_param.prefetch default) */
  int threads;          /* worker threads (0: ct_pipeline_default_threads(host_compute)) */
  bool host_compute;    /* the net these batches feed computes on the host's cores (a CPU
                           context), whose pool already has every CPU */
  uint64_t seed;        /* shuffle and per-record randomness; equal on all workers */
  bool shuffle;         /* a new permutation every epoch */
  uint32_t rand_skip;   /* skip a seed-drawn number in [0, rand_skip) of records at start */
  int rank, world;      /* sharding: this worker among world (world 0 counts as 1) */
} ct_pipeline_config;

/* A filled batch, owned by the pipeline until ct_pipeline_release. */
typedef struct ct_batch {
  float *data;       /* (batch_size, sample_count) pinned host memory */
  float *label;      /* (batch_size) pinned host memory */
  int n;             /* batch_size */
  uint64_t seq;      /* 0, 1, 2, ... since the last set_position */
  uint64_t epoch;    /* the epoch of the first sample */
} ct_batch;

/* An exact place in the stream, shared by all workers. */
typedef struct ct_data_position {
  uint64_t epoch;   /* full passes already made */
  uint64_t cursor;  /* stream positions taken in the current pass, < count */
  uint64_t seed;    /* the pipeline's seed */
} ct_data_position;

typedef struct ct_pipeline ct_pipeline;

/* Threads used when a config says 0: CORTADO_DATA_THREADS from the
 * environment when set to a positive number; else 1 when the net computes
 * on the host (host_compute): the compute pool already has every CPU, and
 * decode threads beside it preempt its parallel regions more than they
 * help (LeNet beside two busy processes on 2 cores trained 1.6 times
 * slower with 2 than with 1, and no slower quiet); else the CPUs this
 * process may use (ct_cpu_count: affinity and cgroup quota) shared among
 * the pipelines' workers on this host (ct_pipeline_set_local_workers times
 * Open MPI's local rank count), between 1 and 16. */
int ct_pipeline_default_threads(bool host_compute);
/* How many data-parallel workers of this process read data at once (the
 * GPUs of `--gpu=0,1`; 1 by default): they share the cores. */
void ct_pipeline_set_local_workers(int n);

/* Starts the worker threads, which begin filling the ring at once.
 * The source is borrowed and must outlive the pipeline.
 * Errors: CT_ERR_INVALID for a bad config ("batch_size must be positive",
 * "rank 3 out of range for world 2", "the source has no records"), the errors
 * of source->thread_init, CT_ERR_IO when a thread cannot be started. */
ct_status ct_pipeline_create(const ct_pipeline_config *cfg, const ct_pipeline_source *src,
                             ct_pipeline **out, ct_error *err);
/* Stops the threads (waiting for those mid-record) and frees everything,
 * batches included.  NULL is a no-op. */
void ct_pipeline_free(ct_pipeline *p);

/* Waits for the next batch in order and hands it out (*batch points into the
 * ring until ct_pipeline_release).  At most one batch is out at a time: call
 * ct_pipeline_release before the next ct_pipeline_next.  Errors: the first
 * error a record of that batch gave (e.g. "record 00000012 of PATH: corrupt
 * JPEG: ..."); the batch is then skipped and the position moves past it. */
ct_status ct_pipeline_next(ct_pipeline *p, ct_batch **batch, ct_error *err);
/* Gives the batch back so its slot can be refilled. */
void ct_pipeline_release(ct_pipeline *p, ct_batch *batch);

/* The position after the last batch handed out. */
void ct_pipeline_get_position(const ct_pipeline *p, ct_data_position *pos);
/* The position after the last batch handed out but `behind` (0 or 1): with
 * 1, the batch out now counts as not read (a batch staged for an iteration
 * that has not run yet). */
void ct_pipeline_get_position_behind(const ct_pipeline *p, int behind, ct_data_position *pos);
/* Drops what was prefetched and continues from pos (its seed replaces the
 * pipeline's), so that the next batch is the one an uninterrupted run would
 * have given after pos.  No batch may be out.  Errors: CT_ERR_INVALID
 * "data position cursor 70000 is past the 60000 records of an epoch". */
ct_status ct_pipeline_set_position(ct_pipeline *p, const ct_data_position *pos, ct_error *err);

/* Fills a CortadoDataPosition message (layer name copied with strdup into
 * msg->layer; free it with free()) from pos; msg must be initialised with
 * CAFFE__CORTADO_DATA_POSITION__INIT or be a previously filled one. */
void ct_data_position_to_proto(const ct_data_position *pos, const char *layer,
                               Caffe__CortadoDataPosition *msg);
/* Reads pos from a message; absent fields count as 0. */
void ct_data_position_from_proto(const Caffe__CortadoDataPosition *msg, ct_data_position *pos);

/* The per-record generator: seeded from (seed, epoch, index) by a fixed mix,
 * so anyone can reproduce a record's crop and mirror. */
void ct_pipeline_record_rng(uint64_t seed, uint64_t epoch, uint64_t index, ct_rng *rng);
/* The permutation of epoch e of count records (perm[j] is the record at
 * position j): the identity without shuffle.  perm has count entries. */
void ct_pipeline_permutation(uint64_t seed, uint64_t epoch, bool shuffle, size_t count,
                             uint32_t *perm);

#ifdef __cplusplus
}
#endif

#endif
