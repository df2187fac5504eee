/* The execution context of one worker: which device it computes on and the
 * handles that go with it (CUDA stream, cuBLAS, cuDNN, a shared workspace),
 * its random generator, and its place among data-parallel workers.
 * Every layer, net and solver of a worker uses that worker's context. */
#ifndef CT_CORE_CONTEXT_H
#define CT_CORE_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/rng.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_context {
  int device;            /* CT_DEVICE_CPU or a GPU ordinal */
  ct_rng rng;            /* random numbers for layers (dropout masks, ...) */
  uint64_t seed;         /* the seed rng started from */
  /* GPU only (NULL on the CPU): */
  void *stream;          /* cudaStream_t for compute */
  void *cublas;          /* cublasHandle_t bound to stream */
  void *cudnn;           /* cudnnHandle_t bound to stream */
  void *workspace;       /* device scratch shared by the layers of one net */
  size_t workspace_bytes;
  bool tf32;             /* TF32 tensor-core math for convolution and GEMM */
  /* data parallelism: this worker's rank among `world` workers */
  int rank;
  int world;
} ct_context;

/* Sets up a context on device (CT_DEVICE_CPU or a GPU) with the given seed.
 * On a GPU: makes the device current, creates a non-blocking stream and the
 * cuBLAS and cuDNN handles.  Fails with CT_ERR_INVALID / CT_ERR_UNSUPPORTED /
 * CT_ERR_DEVICE naming the device. */
ct_status ct_context_init(ct_context *ctx, int device, uint64_t seed, ct_error *err);
void ct_context_free(ct_context *ctx);
/* TF32 tensor-core math for convolution and GEMM (the default on GPUs that
 * have it) or strict FP32 (`--math=fp32`). */
void ct_context_set_tf32(ct_context *ctx, bool tf32);
/* A device workspace of at least bytes (grown, never shrunk; contents lost). */
void *ct_context_workspace(ct_context *ctx, size_t bytes);
/* Waits for the context's stream (no-op on the CPU). */
void ct_context_sync(ct_context *ctx);

#ifdef __cplusplus
}
#endif

#endif
