/* Trace clocks and events across processes (see trace_ranks.h). */
#include "parallel/trace_ranks.h"

#include <stdlib.h>
#include <string.h>

#include "core/trace.h"

/* Rounds of the clock exchange (odd: the median is one of them). */
#define ALIGN_ROUNDS 9

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

ct_status ct_trace_ranks_align(ct_comm *c, ct_error *err) {
  double diff[ALIGN_ROUNDS];
  for (int k = 0; k < ALIGN_ROUNDS; k++) {
    CT_TRY(ct_comm_barrier(c, err));
    const double t = ct_trace_clock_abs();
    double t0 = c->rank == 0 ? t : 0.0;
    CT_TRY(ct_comm_allreduce_host_f64(c, &t0, 1, err));
    diff[k] = t - t0; /* this clock minus rank 0's at (about) the same instant */
  }
  qsort(diff, ALIGN_ROUNDS, sizeof diff[0], cmp_double);
  double origin0 = c->rank == 0 ? ct_trace_origin_abs() : 0.0;
  CT_TRY(ct_comm_allreduce_host_f64(c, &origin0, 1, err));
  /* a time t since this origin is origin + t on this clock, origin + t -
   * offset on rank 0's, and that minus origin0 on rank 0's timeline */
  ct_trace_set_alignment(ct_trace_origin_abs() - diff[ALIGN_ROUNDS / 2] - origin0, c->size);
  return CT_OK;
}

/* Bytes a double carries exactly: 48-bit integers (below 2^53) survive any
 * sum with zeros. */
#define BYTES_PER_DOUBLE 6
/* Doubles per round of the gather (bounds its buffers: 24 MB). */
#define GATHER_CHUNK ((size_t)3 << 20)

ct_status ct_trace_ranks_gather(ct_comm *c, ct_error *err) {
  size_t len;
  char *text = ct_trace_take_json(&len);
  double *sizes = ct_xcalloc((size_t)c->size, sizeof *sizes);
  sizes[c->rank] = (double)len;
  ct_status st = ct_comm_allreduce_host_f64(c, sizes, (size_t)c->size, err);
  /* rank r's text goes out in sums of host doubles, 6 bytes each, zeros
   * from every other rank: any communicator has that (NCCL's included) */
  double *buf = ct_xcalloc(GATHER_CHUNK, sizeof *buf);
  for (int r = 1; st == CT_OK && r < c->size; r++) {
    const size_t n = (size_t)sizes[r];
    char *got = c->rank == 0 ? ct_xcalloc(n + 1, 1) : NULL;
    for (size_t off = 0; st == CT_OK && off < n; off += GATHER_CHUNK * BYTES_PER_DOUBLE) {
      const size_t bytes = n - off < GATHER_CHUNK * BYTES_PER_DOUBLE ? n - off : GATHER_CHUNK * BYTES_PER_DOUBLE;
      const size_t count = (bytes + BYTES_PER_DOUBLE - 1) / BYTES_PER_DOUBLE;
      memset(buf, 0, count * sizeof *buf);
      if (c->rank == r)
        for (size_t i = 0; i < bytes; i++)
          buf[i / BYTES_PER_DOUBLE] += (double)(unsigned char)text[off + i] *
                                       (double)(1ull << (8 * (i % BYTES_PER_DOUBLE)));
      st = ct_comm_allreduce_host_f64(c, buf, count, err);
      if (st == CT_OK && got)
        for (size_t i = 0; i < bytes; i++)
          got[off + i] = (char)(((unsigned long long)buf[i / BYTES_PER_DOUBLE] >> (8 * (i % BYTES_PER_DOUBLE))) & 0xff);
    }
    if (st == CT_OK && got && n) ct_trace_add_json(got, n);
    free(got);
  }
  free(buf);
  free(sizes);
  free(text);
  if (st == CT_OK && c->rank != 0) ct_trace_mark_sent();
  return st;
}
