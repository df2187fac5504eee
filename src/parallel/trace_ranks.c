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

ct_status ct_trace_ranks_gather(ct_comm *c, ct_error *err) {
  size_t len;
  char *text = ct_trace_take_json(&len);
  double *sizes = ct_xcalloc((size_t)c->size, sizeof *sizes);
  sizes[c->rank] = (double)len;
  ct_status st = ct_comm_allreduce_host_f64(c, sizes, (size_t)c->size, err);
  /* rank r's text goes out as the bytes of floats (a broadcast copies them
   * as they are) */
  for (int r = 1; st == CT_OK && r < c->size; r++) {
    const size_t n = (size_t)sizes[r], floats = (n + sizeof(float) - 1) / sizeof(float);
    if (floats == 0) continue;
    float *buf = ct_xcalloc(floats, sizeof(float));
    if (c->rank == r) memcpy(buf, text, n);
    st = ct_comm_broadcast(c, buf, floats, r, NULL, err);
    if (st == CT_OK && c->rank == 0) ct_trace_add_json((const char *)buf, n);
    free(buf);
  }
  free(sizes);
  free(text);
  if (st == CT_OK && c->rank != 0) ct_trace_mark_sent();
  return st;
}
