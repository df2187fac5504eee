/* The CUDA side of the reduce step (see reduce_gpu.h). */
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "gpu/gpu_context.h"
#include "math/typed.cuh"
#include "runtime/reduce_gpu.h"
#include "runtime/streams.h"
#include "runtime/trace_gpu.h"
extern "C" {
#include "core/log.h"
}

struct ct_reduce_gpu {
  ct_context *ctx;
  const ct_iter_clock *clock;
  ct_comm *comm;
  cudaStream_t comm_stream; /* high priority, non-blocking */
  cudaStream_t wait_stream; /* non-blocking: follows an iteration's end for the watchdog's wait */
  int nbuckets;
  cudaEvent_t *ready;       /* (nbuckets) compute-stream points the buckets wait for */
  cudaEvent_t *ready_grads; /* (nbuckets) the same on the context's gradient stream */
  cudaEvent_t sync;         /* compute -> communication ordering outside buckets */
  cudaEvent_t done;         /* communication -> compute ordering */
  bool timing;              /* timing events are recorded every iteration */
  bool forked;              /* the capture under way holds a launch not yet joined */
  cudaEvent_t t_begin, t_end;      /* backward start and end (compute stream) */
  cudaEvent_t *t_ready, *t_start, *t_done; /* (nbuckets) each */
  cudaEvent_t t_fin[2];     /* iteration ends (compute stream): end k in t_fin[k & 1] */
  int fins;                 /* ends recorded so far */
  void *ctl_send;           /* iteration slots of CT_REDUCE_GPU_CTL floats: the requests each carries */
  void *ctl_recv;           /* the same: their sums over ranks, written by the GPU */
  float *ctl_dev;           /* (CT_REDUCE_GPU_CTL) device */
  ct_dtype type;            /* the type the gradient travels in */
  void *stage;              /* 16-bit types: a bucket's values in that type (largest bucket) */
};

/* A failed CUDA call of the reducer on g's GPU returns CT_ERR_DEVICE (gpu/gpu.h). */
#define DP_CUDA_TRY(g, call) CT_CUDA_TRY((g)->ctx->device, "data-parallel reducer", call)

static cudaStream_t compute_stream(const ct_reduce_gpu *g) { return (cudaStream_t)g->ctx->stream; }

static ct_status create_events(ct_reduce_gpu *g, cudaEvent_t *ev, int n, unsigned flags, ct_error *err) {
  for (int i = 0; i < n; i++) DP_CUDA_TRY(g, cudaEventCreateWithFlags(&ev[i], flags));
  return CT_OK;
}

static ct_status setup(ct_reduce_gpu *g, ct_error *err) {
  DP_CUDA_TRY(g, cudaSetDevice(g->ctx->device));
  DP_CUDA_TRY(g, cudaStreamCreateWithPriority(&g->comm_stream, cudaStreamNonBlocking,
                                              ct_stream_priority(CT_STREAM_COMM)));
  DP_CUDA_TRY(g, cudaStreamCreateWithFlags(&g->wait_stream, cudaStreamNonBlocking));
  const int n = g->nbuckets;
  CT_TRY(create_events(g, g->ready, n, cudaEventDisableTiming, err));
  CT_TRY(create_events(g, g->ready_grads, n, cudaEventDisableTiming, err));
  CT_TRY(create_events(g, &g->sync, 1, cudaEventDisableTiming, err));
  CT_TRY(create_events(g, &g->done, 1, cudaEventDisableTiming, err));
  CT_TRY(create_events(g, &g->t_begin, 1, cudaEventDefault, err));
  CT_TRY(create_events(g, &g->t_end, 1, cudaEventDefault, err));
  CT_TRY(create_events(g, g->t_fin, 2, cudaEventDefault, err));
  CT_TRY(create_events(g, g->t_ready, n, cudaEventDefault, err));
  CT_TRY(create_events(g, g->t_start, n, cudaEventDefault, err));
  CT_TRY(create_events(g, g->t_done, n, cudaEventDefault, err));
  const size_t ctl = CT_REDUCE_GPU_CTL * sizeof(float);
  g->ctl_send = ct_slots_new(g->ctx, ctl);
  g->ctl_recv = ct_slots_new(g->ctx, ctl);
  DP_CUDA_TRY(g, cudaMalloc((void **)&g->ctl_dev, ctl));
  return CT_OK;
}

extern "C" ct_status ct_reduce_gpu_create(ct_reduce_gpu **out, const ct_iter_clock *clock,
                                          ct_comm *comm, int nbuckets, bool timing, ct_dtype type,
                                          size_t max_count, ct_error *err) {
  *out = NULL;
  ct_reduce_gpu *g = (ct_reduce_gpu *)ct_xcalloc(1, sizeof *g);
  g->ctx = clock->ctx;
  g->clock = clock;
  g->comm = comm;
  g->nbuckets = nbuckets;
  g->timing = timing;
  g->type = type;
  const size_t n = (size_t)nbuckets + 1;
  g->ready = (cudaEvent_t *)ct_xcalloc(n, sizeof(cudaEvent_t));
  g->ready_grads = (cudaEvent_t *)ct_xcalloc(n, sizeof(cudaEvent_t));
  g->t_ready = (cudaEvent_t *)ct_xcalloc(n, sizeof(cudaEvent_t));
  g->t_start = (cudaEvent_t *)ct_xcalloc(n, sizeof(cudaEvent_t));
  g->t_done = (cudaEvent_t *)ct_xcalloc(n, sizeof(cudaEvent_t));
  ct_status st = setup(g, err);
  if (st == CT_OK && type != CT_F32 && max_count) {
    const cudaError_t e = cudaMalloc(&g->stage, max_count * ct_dtype_size(type));
    if (e != cudaSuccess)
      st = ct_error_set(err, CT_ERR_DEVICE, "data-parallel reducer on GPU %d: %zu bytes for %s "
                        "buckets: %s",
                        g->ctx->device, max_count * ct_dtype_size(type), ct_dtype_name(type),
                        cudaGetErrorString(e));
  }
  if (st != CT_OK) {
    ct_reduce_gpu_free(g);
    return st;
  }
  *out = g;
  return CT_OK;
}

/* A bucket into the travel type and back (the average is NCCL's). */
template <typename T>
__global__ static void to_type_k(size_t n, const float *x, T *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = ct_st<T>(x[i]);
}
template <typename T>
__global__ static void from_type_k(size_t n, const T *x, float *y) {
  CT_CUDA_KERNEL_LOOP(i, n) y[i] = ct_ld(x[i]);
}

/* buf averaged over ranks in g->type on the communication stream. */
static ct_status allreduce_typed(ct_reduce_gpu *g, float *buf, size_t count, ct_error *err) {
  if (g->type == CT_F32) return ct_comm_allreduce(g->comm, buf, count, CT_COMM_AVG, g->comm_stream, err);
  const unsigned blocks = ct_cuda_blocks(count);
  if (g->type == CT_BF16)
    to_type_k<<<blocks, CT_CUDA_THREADS, 0, g->comm_stream>>>(count, buf, (__nv_bfloat16 *)g->stage);
  else
    to_type_k<<<blocks, CT_CUDA_THREADS, 0, g->comm_stream>>>(count, buf, (__half *)g->stage);
  DP_CUDA_TRY(g, cudaGetLastError());
  CT_TRY(ct_comm_allreduce_typed(g->comm, g->stage, count, g->type, CT_COMM_AVG, g->comm_stream, err));
  if (g->type == CT_BF16)
    from_type_k<<<blocks, CT_CUDA_THREADS, 0, g->comm_stream>>>(count, (const __nv_bfloat16 *)g->stage, buf);
  else
    from_type_k<<<blocks, CT_CUDA_THREADS, 0, g->comm_stream>>>(count, (const __half *)g->stage, buf);
  DP_CUDA_TRY(g, cudaGetLastError());
  return CT_OK;
}

static void destroy_events(cudaEvent_t *ev, int n) {
  for (int i = 0; ev && i < n; i++)
    if (ev[i]) cudaEventDestroy(ev[i]);
}

extern "C" void ct_reduce_gpu_free(ct_reduce_gpu *g) {
  if (!g) return;
  if (g->comm_stream) cudaStreamSynchronize(g->comm_stream);
  if (g->stage) cudaFree(g->stage);
  destroy_events(g->ready, g->nbuckets);
  destroy_events(g->ready_grads, g->nbuckets);
  destroy_events(g->t_ready, g->nbuckets);
  destroy_events(g->t_start, g->nbuckets);
  destroy_events(g->t_done, g->nbuckets);
  destroy_events(&g->sync, 1);
  destroy_events(&g->done, 1);
  destroy_events(&g->t_begin, 1);
  destroy_events(&g->t_end, 1);
  destroy_events(g->t_fin, 2);
  if (g->comm_stream) cudaStreamDestroy(g->comm_stream);
  if (g->wait_stream) cudaStreamDestroy(g->wait_stream);
  ct_slots_free(g->ctx, g->ctl_send);
  ct_slots_free(g->ctx, g->ctl_recv);
  if (g->ctl_dev) cudaFree(g->ctl_dev);
  free(g->ready);
  free(g->ready_grads);
  free(g->t_ready);
  free(g->t_start);
  free(g->t_done);
  free(g);
}

static bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(s, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusActive;
}

/* A timing event: recorded as a node of the graph being captured (an
 * external event record), or plainly outside captures. */
static cudaError_t mark(cudaEvent_t ev, cudaStream_t s) {
  if (capturing(s)) return cudaEventRecordWithFlags(ev, s, cudaEventRecordExternal);
  return cudaEventRecord(ev, s);
}

extern "C" void ct_reduce_gpu_begin(ct_reduce_gpu *g) {
  if (g->timing) CT_CUDA_CHECK(mark(g->t_begin, compute_stream(g)));
}

/* The requests' round (see reduce_gpu.h), enqueued on the communication stream:
 * in and out of the slots of the device's iteration. */
static ct_status launch_requests(ct_reduce_gpu *g, ct_error *err) {
  const size_t ctl = CT_REDUCE_GPU_CTL * sizeof(float);
  ct_slots_load_async(g->clock, g->comm_stream, g->ctl_dev, g->ctl_send, ctl);
  CT_TRY(ct_comm_allreduce(g->comm, g->ctl_dev, CT_REDUCE_GPU_CTL, CT_COMM_SUM, g->comm_stream, err));
  ct_slots_store_async(g->clock, g->comm_stream, g->ctl_recv, g->ctl_dev, ctl);
  return CT_OK;
}

extern "C" void ct_reduce_gpu_set_requests(ct_reduce_gpu *g, unsigned seq, const float req[CT_REDUCE_GPU_CTL]) {
  const size_t ctl = CT_REDUCE_GPU_CTL * sizeof(float);
  memcpy(ct_slot(g->ctl_send, ctl, seq), req, ctl);
}

extern "C" void ct_reduce_gpu_agreed(const ct_reduce_gpu *g, unsigned seq, float sum[CT_REDUCE_GPU_CTL]) {
  const size_t ctl = CT_REDUCE_GPU_CTL * sizeof(float);
  memcpy(sum, ct_slot(g->ctl_recv, ctl, seq), ctl);
}

extern "C" ct_status ct_reduce_gpu_launch(ct_reduce_gpu *g, int b, float *buf, size_t count, ct_error *err) {
  CT_ASSERT(b >= 0 && b < g->nbuckets);
  if (capturing(compute_stream(g))) g->forked = true;
  /* t_ready before ready[b], so that the start (after the wait for ready[b])
   * is never timed before it */
  if (g->timing) DP_CUDA_TRY(g, mark(g->t_ready[b], compute_stream(g)));
  DP_CUDA_TRY(g, ct_gpu_side_wait(g->ctx, g->comm_stream, g->ready[b], g->ready_grads[b]));
  if (b == 0) CT_TRY(launch_requests(g, err)); /* before the mark: bucket 0's time is its own */
  if (g->timing) DP_CUDA_TRY(g, mark(g->t_start[b], g->comm_stream));
  ct_trace_gpu_side(g->ctx, CT_TRACE_GPU_ON_COMM, false, g->comm_stream);
  CT_TRY(allreduce_typed(g, buf, count, err));
  ct_trace_gpu_side(g->ctx, CT_TRACE_GPU_ON_COMM, true, g->comm_stream);
  if (g->timing) DP_CUDA_TRY(g, mark(g->t_done[b], g->comm_stream));
  return CT_OK;
}

/* compute waits for everything enqueued on the communication stream.  In
 * a capture only when this capture forked to it: earlier segments joined
 * their own launches, and an event recorded outside the capture cannot be
 * waited on inside it. */
static ct_status join_comm(ct_reduce_gpu *g, ct_error *err) {
  if (capturing(compute_stream(g)) && !g->forked) return CT_OK;
  DP_CUDA_TRY(g, cudaEventRecord(g->done, g->comm_stream));
  DP_CUDA_TRY(g, cudaStreamWaitEvent(compute_stream(g), g->done, 0));
  g->forked = false;
  return CT_OK;
}

extern "C" ct_status ct_reduce_gpu_join(ct_reduce_gpu *g, ct_error *err) {
  if (g->timing) DP_CUDA_TRY(g, mark(g->t_end, compute_stream(g)));
  return join_comm(g, err);
}

extern "C" ct_status ct_reduce_gpu_capture_end(ct_reduce_gpu *g, ct_error *err) { return join_comm(g, err); }

/* Blocks until the compute stream's enqueued work is done, under the
 * communicator's watchdog. */
static ct_status wait_all(ct_reduce_gpu *g, ct_error *err) {
  if (g->timing) DP_CUDA_TRY(g, cudaEventRecord(g->t_fin[g->fins++ & 1], compute_stream(g)));
  return ct_comm_wait(g->comm, compute_stream(g), err);
}

extern "C" ct_status ct_reduce_gpu_wait_iteration(ct_reduce_gpu *g, unsigned seq, ct_error *err) {
  DP_CUDA_TRY(g, cudaStreamWaitEvent(g->wait_stream, (cudaEvent_t)ct_iter_clock_end_event(g->clock, seq), 0));
  if (g->timing) DP_CUDA_TRY(g, cudaEventRecord(g->t_fin[g->fins++ & 1], g->wait_stream));
  return ct_comm_wait(g->comm, g->wait_stream, err);
}

extern "C" ct_status ct_reduce_gpu_broadcast(ct_reduce_gpu *g, float *buf, size_t count, int root,
                                         ct_error *err) {
  DP_CUDA_TRY(g, cudaEventRecord(g->sync, compute_stream(g)));
  DP_CUDA_TRY(g, cudaStreamWaitEvent(g->comm_stream, g->sync, 0));
  CT_TRY(ct_comm_broadcast(g->comm, buf, count, root, g->comm_stream, err));
  CT_TRY(ct_reduce_gpu_join(g, err));
  return wait_all(g, err);
}

static double elapsed_ms(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0.0f;
  if (cudaEventElapsedTime(&ms, from, to) != cudaSuccess) {
    cudaGetLastError();
    return -1.0;
  }
  return (double)ms;
}

extern "C" bool ct_reduce_gpu_times(ct_reduce_gpu *g, int nbuckets, ct_reduce_bucket_time *t, ct_reduce_iter_time *it) {
  if (!g->timing || g->fins == 0) return false;
  const int last = (g->fins - 1) & 1; /* t_fin[last ^ 1]: the end before */
  it->backward_ms = elapsed_ms(g->t_begin, g->t_end);
  it->after_ms = elapsed_ms(g->t_end, g->t_fin[last]);
  it->before_ms = g->fins > 1 ? elapsed_ms(g->t_fin[last ^ 1], g->t_begin) : -1.0;
  if (it->backward_ms < 0 || it->after_ms < 0) return false;
  for (int b = 0; b < nbuckets && b < g->nbuckets; b++) {
    t[b].ready_ms = elapsed_ms(g->t_begin, g->t_ready[b]);
    t[b].start_ms = elapsed_ms(g->t_begin, g->t_start[b]);
    t[b].done_ms = elapsed_ms(g->t_begin, g->t_done[b]);
  }
  return true;
}
