/* The NCCL back end of ct_comm: device buffers, one rank per GPU, ranks
 * being threads of one process or processes on one or many machines.
 *
 * Communicators are non-blocking (ncclCommInitRankConfig with blocking = 0):
 * no NCCL call blocks the host, and every wait (initialisation, an enqueue
 * that reports ncclInProgress, ct_comm_wait) polls ncclCommGetAsyncError,
 * the completion of the work, the cancel flag and a deadline.  On an error
 * or at the deadline the communicator is aborted (ncclCommAbort, which also
 * frees the GPU work stuck in it) and the call returns CT_ERR_COMM naming
 * the rank, the GPU and the cause.
 *
 * NVLink SHARP (NVLS) stays off: NCCL_NVLS_ENABLE=0 is put in the
 * environment when it is not set, before NCCL first reads it. */
#ifndef CT_PARALLEL_COMM_NCCL_H
#define CT_PARALLEL_COMM_NCCL_H

#include "parallel/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NCCL's ncclUniqueId as plain bytes (NCCL_UNIQUE_ID_BYTES), so that callers
 * need not include nccl.h to pass it around (threads share it directly,
 * MPI ranks get it with ct_mpi_broadcast_bytes). */
#define CT_NCCL_ID_BYTES 128
typedef struct ct_nccl_id {
  unsigned char bytes[CT_NCCL_ID_BYTES];
} ct_nccl_id;

/* Makes a fresh unique id (on one rank; the others get a copy).  Errors:
 * CT_ERR_DEVICE with NCCL's message; CT_ERR_UNSUPPORTED without CUDA. */
ct_status ct_nccl_unique_id(ct_nccl_id *id, ct_error *err);

typedef struct ct_comm_nccl_opts {
  double timeout_s;  /* watchdog; <= 0: ct_comm_default_timeout() */
  const int *cancel; /* optional cancel flag (see comm.h) */
  int max_ctas;      /* at most this many thread blocks per NCCL kernel (ncclConfig_t's maxCTAs);
                        <= 0: NCCL's own choice */
} ct_comm_nccl_opts;

/* Joins the communicator `id` as `rank` of `size` on GPU `device` (made the
 * calling thread's current device).  All ranks must call it, concurrently
 * (threads) or at about the same time (processes).  The communicator owns a
 * non-blocking stream used when a collective is given a NULL stream.
 * opts may be NULL.  Errors: CT_ERR_COMM "NCCL init on rank 1 (GPU 1): ..."
 * for a failed or timed-out rendezvous; CT_ERR_INTERRUPTED when cancelled;
 * CT_ERR_DEVICE for CUDA failures; CT_ERR_UNSUPPORTED without CUDA. */
ct_status ct_comm_nccl_create(ct_comm **out, const ct_nccl_id *id, int rank, int size, int device,
                              const ct_comm_nccl_opts *opts, ct_error *err);

/* The communicator's own stream (a cudaStream_t). */
void *ct_comm_nccl_stream(const ct_comm *c);

/* NCCL's version as "2.28.3" (a static string), or "none". */
const char *ct_nccl_version(void);

#ifdef __cplusplus
}
#endif

#endif
