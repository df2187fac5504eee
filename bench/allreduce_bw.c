/* Bus bandwidth of Cortado's NCCL all-reduce (the communicator the
 * data-parallel driver uses), one thread per GPU as in `cortado train
 * --gpu=0,1`.
 *
 *   allreduce_bw [--gpus N] [--mb 256[,25,...]] [--iters 20] [--warmup 5] [--op avg|sum]
 *                [--max_ctas N]   (NCCL's thread blocks per kernel, as `cortado train
 *                                  --nccl_max_ctas`; 0, the default: NCCL's choice)
 *
 * For each size: `warmup` untimed all-reduces, then `iters` back to back on
 * the communicator's stream, timed on the host from the first enqueue to the
 * end of ct_comm_wait.  Prints, as nccl-tests does,
 *   algbw = bytes / time,   busbw = algbw * 2 (n - 1) / n
 * and checks the result (every rank starts with rank + 1 in every element). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/mem.h"
#include "gpu/gpu.h"
#include "parallel/comm.h"
#include "parallel/comm_nccl.h"

#define MAX_GPUS 16
#define MAX_SIZES 16

typedef struct bench_cfg {
  int ngpus, iters, warmup, nsizes;
  int max_ctas; /* NCCL thread blocks per kernel; 0: NCCL's choice */
  double mb[MAX_SIZES];
  ct_comm_op op;
  ct_nccl_id id;
} bench_cfg;

typedef struct rank_state {
  const bench_cfg *cfg;
  int rank;
  double seconds[MAX_SIZES]; /* per all-reduce */
  int ok;
  char msg[CT_ERROR_MSG_MAX];
} rank_state;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Every element of a rank's buffer after the all-reduce: the sum or mean
 * over ranks of (rank + 1). */
static float expected(const bench_cfg *cfg) {
  float sum = 0;
  for (int r = 0; r < cfg->ngpus; r++) sum += (float)(r + 1);
  return cfg->op == CT_COMM_AVG ? sum / (float)cfg->ngpus : sum;
}

static int run_size(rank_state *st, ct_comm *comm, int k, ct_error *err) {
  const bench_cfg *cfg = st->cfg;
  size_t count = (size_t)(cfg->mb[k] * 1048576.0 / sizeof(float));
  float *host = ct_xcalloc(count + 1, sizeof(float));
  for (size_t i = 0; i < count; i++) host[i] = (float)(st->rank + 1);
  float *dev = ct_gpu_malloc(st->rank, count * sizeof(float));
  ct_gpu_memcpy(st->rank, dev, CT_DEVICE_CPU, host, count * sizeof(float));
  int rc = 1;
  /* correctness first, on fresh values */
  if (ct_comm_allreduce(comm, dev, count, cfg->op, NULL, err) != CT_OK || ct_comm_wait(comm, NULL, err) != CT_OK)
    goto done;
  ct_gpu_memcpy(CT_DEVICE_CPU, host, st->rank, dev, count * sizeof(float));
  const float want = expected(cfg);
  for (size_t i = 0; i < count; i += count / 1024 + 1)
    if (host[i] != want) {
      ct_error_set(err, CT_ERR_COMM, "rank %d: element %zu is %g, expected %g", st->rank, i, (double)host[i],
                   (double)want);
      goto done;
    }
  for (int i = 0; i < cfg->warmup; i++)
    if (ct_comm_allreduce(comm, dev, count, cfg->op, NULL, err) != CT_OK) goto done;
  if (ct_comm_wait(comm, NULL, err) != CT_OK || ct_comm_barrier(comm, err) != CT_OK) goto done;
  double t0 = now_seconds();
  for (int i = 0; i < cfg->iters; i++)
    if (ct_comm_allreduce(comm, dev, count, cfg->op, NULL, err) != CT_OK) goto done;
  if (ct_comm_wait(comm, NULL, err) != CT_OK) goto done;
  st->seconds[k] = (now_seconds() - t0) / cfg->iters;
  rc = 0;
done:
  ct_gpu_free(st->rank, dev);
  free(host);
  return rc;
}

static void *rank_main(void *arg) {
  rank_state *st = arg;
  ct_error err;
  ct_comm *comm = NULL;
  ct_comm_nccl_opts o = {.max_ctas = st->cfg->max_ctas};
  if (ct_comm_nccl_create(&comm, &st->cfg->id, st->rank, st->cfg->ngpus, st->rank, &o, &err) != CT_OK) {
    snprintf(st->msg, sizeof st->msg, "%s", err.msg);
    return NULL;
  }
  st->ok = 1;
  for (int k = 0; k < st->cfg->nsizes && st->ok; k++)
    if (run_size(st, comm, k, &err) != 0) {
      st->ok = 0;
      snprintf(st->msg, sizeof st->msg, "%s", err.msg);
      ct_comm_abort(comm);
    }
  ct_comm_free(comm);
  return NULL;
}

static int usage(void) {
  fprintf(stderr, "usage: allreduce_bw [--gpus N] [--mb 256[,25,...]] [--iters 20] [--warmup 5] [--op avg|sum] [--max_ctas N]\n");
  return 2;
}

int main(int argc, char **argv) {
  bench_cfg cfg = {.ngpus = 2, .iters = 20, .warmup = 5, .nsizes = 1, .mb = {256}, .op = CT_COMM_AVG};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) return usage();
    if (strcmp(a, "--gpus") == 0) cfg.ngpus = atoi(v);
    else if (strcmp(a, "--iters") == 0) cfg.iters = atoi(v);
    else if (strcmp(a, "--warmup") == 0) cfg.warmup = atoi(v);
    else if (strcmp(a, "--max_ctas") == 0) cfg.max_ctas = atoi(v);
    else if (strcmp(a, "--op") == 0 && (strcmp(v, "avg") == 0 || strcmp(v, "sum") == 0))
      cfg.op = strcmp(v, "avg") == 0 ? CT_COMM_AVG : CT_COMM_SUM;
    else if (strcmp(a, "--mb") == 0) {
      cfg.nsizes = 0;
      char *copy = strdup(v), *save = NULL;
      for (char *t = strtok_r(copy, ",", &save); t && cfg.nsizes < MAX_SIZES; t = strtok_r(NULL, ",", &save))
        cfg.mb[cfg.nsizes++] = atof(t);
      free(copy);
    } else {
      return usage();
    }
    i++;
  }
  if (cfg.ngpus < 2 || cfg.ngpus > MAX_GPUS || cfg.iters < 1 || cfg.warmup < 0 || cfg.nsizes < 1) return usage();
  int have = ct_gpu_device_count();
  if (have < cfg.ngpus) {
    fprintf(stderr, "allreduce_bw: %d GPUs asked for, %d visible: skipped\n", cfg.ngpus, have);
    return 77;
  }
  ct_error err;
  if (ct_nccl_unique_id(&cfg.id, &err) != CT_OK) {
    fprintf(stderr, "allreduce_bw: %s\n", err.msg);
    return 1;
  }
  rank_state st[MAX_GPUS];
  pthread_t th[MAX_GPUS];
  memset(st, 0, sizeof st);
  for (int r = 0; r < cfg.ngpus; r++) {
    st[r].cfg = &cfg;
    st[r].rank = r;
    pthread_create(&th[r], NULL, rank_main, &st[r]);
  }
  for (int r = 0; r < cfg.ngpus; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < cfg.ngpus; r++)
    if (!st[r].ok) {
      fprintf(stderr, "allreduce_bw: rank %d: %s\n", r, st[r].msg);
      return 1;
    }
  const char *nvls = getenv("NCCL_NVLS_ENABLE");
  printf("NCCL %s, %d GPUs, one thread per GPU, op %s, NCCL_NVLS_ENABLE=%s, %d iterations after %d warm-up\n",
         ct_nccl_version(), cfg.ngpus, cfg.op == CT_COMM_AVG ? "avg" : "sum", nvls ? nvls : "(unset)", cfg.iters,
         cfg.warmup);
  printf("%12s %12s %14s %14s\n", "size (MB)", "time (us)", "algbw (GB/s)", "busbw (GB/s)");
  for (int k = 0; k < cfg.nsizes; k++) {
    double t = 0; /* the slowest rank's time */
    for (int r = 0; r < cfg.ngpus; r++)
      if (st[r].seconds[k] > t) t = st[r].seconds[k];
    double bytes = (double)(size_t)(cfg.mb[k] * 1048576.0 / sizeof(float)) * sizeof(float);
    double algbw = bytes / t / 1e9;
    double busbw = algbw * 2.0 * (cfg.ngpus - 1) / cfg.ngpus;
    printf("%12.1f %12.1f %14.2f %14.2f\n", cfg.mb[k], t * 1e6, algbw, busbw);
  }
  return 0;
}
