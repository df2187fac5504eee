/* The structures behind cortado.h's handles, shared by the files of src/api.
 *
 * Errors: every public function that fails copies its ct_error into the
 * thread's last error (api_fail) and returns the status as a
 * cortado_status (the two enums have the same values).
 *
 * Host copies on a GPU (Caffe's SyncedMemory, per blob and per array):
 * cortado_blob_host_data hands out a host array brought up to date from
 * the device, and marks it newer than the device (the caller may write);
 * before a net computes, api_net_flush copies every such array back, and
 * after, api_net_touched marks every host copy stale.  On the CPU a blob's
 * storage is host memory and none of this happens. */
#ifndef CT_API_API_INTERNAL_H
#define CT_API_API_INTERNAL_H

#include "cortado.h"

#include "core/context.h"
#include "core/signals.h"
#include "core/status.h"
#include "core/tensor.h"
#include "net/net.h"
#include "solvers/solver.h"

/* Calls that compute run with SIGINT/SIGHUP/SIGTERM blocked in the
 * caller's thread and taken by the relay thread instead (core/signals.h):
 * the embedder's handlers (Python's) never run on a thread inside oneDNN's
 * kernels.  api_shield returns whether it blocked (api_unshield undoes). */
static inline bool api_shield(sigset_t *old) {
  if (!ct_signals_start_relay()) return false;
  ct_signals_block_async(old);
  return true;
}
static inline void api_unshield(bool shielded, const sigset_t *old) {
  if (shielded) ct_signals_restore(old);
}

/* Where a blob array's newest values are (GPU host copies). */
typedef enum api_sync {
  API_SYNC_DEVICE = 0, /* the device's (the host copy is stale or absent) */
  API_SYNC_BOTH,       /* both hold the same values */
  API_SYNC_HOST        /* the host copy's: copy it back before the device is used */
} api_sync;

typedef struct api_host_copy {
  float *host;     /* count floats of host memory, or NULL */
  size_t capacity; /* floats allocated */
  api_sync state;
} api_host_copy;

struct cortado_context {
  ct_context ctx;
  int refs; /* atomic */
};

struct cortado_blob {
  ct_tensor *t;             /* borrowed: the net's (or a layer call's) tensor */
  struct cortado_net *net;  /* the net whose shapes it changes, or NULL */
  api_host_copy copy[2];    /* [0] data, [1] diff: GPU tensors only */
};

struct cortado_net {
  ct_net *net;
  cortado_context *cctx;     /* referenced */
  bool owned;                /* freed by cortado_net_free (false: a solver's) */
  cortado_blob *blobs;       /* (net->nblobs) */
  cortado_blob **params;     /* (net->nlayers) arrays of layer->nparams handles */
  int *inputs;               /* blob indices: legacy inputs, then Input layers' tops */
  int ninputs;
  int *custom;               /* indices of layers of custom classes, ascending */
  int ncustom;
  bool shapes_dirty;         /* a blob was reshaped through the API */
};

typedef struct api_callbacks api_callbacks;

struct cortado_solver {
  ct_solver *s;
  cortado_context *cctx;     /* referenced, or NULL for a worker's (borrowed) */
  bool owned;                /* a data-parallel worker's solver is not */
  cortado_net *train;
  cortado_net **tests;       /* (s->ntest_nets) */
  char type[32];
  api_callbacks *callbacks;  /* the caller's (api_solver.c) */
  struct ct_comm *comm;      /* cortado_solver_join_nccl's communicator, or NULL */
};

/* Records err as this thread's last error; returns its status. */
cortado_status api_fail(const ct_error *err);
/* The status of st with err recorded when it is a failure. */
cortado_status api_result(ct_status st, const ct_error *err);
/* The thread's last error as a ct_error (for callbacks that failed through
 * the public API). */
void api_last_error(ct_status code, ct_error *err);

void api_context_retain(cortado_context *c);

/* Wraps a built net (taking it when owned). */
cortado_net *api_net_wrap(ct_net *net, cortado_context *cctx, bool owned);
void api_net_unwrap(cortado_net *n);
/* GPU host copies around a computation on the net (see above). */
void api_net_flush(cortado_net *n);
void api_net_touched(cortado_net *n);

void api_blob_init(cortado_blob *b, ct_tensor *t, cortado_net *net);
void api_blob_release(cortado_blob *b);
/* Copies a host copy that is newer back to the device. */
void api_blob_flush(cortado_blob *b);
/* Marks the host copies stale after the device was written. */
void api_blob_touched(cortado_blob *b);

/* --level and --stage into the train net's state (the train command's
 * flags of the same names). */
void api_apply_train_state(Caffe__SolverParameter *sp, int level, const char *const *stages, int nstages);

/* Wraps a solver (the train and test nets too); owned: freed with it. */
cortado_solver *api_solver_wrap(ct_solver *s, cortado_context *cctx, bool owned);
void api_solver_unwrap(cortado_solver *cs);

/* Custom layer classes (api_layer.c): the failure a custom layer of the
 * net recorded in a call that cannot return one (backward), taken (and
 * cleared); CT_OK when none. */
ct_status api_custom_take_failure(ct_net *net, ct_error *err);
/* True when layer i of net belongs to a custom class; *reshaped then
 * tells (and clears) whether its last forward changed its tops' shapes. */
bool api_custom_layer(ct_net *net, int i, bool *reshaped);
/* The state a custom class made for layer i, or NULL. */
void *api_custom_state(const ct_net *net, int i);

#endif
