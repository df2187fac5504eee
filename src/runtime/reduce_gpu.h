/* The CUDA side of the reduce step (reduce_gpu.cu; reduce_gpu_none.c in
 * CPU-only builds): a high-priority communication stream, the events that
 * order each bucket's all-reduce after the compute stream, and optional
 * timing events.  Internal: reduce.c drives it. */
#ifndef CT_RUNTIME_REDUCE_GPU_H
#define CT_RUNTIME_REDUCE_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "parallel/comm.h"
#include "runtime/slots.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_reduce_gpu ct_reduce_gpu;

/* When a bucket's gradient was final on the compute stream (ready), when its
 * all-reduce could start on the communication stream (start) and when it
 * finished (done), in ms after the backward pass began. */
typedef struct ct_reduce_bucket_time {
  double ready_ms, start_ms, done_ms;
} ct_reduce_bucket_time;

/* Makes the streams and events for nbuckets buckets on the clock's GPU;
 * comm must be a device communicator on the same GPU.  The gradient
 * travels in type: a 16-bit type is half the bytes of float32 (each bucket,
 * at most max_count values, is converted on the communication stream into
 * a staging buffer, all-reduced in that type and converted back).  With timing, every
 * iteration records timing events (as graph nodes when captured) and
 * ct_reduce_gpu_times reads the last waited one.  Errors: CT_ERR_DEVICE
 * naming the GPU; CT_ERR_UNSUPPORTED without CUDA. */
ct_status ct_reduce_gpu_create(ct_reduce_gpu **out, const ct_iter_clock *clock, ct_comm *comm,
                               int nbuckets, bool timing, ct_dtype type, size_t max_count,
                               ct_error *err);
void ct_reduce_gpu_free(ct_reduce_gpu *g);

/* Marks the start of the backward pass whose buckets follow (a timing
 * event; nothing without timing).  Capturable. */
void ct_reduce_gpu_begin(ct_reduce_gpu *g);
/* Enqueues bucket b: buf (count floats of the flat gradient) is averaged
 * over ranks on the communication stream once the compute stream (and the
 * gradient stream) have reached this point.  Only enqueues capturable
 * work, so that it may run while the compute stream is being captured into
 * a CUDA graph (the all-reduce becomes a node of the graph, ordered after
 * the layers before it).  Errors: the communicator's. */
ct_status ct_reduce_gpu_launch(ct_reduce_gpu *g, int b, float *buf, size_t count, ct_error *err);
/* The requests carried by the iteration's first bucket launch (a stop or
 * snapshot wish from rank 0's signals): before each bucket 0 all-reduce,
 * the communication stream copies CT_REDUCE_GPU_CTL floats from the
 * iteration's slot (slots.h) that the host wrote, sums them over the ranks
 * and copies the sum into another slot of the iteration, all as nodes of
 * the iteration's graph: no host round trip between the workers.
 * set_requests writes what iteration seq carries (before it is launched);
 * agreed reads the sum iteration seq carried (after
 * ct_reduce_gpu_wait_iteration(seq)). */
#define CT_REDUCE_GPU_CTL 2
void ct_reduce_gpu_set_requests(ct_reduce_gpu *g, unsigned seq, const float req[CT_REDUCE_GPU_CTL]);
void ct_reduce_gpu_agreed(const ct_reduce_gpu *g, unsigned seq, float sum[CT_REDUCE_GPU_CTL]);
/* Makes the compute stream's later work wait for every launched bucket
 * (capturable: the fork to the communication stream is joined).  Errors:
 * CT_ERR_DEVICE. */
ct_status ct_reduce_gpu_join(ct_reduce_gpu *g, ct_error *err);
/* At the end of a captured graph segment: joins the launches this capture
 * forked (a capture cannot end with unjoined work); the compute stream's
 * later work then waits for them.  A no-op when the segment launched
 * nothing.  Errors: CT_ERR_DEVICE. */
ct_status ct_reduce_gpu_capture_end(ct_reduce_gpu *g, ct_error *err);
/* Blocks (host) until iteration seq (the clock's numbering) is done, under
 * the communicator's watchdog: a dead peer or the cancel flag ends the wait
 * and aborts the communicator, which frees the GPU work stuck in it; the
 * iteration after it may be running.  With timing, its end is the
 * iteration end ct_reduce_gpu_times reports.  Errors: CT_ERR_COMM /
 * CT_ERR_INTERRUPTED / CT_ERR_DEVICE. */
ct_status ct_reduce_gpu_wait_iteration(ct_reduce_gpu *g, unsigned seq, ct_error *err);
/* Replaces buf (count floats on the GPU) by rank root's values, after the
 * compute stream's pending work and before its later work; blocks until
 * done.  Not capturable. */
ct_status ct_reduce_gpu_broadcast(ct_reduce_gpu *g, float *buf, size_t count, int root, ct_error *err);
/* One timed iteration on the compute stream, in ms: from the previous
 * waited iteration's end to this backward's start (its forward, and the
 * gap between the iterations: host work, waits for other ranks), the
 * backward pass, and from the backward's end to this iteration's end (the
 * wait for the last buckets, the update, the read back).  before_ms is -1
 * for the first timed iteration. */
typedef struct ct_reduce_iter_time {
  double before_ms, backward_ms, after_ms;
} ct_reduce_iter_time;

/* After a wait of a timed reducer: fills t[0..nbuckets) and *it for the
 * iteration just waited for.  False without timing or when an event never
 * ran. */
bool ct_reduce_gpu_times(ct_reduce_gpu *g, int nbuckets, ct_reduce_bucket_time *t,
                         ct_reduce_iter_time *it);

#ifdef __cplusplus
}
#endif

#endif
