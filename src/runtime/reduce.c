/* The data-parallel reduce step (see reduce.h).
 *
 * Buckets are fixed ranges of the flat gradient: [0, B), [B, 2B), ... with
 * B = bucket_bytes / 4 floats, except the last one, which is cut where
 * layers' gradients become final (pieces of at least 1 MiB) when B is large:
 * its gradients are the last of backward, and what is still to be reduced
 * when backward ends waits with every worker (AlexNet's five convolutions,
 * 7.6 MB, took 0.4 ms after backward in one piece).  The runtime launches a
 * bucket as soon as its last gradient is written, whatever parameters it
 * spans.  On a GPU a launch only enqueues the all-reduce on the
 * communication stream (reduce_gpu.cu); on the CPU it is the (blocking)
 * all-reduce itself, so CPU workers run the same bucket plan without the
 * overlap. */
#include "runtime/reduce.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"
#include "core/mem.h"
#include "runtime/reduce_gpu.h"
#include "runtime/runtime.h"

struct ct_reducer {
  ct_net *net;
  ct_comm *comm;
  bool gpu;
  size_t bucket_floats;
  int nbuckets;
  size_t *end;          /* (nbuckets) each bucket's end in the flat gradient */
  ct_reduce_gpu *g;
  bool log_timing;
  int timing_skip, timing_iters;
  long reductions;      /* finished so far */
  ct_reduce_bucket_time *times; /* (nbuckets) */
};

/* The last bucket's pieces end where a layer's gradients become final, at
 * least this many floats apart (1 MiB), when buckets hold 4 times that. */
#define TAIL_PIECE_FLOATS ((size_t)1 << 18)

/* Fills r->end and r->nbuckets (see the top of the file).  The net's ready
 * counts grow as backward goes from the last layer to the first. */
static void plan_buckets(ct_reducer *r, const ct_net *net) {
  const size_t n = net->flat_count, B = r->bucket_floats;
  const int fixed = (int)((n + B - 1) / B);
  r->end = ct_xcalloc((size_t)fixed + (size_t)net->nlayers + 1, sizeof(size_t));
  r->nbuckets = 0;
  for (int b = 0; b + 1 < fixed; b++) r->end[r->nbuckets++] = (size_t)(b + 1) * B;
  size_t last = r->nbuckets ? r->end[r->nbuckets - 1] : 0;
  const bool cut_tail = B >= 4 * TAIL_PIECE_FLOATS && net->layer_ready_count;
  for (int i = net->nlayers - 1; cut_tail && i >= 0; i--) {
    const size_t ready = net->layer_ready_count[i];
    if (ready < n && ready >= last + TAIL_PIECE_FLOATS) r->end[r->nbuckets++] = last = ready;
  }
  if (n > 0) r->end[r->nbuckets++] = n;
}

ct_status ct_reducer_create(ct_reducer **out, ct_net *net, const ct_iter_clock *clock,
                            ct_comm *comm, const ct_reduce_opts *opts, bool log_timing,
                            ct_error *err) {
  *out = NULL;
  ct_reducer *r = ct_xcalloc(1, sizeof *r);
  r->net = net;
  r->comm = comm;
  r->gpu = net->ctx->device != CT_DEVICE_CPU;
  size_t bytes = opts && opts->bucket_bytes ? opts->bucket_bytes : CT_REDUCE_DEFAULT_BUCKET_BYTES;
  r->bucket_floats = bytes / sizeof(float) / 64 * 64;
  if (r->bucket_floats == 0) r->bucket_floats = 64;
  plan_buckets(r, net);
  r->times = ct_xcalloc((size_t)r->nbuckets + 1, sizeof *r->times);
  r->log_timing = log_timing && opts && opts->timing_iters > 0;
  r->timing_iters = opts ? opts->timing_iters : 0;
  r->timing_skip = opts && opts->timing_skip > 0 ? opts->timing_skip : 5;
  if (r->gpu) {
    size_t most = 0;
    for (int b = 0; b < r->nbuckets; b++) {
      const size_t n = r->end[b] - (b ? r->end[b - 1] : 0);
      if (n > most) most = n;
    }
    ct_dtype type = CT_F32;
    if (opts && opts->dtype_given) type = opts->dtype;
    else
      for (int i = 0; i < net->nlayers && type == CT_F32; i++) type = net->layers[i]->dtype;
    if (type != CT_F32 && comm->rank == 0)
      LOG_INFO("Gradients are all-reduced in %s (--allreduce_dtype)", ct_dtype_name(type));
    ct_status st = ct_reduce_gpu_create(&r->g, clock, comm, r->nbuckets, r->log_timing, type, most,
                                        err);
    if (st != CT_OK) {
      ct_reducer_free(r);
      return st;
    }
  }
  *out = r;
  return CT_OK;
}

void ct_reducer_free(ct_reducer *r) {
  if (!r) return;
  ct_reduce_gpu_free(r->g);
  free(r->end);
  free(r->times);
  free(r);
}

int ct_reducer_buckets(const ct_reducer *r) { return r->nbuckets; }

size_t ct_reducer_bucket_end(const ct_reducer *r, int b) {
  CT_ASSERT(b >= 0 && b < r->nbuckets);
  return r->end[b];
}

int ct_reducer_world(const ct_reducer *r) { return r->comm->size; }

bool ct_reducer_cancelled(const ct_reducer *r) { return ct_comm_cancelled(r->comm) != 0; }

ct_status ct_reducer_broadcast_params(ct_reducer *r, int root, ct_error *err) {
  if (r->net->flat_count == 0) return CT_OK;
  if (r->gpu) return ct_reduce_gpu_broadcast(r->g, r->net->flat_data, r->net->flat_count, root, err);
  return ct_comm_broadcast(r->comm, r->net->flat_data, r->net->flat_count, root, NULL, err);
}

void ct_reducer_begin(ct_reducer *r) {
  if (r->gpu) ct_reduce_gpu_begin(r->g);
}

ct_status ct_reducer_launch(ct_reducer *r, int b, ct_error *err) {
  CT_ASSERT(b >= 0 && b < r->nbuckets);
  const size_t start = b ? r->end[b - 1] : 0;
  float *buf = r->net->flat_diff + start;
  if (r->gpu) return ct_reduce_gpu_launch(r->g, b, buf, r->end[b] - start, err);
  return ct_comm_allreduce(r->comm, buf, r->end[b] - start, CT_COMM_AVG, NULL, err);
}

ct_status ct_reducer_join(ct_reducer *r, ct_error *err) {
  return r->gpu ? ct_reduce_gpu_join(r->g, err) : CT_OK;
}

ct_status ct_reducer_capture_end(ct_reducer *r, ct_error *err) {
  return r->gpu ? ct_reduce_gpu_capture_end(r->g, err) : CT_OK;
}

static bool timing_now(const ct_reducer *r) {
  return r->log_timing && r->reductions >= r->timing_skip &&
         r->reductions < (long)r->timing_skip + r->timing_iters;
}

static void log_times(ct_reducer *r) {
  ct_reduce_iter_time it;
  if (!timing_now(r) || !ct_reduce_gpu_times(r->g, r->nbuckets, r->times, &it)) return;
  double last = r->nbuckets ? r->times[r->nbuckets - 1].done_ms : it.backward_ms;
  LOG_INFO("dp timing, reduction %ld: backward %.3f ms; all-reduce done at +%.3f ms (%.3f ms after "
           "backward)",
           r->reductions, it.backward_ms, last, last - it.backward_ms);
  if (it.before_ms >= 0)
    LOG_INFO("dp iteration %ld: %.3f ms from the previous iteration's end to backward (forward and "
             "the gap), %.3f ms backward, %.3f ms after it (last buckets, update)",
             r->reductions, it.before_ms, it.backward_ms, it.after_ms);
  for (int b = 0; b < r->nbuckets; b++) {
    size_t start = b ? r->end[b - 1] : 0;
    LOG_INFO("dp bucket %d/%d [%zu, %zu) %.2f MB: ready +%.3f ms, start +%.3f ms, done +%.3f ms", b,
             r->nbuckets, start, r->end[b], (double)(r->end[b] - start) * 4.0 / 1048576.0,
             r->times[b].ready_ms, r->times[b].start_ms, r->times[b].done_ms);
  }
}

ct_status ct_reducer_wait(ct_reducer *r, unsigned seq, ct_error *err) {
  if (r->gpu) {
    CT_TRY(ct_reduce_gpu_wait_iteration(r->g, seq, err));
    log_times(r);
  }
  r->reductions++;
  return CT_OK;
}

static int actions_of(double stop, double snapshot) {
  return (stop > 0 ? CT_RT_STOP : 0) | (snapshot > 0 ? CT_RT_SNAPSHOT : 0);
}

bool ct_reducer_carries_requests(const ct_reducer *r) { return r->gpu && r->nbuckets > 0; }

void ct_reducer_carry(ct_reducer *r, unsigned seq, int requests) {
  CT_ASSERT(ct_reducer_carries_requests(r));
  const float wish[CT_REDUCE_GPU_CTL] = {(requests & CT_RT_STOP) ? 1.0f : 0.0f,
                                         (requests & CT_RT_SNAPSHOT) ? 1.0f : 0.0f};
  ct_reduce_gpu_set_requests(r->g, seq, wish);
}

ct_status ct_reducer_agree(ct_reducer *r, unsigned seq, int requests, int *agreed, ct_error *err) {
  if (ct_reducer_carries_requests(r)) {
    float sum[CT_REDUCE_GPU_CTL];
    ct_reduce_gpu_agreed(r->g, seq, sum);
    *agreed = actions_of(sum[0], sum[1]);
    return CT_OK;
  }
  double req[2] = {(requests & CT_RT_STOP) ? 1.0 : 0.0, (requests & CT_RT_SNAPSHOT) ? 1.0 : 0.0};
  CT_TRY(ct_comm_allreduce_host_f64(r->comm, req, 2, err));
  *agreed = actions_of(req[0], req[1]);
  return CT_OK;
}

bool ct_reducer_may_launch_ahead(const ct_reducer *r) {
  /* timing_iters is the same on every worker (only rank 0 logs) */
  return r->timing_iters <= 0 || r->reductions > (long)r->timing_skip + r->timing_iters;
}

ct_status ct_reducer_average_host(ct_reducer *r, double *values, size_t count, ct_error *err) {
  CT_TRY(ct_comm_allreduce_host_f64(r->comm, values, count, err));
  for (size_t i = 0; i < count; i++) values[i] /= (double)r->comm->size;
  return CT_OK;
}

void ct_reducer_describe(const ct_reducer *r, char *buf, size_t size) {
  const double mb = (double)r->net->flat_count * 4.0 / 1048576.0;
  snprintf(buf, size, "%d bucket%s of up to %.1f MB over %zu parameters (%.2f MB), %s", r->nbuckets,
           r->nbuckets == 1 ? "" : "s", (double)r->bucket_floats * 4.0 / 1048576.0, r->net->flat_count,
           mb,
           r->gpu ? "launched during backward on a dedicated stream"
                  : "each averaged during backward as soon as it is final");
}
