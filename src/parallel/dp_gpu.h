/* The CUDA side of the data-parallel reducer (dp_gpu.cu; dp_gpu_none.c in
 * CPU-only builds): a high-priority communication stream, the events that
 * order each bucket's all-reduce after the compute stream, and optional
 * timing events.  Not a public API: dp_reduce.c drives it. */
#ifndef CT_PARALLEL_DP_GPU_H
#define CT_PARALLEL_DP_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "core/context.h"
#include "parallel/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_dp_gpu ct_dp_gpu;

/* When a bucket's gradient was final on the compute stream (ready), when its
 * all-reduce could start on the communication stream (start) and when it
 * finished (done), in ms after the backward pass began. */
typedef struct ct_dp_bucket_time {
  double ready_ms, start_ms, done_ms;
} ct_dp_bucket_time;

/* Makes the streams and events for nbuckets buckets on ctx's GPU; comm must
 * be a device communicator on the same GPU.  With timing, every iteration
 * records timing events (as graph nodes when captured) and ct_dp_gpu_times
 * reads the last waited one.  Errors: CT_ERR_DEVICE naming the GPU;
 * CT_ERR_UNSUPPORTED without CUDA. */
ct_status ct_dp_gpu_create(ct_dp_gpu **out, ct_context *ctx, ct_comm *comm, int nbuckets, bool timing,
                           ct_error *err);
void ct_dp_gpu_free(ct_dp_gpu *g);

/* Marks the start of the backward pass whose buckets follow (a plain
 * launch: it runs between CUDA graph replays). */
void ct_dp_gpu_begin(ct_dp_gpu *g);
/* Enqueues bucket b: buf (count floats of the flat gradient) is averaged
 * over ranks on the communication stream once the compute stream has
 * reached this point.  Only enqueues capturable work, so that it may run
 * while the compute stream is being captured into a CUDA graph (the
 * all-reduce becomes a node of the graph, ordered after the layers before
 * it).  Errors: the communicator's. */
ct_status ct_dp_gpu_launch(ct_dp_gpu *g, int b, float *buf, size_t count, ct_error *err);
/* The requests carried by the iteration's first bucket launch (a stop or
 * snapshot wish from rank 0's signals): before each bucket 0 all-reduce,
 * the communication stream copies CT_DP_GPU_CTL floats from the
 * iteration's slot (gpu/iter_slots.h) that the host wrote, sums them over
 * the ranks and copies the sum into another slot of the iteration, all as
 * nodes of the iteration's graph: no host round trip between the workers.
 * set_requests writes what iteration seq carries (before it is launched);
 * agreed reads the sum iteration seq carried (after
 * ct_dp_gpu_wait_iteration(seq)). */
#define CT_DP_GPU_CTL 2
void ct_dp_gpu_set_requests(ct_dp_gpu *g, unsigned seq, const float req[CT_DP_GPU_CTL]);
void ct_dp_gpu_agreed(const ct_dp_gpu *g, unsigned seq, float sum[CT_DP_GPU_CTL]);
/* Makes the compute stream's later work wait for every launched bucket
 * (capturable: the fork to the communication stream is joined).  Errors:
 * CT_ERR_DEVICE. */
ct_status ct_dp_gpu_join(ct_dp_gpu *g, ct_error *err);
/* At the end of a captured graph segment: joins the launches this capture
 * forked (a capture cannot end with unjoined work); the compute stream's
 * later work then waits for them.  A no-op when the segment launched
 * nothing.  Errors: CT_ERR_DEVICE. */
ct_status ct_dp_gpu_capture_end(ct_dp_gpu *g, ct_error *err);
/* Blocks (host) until the compute stream's enqueued work is done, under the
 * communicator's watchdog: a dead peer or the cancel flag ends the wait and
 * aborts the communicator, which frees the GPU work stuck in it.  Errors:
 * CT_ERR_COMM / CT_ERR_INTERRUPTED / CT_ERR_DEVICE. */
ct_status ct_dp_gpu_wait(ct_dp_gpu *g, ct_error *err);
/* The same for the end of solver iteration seq (ct_gpu_seq_end_event); the
 * iteration after it may be running.  With timing, its end is the
 * iteration end ct_dp_gpu_times reports. */
ct_status ct_dp_gpu_wait_iteration(ct_dp_gpu *g, unsigned seq, ct_error *err);
/* Replaces buf (count floats on the GPU) by rank root's values, after the
 * compute stream's pending work and before its later work; blocks until
 * done.  Not capturable. */
ct_status ct_dp_gpu_broadcast(ct_dp_gpu *g, float *buf, size_t count, int root, ct_error *err);
/* Every rank runs the cuDNN convolution algorithms that rank root's process
 * chose.  Root calls this with send=true after building its nets; every
 * other rank with send=false before building its own: it blocks until root's
 * table arrives and adds it to this process's table, so its nets find their
 * shapes there instead of benchmarking.  Replicas then run the same kernels
 * at the same pace (an iteration goes at the slowest one's), and a run's
 * choices no longer differ by rank.  Host all-reduces over comm, under its
 * watchdog.  Shapes root never benchmarked, or GPUs of another kind, are
 * still benchmarked locally. */
ct_status ct_dp_gpu_share_conv_algos(ct_comm *comm, bool send, ct_error *err);
/* One timed iteration on the compute stream, in ms: from the previous
 * waited iteration's end to this backward's start (its forward, and the
 * gap between the iterations: host work, waits for other ranks), the
 * backward pass, and from the backward's end to this iteration's end (the
 * wait for the last buckets, the update, the read back).  before_ms is -1
 * for the first timed iteration. */
typedef struct ct_dp_iter_time {
  double before_ms, backward_ms, after_ms;
} ct_dp_iter_time;

/* After ct_dp_gpu_wait of a timed reducer: fills t[0..nbuckets) and *it
 * for the iteration just waited for.  False without timing or when an
 * event never ran. */
bool ct_dp_gpu_times(ct_dp_gpu *g, int nbuckets, ct_dp_bucket_time *t, ct_dp_iter_time *it);

#ifdef __cplusplus
}
#endif

#endif
