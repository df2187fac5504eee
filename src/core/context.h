/* The execution context of one worker: which device it computes on and the
 * handles that go with it (CUDA stream, cuBLAS, cuDNN, a shared workspace),
 * its random generator, and its place among data-parallel workers.
 * Every layer, net and solver of a worker uses that worker's context.
 *
 * Two services keep a GPU iteration free of host waits:
 *  - deferred checks: a kernel that finds bad input (a label out of range)
 *    writes its check id into one device word instead of making the host
 *    wait for a flag; the word is read once per iteration
 *    (ct_context_take_checks) and the failed check then builds the same
 *    message the synchronous check would have;
 *  - counter-based random draws: a layer that needs fresh random bits on
 *    every pass (Dropout) takes the seed ct_draw_seed(seed, n) for the n-th
 *    draw of the context, with n counted on the host (CPU) or in device
 *    memory by a tiny kernel (GPU), so that a replayed CUDA graph still draws
 *    fresh masks and both devices draw the same ones. */
#ifndef CT_CORE_CONTEXT_H
#define CT_CORE_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/rng.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builds the error of a deferred check that failed (user is the pointer
 * given at registration).  The message is prefixed by the registry. */
typedef ct_status (*ct_check_fn)(void *user, ct_error *err);

typedef struct ct_check_entry {
  unsigned id;     /* 0: a free slot */
  char *prefix;    /* owned, e.g. "layer 'loss' (SoftmaxWithLoss)" */
  ct_check_fn fn;
  void *user;
} ct_check_entry;

typedef struct ct_context {
  int device;            /* CT_DEVICE_CPU or a GPU ordinal */
  ct_rng rng;            /* random numbers for layers (fillers, ...) */
  uint64_t seed;         /* the seed rng started from; also the base of ct_draw_seed */
  uint64_t data_seed;    /* shuffling and record randomness of the data layers: the same on
                            every data-parallel worker, so their shards stay disjoint */
  /* GPU only (NULL on the CPU): */
  void *stream;          /* cudaStream_t for compute */
  void *copy_stream;     /* cudaStream_t for host-to-device copies overlapped with compute */
  void *cublas;          /* cublasHandle_t bound to stream */
  void *cublaslt;        /* cublasLtHandle_t (each call names its stream); NULL when cuBLASLt
                            would not start: its users keep cuBLAS */
  void *cudnn;           /* cudnnHandle_t bound to stream */
  void *workspace;       /* device scratch shared by the layers of one net */
  size_t workspace_bytes;
  void *blas_workspace;  /* device scratch owned by cuBLAS (set once: no allocation while the
                            runtime records) */
  unsigned *check_word;  /* (1) device: id of the first failed deferred check, 0 when none */
  unsigned *check_host;  /* (1) pinned host copy of check_word */
  uint64_t *draws_dev;   /* (1) device: counter-based draws made so far */
  void *grads;           /* the parameter-gradient stream's state (below), NULL when off */
  void *trace_gpu;       /* the runtime's device timeline while a trace records
                            (runtime/trace_gpu.h), else NULL */
  bool tf32;             /* TF32 tensor-core math for convolution and GEMM */
  /* The 16-bit type layers compute in where their type can (net_dtype.c),
   * CT_F32 for none; precision_given: the user chose it (--precision), so it
   * overrides the nets' default_forward_type. */
  ct_dtype precision;
  bool precision_given;
  bool capturing;        /* the runtime is recording the stream's work to replay it
                            (runtime/program.c): nothing may wait or allocate */
  bool deterministic;    /* only algorithms that give the same bits on every run (cuDNN's
                            deterministic convolutions); CORTADO_DETERMINISTIC=1 sets it */
  /* both devices */
  uint64_t draws;        /* CPU: counter-based draws made so far */
  ct_check_entry *checks; /* (ncheck_slots) registered deferred checks */
  int ncheck_slots;
  unsigned next_check_id;
  /* data parallelism: this worker's rank among `world` workers */
  int rank;
  int world;
} ct_context;

/* Sets up a context on device (CT_DEVICE_CPU or a GPU) with the given seed.
 * The calling thread (on the CPU: and OpenMP's team) computes with
 * subnormals flushed to zero from then on (core/cpu.h).  On a GPU: makes the device current, creates the compute and copy streams,
 * the cuBLAS and cuDNN handles, cuBLAS's fixed workspace and the device
 * words above.  Fails with CT_ERR_INVALID / CT_ERR_UNSUPPORTED /
 * CT_ERR_DEVICE naming the device. */
ct_status ct_context_init(ct_context *ctx, int device, uint64_t seed, ct_error *err);
void ct_context_free(ct_context *ctx);
/* A device workspace of at least bytes (grown, never shrunk; contents lost).
 * Growing waits for the stream and reallocates, so layers size it in setup
 * or reshape, never in forward or backward. */
void *ct_context_workspace(ct_context *ctx, size_t bytes);
/* Turns TF32 tensor-core math on or off for what is set up afterwards
 * (cuBLAS at once; layers read ctx->tf32 when they set up).  FP32 math is
 * for comparing against the CPU; a no-op on the CPU. */
void ct_context_set_tf32(ct_context *ctx, bool tf32);
/* The 16-bit type layers compute in where they can (CT_F32: none); given:
 * the user chose it, so it overrides the nets' default_forward_type.  Sets
 * it for nets built afterwards.  Errors (CT_ERR_UNSUPPORTED): bfloat16 on
 * a CPU without AVX512_BF16 or AMX (naming what is missing), float16 on the
 * CPU. */
ct_status ct_context_set_precision(ct_context *ctx, ct_dtype type, bool given, ct_error *err);
/* Deterministic algorithms only, for what is set up afterwards: two runs of
 * the same work give the same bits (as PyTorch's
 * torch.backends.cudnn.deterministic).  Convolutions may be slower.  The
 * default comes from CORTADO_DETERMINISTIC=1; a no-op on the CPU. */
void ct_context_set_deterministic(ct_context *ctx, bool deterministic);
/* Waits for the context's stream (no-op on the CPU). */
void ct_context_sync(ct_context *ctx);
/* Whether the context's stream has done its work, without waiting (true
 * on the CPU): a host that has other things to do while it waits polls it. */
bool ct_context_idle(ct_context *ctx);
/* True while the runtime records ctx's stream's work to replay it (never on
 * the CPU): code that must run on the host every time may not run then. */
bool ct_context_capturing(const ct_context *ctx);

/* ---------------------------------------------------------------- gradient stream
 * On a GPU, layers may compute their parameter gradients on a second stream
 * beside the chain of bottom gradients, which is the critical path of
 * backward: the weight gradient of a convolution depends on nothing the next
 * layer down needs.  The net decides which layers do (l->grad_side: their
 * parameters are not shared, so the stream's writes to them never meet
 * another layer's) and keeps what the stream reads alive long enough
 * (net_memory.c); CORTADO_GRAD_STREAM=0 turns the stream off.  On the CPU
 * and with the stream off these calls do nothing and ct_context_grad_begin
 * returns ctx itself. */

/* Makes the gradient stream wait for the work enqueued so far on ctx's
 * stream and returns a context to enqueue parameter-gradient work with: its
 * stream, cuBLAS and cuDNN handles and workspace are the gradient stream's
 * (valid until the next call; the rest is ctx's). */
ct_context *ct_context_grad_begin(ct_context *ctx);
/* Ends a layer's gradient work: ctx's stream waits for the gradient work of
 * the layer that ended before it (not this one's), so that one layer's
 * weight gradient runs beside the next layer's bottom gradient. */
void ct_context_grad_step(ct_context *ctx);
/* ctx's stream waits for all gradient work enqueued so far. */
void ct_context_grad_join(ct_context *ctx);
/* The most cuDNN workspace a layer may ask of the gradient stream: a weight
 * gradient whose algorithm wants more stays on the compute stream, in its
 * workspace, so that the stream adds at most this much (plus cuBLAS's 4 MiB)
 * to a net's memory. */
#define CT_GRAD_WORKSPACE_MAX_BYTES ((size_t)16 << 20)
/* The gradient stream's cuDNN workspace is at least bytes (grown in setup or
 * reshape only, like ct_context_workspace). */
void ct_context_grad_workspace(ct_context *ctx, size_t bytes);
/* The gradient stream (cudaStream_t) when work was enqueued on it since the
 * last join, else NULL: what a consumer of parameter gradients other than
 * ctx's stream (a data-parallel all-reduce) must also wait for. */
void *ct_context_grad_pending_stream(ct_context *ctx);

/* ---------------------------------------------------------------- checks */
/* Registers a deferred check; returns its id (>= 1), which GPU kernels write
 * into ctx->check_word.  prefix is copied.  Remove it before user dies. */
unsigned ct_context_add_check(ct_context *ctx, const char *prefix, ct_check_fn fn, void *user);
void ct_context_remove_check(ct_context *ctx, unsigned id);
/* True when at least one check is registered. */
bool ct_context_has_checks(const ct_context *ctx);
/* Reads and clears the check word (waits for the stream; CT_OK at once on
 * the CPU or with no checks registered).  When a check failed: its error,
 * "<prefix>: <message>". */
ct_status ct_context_take_checks(ct_context *ctx, ct_error *err);
/* The same for a word already read back by the caller (0: CT_OK); the caller
 * clears the device word (ct_context_clear_checks_async). */
ct_status ct_context_report_check(ct_context *ctx, unsigned word, ct_error *err);
/* Enqueues the clearing of the check word on the stream (GPU; no-op on the CPU). */
void ct_context_clear_checks_async(ct_context *ctx);

/* ---------------------------------------------------------------- draws */
#if defined(__CUDACC__)
#define CT_CTX_HOST_DEVICE __host__ __device__
#else
#define CT_CTX_HOST_DEVICE
#endif

/* The seed of draw number n (1, 2, ...) of a context seeded with seed: a
 * splitmix64 finaliser of both, the same on the host and on a GPU. */
static inline CT_CTX_HOST_DEVICE uint64_t ct_draw_seed(uint64_t seed, uint64_t n) {
  uint64_t z = seed ^ (n * 0xD1B54A32D192ED03ull);
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* CPU: takes the next draw (advances ctx->draws) and returns its seed. */
uint64_t ct_context_next_draw(ct_context *ctx);
/* GPU: enqueues a kernel that takes the next draw (advances *draws_dev) and
 * writes its seed to *seed_dev (device memory); capturable. */
void ct_context_next_draw_gpu(ct_context *ctx, uint64_t *seed_dev);
/* Draws made so far, and setting it (a resumed run continues the count);
 * on a GPU these read and write the device counter (and wait). */
uint64_t ct_context_draws(ct_context *ctx);
void ct_context_set_draws(ct_context *ctx, uint64_t n);

#ifdef __cplusplus
}
#endif

#endif
