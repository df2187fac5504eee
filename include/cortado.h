/* cortado.h: the public C API of Cortado, a Caffe-family trainer.
 *
 * One header, opaque handles, status codes; everything else of libcortado
 * is internal.  The Python package (`import cortado as caffe`) is built on
 * this header alone, and so can any C or C++ program:
 *
 *   #include <cortado.h>
 *
 *   cortado_context *ctx;
 *   cortado_net *net;
 *   cortado_net_options o = CORTADO_NET_OPTIONS_INIT;
 *   o.phase = CORTADO_TEST;
 *   o.weights = "lenet.caffemodel";
 *   if (cortado_context_create(CORTADO_CPU, 1, &ctx) != CORTADO_OK ||
 *       cortado_net_create(ctx, "lenet.prototxt", &o, &net) != CORTADO_OK) {
 *     fprintf(stderr, "%s\n", cortado_last_error());
 *     return 1;
 *   }
 *   float *in = cortado_blob_host_data(cortado_net_blob_by_name(net, "data"));
 *   ... fill in ...
 *   cortado_net_forward(net, NULL);
 *   const float *prob = cortado_blob_host_data(cortado_net_blob_by_name(net, "prob"));
 *   cortado_net_free(net);
 *   cortado_context_free(ctx);
 *
 * Build with pkg-config:  cc app.c $(pkg-config --cflags --libs cortado)
 *
 * Conventions
 *  - A function that can fail returns a cortado_status; on failure
 *    cortado_last_error() gives a one-line message (per thread) naming the
 *    file, layer or field at fault.  Misuse (a NULL handle, an index out of
 *    range) is a bug in the caller and aborts with a message.
 *  - Handles: what a *_create function makes, its *_free releases.  Blobs
 *    and layers belong to their net, nets of a solver to their solver; those
 *    handles stay valid while the owner lives.  A context is reference
 *    counted: nets and solvers keep the context they were made on, so it may
 *    be released before them.
 *  - Threads: one handle is used by one thread at a time.  Different nets
 *    and solvers may run on different threads at once.
 *  - Values are float32.  Shapes are int arrays of up to CORTADO_MAX_AXES
 *    axes, row-major (Caffe's N x C x H x W for images).
 *  - Memory of a blob on the CPU is plain host memory that the caller may
 *    read and write in place between calls (zero-copy).  On a GPU a blob has
 *    a host copy kept in step as Caffe's SyncedMemory does: see
 *    cortado_blob_host_data.
 *
 * Versions: CORTADO_VERSION is the library's; CORTADO_API_VERSION changes
 * whenever this header changes incompatibly.  cortado_version() and
 * cortado_api_version() tell what the library linked at run time is. */
#ifndef CORTADO_H
#define CORTADO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CORTADO_VERSION_MAJOR 0
#define CORTADO_VERSION_MINOR 1
#define CORTADO_VERSION_PATCH 0
#define CORTADO_VERSION "0.1.0"
#define CORTADO_API_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ basics */

typedef enum cortado_status {
  CORTADO_OK = 0,
  CORTADO_ERR_INVALID = 1,     /* malformed input: a bad field, shape or value */
  CORTADO_ERR_PARSE = 2,       /* a file that does not parse */
  CORTADO_ERR_IO = 3,          /* a file that cannot be read or written */
  CORTADO_ERR_NOMEM = 4,       /* out of memory */
  CORTADO_ERR_UNSUPPORTED = 5, /* valid input this build cannot run (no GPU, no MPI, ...) */
  CORTADO_ERR_DEVICE = 6,      /* CUDA, cuBLAS, cuDNN or NCCL failed */
  CORTADO_ERR_COMM = 7,        /* a collective or rendezvous failed or timed out */
  CORTADO_ERR_NOTFOUND = 8,    /* a named thing (file, layer, blob, type) does not exist */
  CORTADO_ERR_NUMERIC = 9,     /* a NaN or infinite loss */
  CORTADO_ERR_INTERRUPTED = 10 /* stopped by a request, a signal or another worker */
} cortado_status;

/* "0.1.0" and CORTADO_API_VERSION of the library linked. */
const char *cortado_version(void);
int cortado_api_version(void);
/* A short name of a status ("invalid input", "I/O error", ...). */
const char *cortado_status_name(cortado_status status);
/* The message of the last failure of a call on this thread ("" when none). */
const char *cortado_last_error(void);
/* Sets this thread's last error (for custom layer classes and callbacks
 * that fail: the caller passes the message on); returns status. */
cortado_status cortado_set_error(cortado_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Log lines (glog's format, on stderr) at or above this level: 0 INFO,
 * 1 WARNING, 2 ERROR, 3 FATAL.  The default comes from GLOG_minloglevel. */
void cortado_set_log_level(int level);
int cortado_log_level(void);
/* Writes one line at the level (what pycaffe's caffe.log does). */
void cortado_log(int level, const char *message);

/* What this build and machine have. */
bool cortado_has_cuda(void);   /* built with the CUDA backend */
bool cortado_has_nccl(void);   /* built with NCCL (multi-GPU) */
bool cortado_has_mpi(void);    /* built with MPI */
bool cortado_has_gloo(void);   /* built with Gloo (CPU shards without MPI) */
int cortado_gpu_count(void);   /* visible GPUs (0 without CUDA or without a GPU) */
/* Whether this process was started by mpirun (Open MPI, MPICH, Slurm's PMI). */
bool cortado_mpi_launched(void);

/* The registered layer types (built in and custom), in registration order;
 * *count receives how many.  The array lives until the next registration. */
const char *const *cortado_layer_types(int *count);

/* ------------------------------------------------------------------ contexts */

#define CORTADO_CPU (-1)
#define CORTADO_MAX_AXES 32

/* Where nets compute: the CPU or one GPU, with its own streams, library
 * handles and random generator. */
typedef struct cortado_context cortado_context;

/* A context on device (CORTADO_CPU or a GPU ordinal) whose random generator
 * (fillers, dropout, data shuffling) starts from seed.  Errors:
 * CORTADO_ERR_UNSUPPORTED (no CUDA in this build), CORTADO_ERR_INVALID (no
 * such GPU), CORTADO_ERR_DEVICE. */
cortado_status cortado_context_create(int device, uint64_t seed, cortado_context **out);
/* Releases the caller's reference; the context lives on while nets or
 * solvers made on it do. */
void cortado_context_free(cortado_context *ctx);
int cortado_context_device(const cortado_context *ctx);
/* TF32 tensor-core math for convolutions and GEMMs set up afterwards (GPU;
 * on by default, as `cortado train --math=tf32`). */
void cortado_context_set_tf32(cortado_context *ctx, bool tf32);
/* Makes the context data-parallel worker `rank` of `world` (before nets are
 * built on it): data layers then read only their shard of the records, as
 * each of Caffe's solvers does under set_solver_rank / set_solver_count. */
void cortado_context_set_worker(cortado_context *ctx, int rank, int world);
/* The CUDA stream (cudaStream_t) the context computes on; NULL on the CPU.
 * Every call of this API that computes waits for it before returning. */
void *cortado_context_stream(const cortado_context *ctx);

/* ------------------------------------------------------------------ blobs */

/* An N-d array of float32 values (Caffe's Blob): `data` and its gradient
 * `diff`.  Owned by a net (or handed to a custom layer for one call). */
typedef struct cortado_blob cortado_blob;

const char *cortado_blob_name(const cortado_blob *b);   /* "" when unnamed */
int cortado_blob_num_axes(const cortado_blob *b);
/* The shape: cortado_blob_num_axes(b) values, valid until the next reshape. */
const int *cortado_blob_shape(const cortado_blob *b);
size_t cortado_blob_count(const cortado_blob *b);
/* CORTADO_CPU or the GPU ordinal of the blob's memory. */
int cortado_blob_device(const cortado_blob *b);
/* Sets the shape (Caffe's Reshape); the values are undefined afterwards
 * when the count grows.  The next forward of the blob's net reshapes the
 * layers above it.  Errors: CORTADO_ERR_INVALID for a negative dimension or
 * too many axes. */
cortado_status cortado_blob_reshape(cortado_blob *b, int num_axes, const int *shape);

/* Host memory of the values (count floats), to read and write in place.
 * On the CPU this is the blob's own storage.  On a GPU it is a host copy,
 * brought up to date from the device when the device was written since
 * (Caffe's mutable_cpu_data): the next computing call of the net copies it
 * back to the device first.  The pointer stays the same until a reshape
 * grows the blob.  The diff is made (zeros) on first use; NULL when the
 * blob shares another's memory that has no gradient (a view).  A blob of a
 * 16-bit layer, or one a GPU layer keeps channels-last (--precision=bf16,
 * fp16), has a host copy on the CPU too: float32 values in the logical
 * order, converted from and back to the blob's own. */
float *cortado_blob_host_data(cortado_blob *b);
float *cortado_blob_host_diff(cortado_blob *b);
/* Device memory of the values (a GPU pointer, or the host storage on the
 * CPU), brought up to date from the host copy when that was handed out
 * since (Caffe's mutable_gpu_data): later host reads copy it again.  For a
 * blob that is not float32 in the logical order (see above) the memory
 * holds the blob's own type and order, not float32. */
float *cortado_blob_device_data(cortado_blob *b);
float *cortado_blob_device_diff(cortado_blob *b);

/* ------------------------------------------------------------------ nets */

typedef enum cortado_phase { CORTADO_TRAIN = 0, CORTADO_TEST = 1 } cortado_phase;

typedef struct cortado_net cortado_net;

typedef struct cortado_net_options {
  cortado_phase phase;       /* which layers are in the net (include/exclude rules) */
  int level;                 /* NetState level */
  const char *const *stages; /* NetState stages (nstages of them) */
  int nstages;
  const char *weights;       /* .caffemodel files to copy in, ','-separated, or NULL */
  bool no_fusion;            /* compute BatchNorm + Scale (and on a GPU Convolution +
                                ReLU) as separate layers */
} cortado_net_options;
#define CORTADO_NET_OPTIONS_INIT {CORTADO_TEST, 0, NULL, 0, NULL, false}

/* Builds a net from a prototxt file (NetParameter text, old formats
 * upgraded) on ctx, as Caffe's Net(file, phase, level, stages) does, then
 * copies opts->weights in.  opts may be NULL (TEST, no weights).  Every blob
 * keeps its own diff (as in Caffe).  Errors name the file and layer. */
cortado_status cortado_net_create(cortado_context *ctx, const char *prototxt_path,
                                  const cortado_net_options *opts, cortado_net **out);
/* The same from NetParameter text in memory (len bytes; source names it in
 * messages, may be NULL). */
cortado_status cortado_net_create_from_text(cortado_context *ctx, const char *text, size_t len,
                                            const char *source, const cortado_net_options *opts,
                                            cortado_net **out);
void cortado_net_free(cortado_net *net);

const char *cortado_net_name(const cortado_net *net);
cortado_phase cortado_net_phase(const cortado_net *net);
cortado_context *cortado_net_context(const cortado_net *net); /* borrowed */

/* Layers, in forward order. */
int cortado_net_num_layers(const cortado_net *net);
const char *cortado_net_layer_name(const cortado_net *net, int layer);
const char *cortado_net_layer_type(const cortado_net *net, int layer);
/* Index of the layer of that name, or -1. */
int cortado_net_layer_index(const cortado_net *net, const char *name);
int cortado_net_layer_num_bottoms(const cortado_net *net, int layer);
int cortado_net_layer_bottom(const cortado_net *net, int layer, int i); /* a blob index */
int cortado_net_layer_num_tops(const cortado_net *net, int layer);
int cortado_net_layer_top(const cortado_net *net, int layer, int i);   /* a blob index */
/* The learnable blobs of a layer (Caffe's layer->blobs(): weights, bias,
 * ...); a parameter shared by name is one storage seen by each sharer. */
int cortado_net_layer_num_params(const cortado_net *net, int layer);
cortado_blob *cortado_net_layer_param(cortado_net *net, int layer, int i);
/* The state a custom layer class made for this layer (see below), or NULL
 * for a built-in layer. */
void *cortado_net_layer_state(const cortado_net *net, int layer);

/* Blobs (activations), in the order they were made. */
int cortado_net_num_blobs(const cortado_net *net);
const char *cortado_net_blob_name(const cortado_net *net, int blob);
cortado_blob *cortado_net_blob(cortado_net *net, int blob);
int cortado_net_blob_index(const cortado_net *net, const char *name); /* -1 when absent */
cortado_blob *cortado_net_blob_by_name(cortado_net *net, const char *name); /* NULL when absent */
/* The loss weight of a blob (nonzero for loss outputs). */
float cortado_net_blob_loss_weight(const cortado_net *net, int blob);
/* Inputs (legacy `input` fields and Input layers' tops) and outputs (blobs
 * no layer consumes), as blob indices. */
int cortado_net_num_inputs(const cortado_net *net);
int cortado_net_input(const cortado_net *net, int i);
int cortado_net_num_outputs(const cortado_net *net);
int cortado_net_output(const cortado_net *net, int i);

/* Forward through layers start..end inclusive (Caffe's ForwardFromTo);
 * *loss (may be NULL) gets the weighted loss of those layers.  Layers whose
 * bottoms changed shape (cortado_blob_reshape, a custom layer's reshape)
 * are reshaped first, as Caffe reshapes in every forward.  Errors: bad data
 * (a label out of range, a data source that fails) naming the layer, and a
 * custom layer's failure. */
cortado_status cortado_net_forward(cortado_net *net, double *loss);
cortado_status cortado_net_forward_range(cortado_net *net, int start, int end, double *loss);
/* Backward from layer start down to end inclusive (Caffe's BackwardFromTo,
 * start >= end); parameter gradients accumulate until
 * cortado_net_clear_param_diffs.  Errors: a custom layer's failure. */
cortado_status cortado_net_backward(cortado_net *net);
cortado_status cortado_net_backward_range(cortado_net *net, int start, int end);
/* Re-propagates shapes from the inputs (Caffe's Net::Reshape). */
cortado_status cortado_net_reshape(cortado_net *net);
/* Zeroes every parameter gradient. */
void cortado_net_clear_param_diffs(cortado_net *net);
/* Copies weights by layer name from a .caffemodel (Caffe's
 * CopyTrainedLayersFrom): layers missing here are skipped, a shape mismatch
 * is an error naming the layer and both shapes. */
cortado_status cortado_net_copy_from(cortado_net *net, const char *caffemodel_path);
/* Makes net use other's parameters, layer by layer of the same name
 * (Caffe's ShareTrainedLayersWith); both must be on the same device, and
 * other must outlive net's use of them.  Errors: CORTADO_ERR_INVALID for
 * different devices or mismatched shapes. */
cortado_status cortado_net_share_with(cortado_net *net, const cortado_net *other);
/* Writes the net and its weights (and gradients when write_diff) as a
 * binary .caffemodel that BVLC Caffe reads. */
cortado_status cortado_net_save(cortado_net *net, const char *path, bool write_diff);
/* Gives the net's first layer, a MemoryData layer, num samples: data
 * (num x C x H x W) and labels (num), borrowed (not copied) until the next
 * call or the net's end (Caffe's MemoryDataLayer::Reset).  Errors
 * (CORTADO_ERR_INVALID): no MemoryData first layer, num not a multiple of
 * its batch_size. */
cortado_status cortado_net_set_input_arrays(cortado_net *net, const float *data,
                                            const float *labels, int num);

/* ------------------------------------------------------------------ custom layers */

/* A layer instance as seen by a custom layer class. */
typedef struct cortado_layer cortado_layer;

/* A layer type implemented outside the library (the Python package's
 * "Python" layers are one).  Its functions run on the host; on a GPU the
 * library copies the blobs they see to and from host memory around each
 * call, and never records them into a replayed CUDA graph.  Every function
 * but destroy returns CORTADO_OK or a failure whose message the function
 * set with cortado_set_error.  Blob arrays are valid for the call only. */
typedef struct cortado_layer_class {
  const char *type;  /* the prototxt type name, e.g. "Python" (copied) */
  void *user;        /* passed to create */
  /* Makes the state of one layer: param is its serialized LayerParameter
   * (size bytes).  *state starts NULL. */
  cortado_status (*create)(void *user, cortado_layer *layer, const void *param, size_t size,
                           void **state);
  /* Caffe's LayerSetUp: may add learnable blobs (cortado_layer_add_param). */
  cortado_status (*setup)(void *state, cortado_layer *layer, cortado_blob *const *bottom,
                          int nbottom, cortado_blob *const *top, int ntop);
  /* Caffe's Reshape: shapes the tops; called before every forward too. */
  cortado_status (*reshape)(void *state, cortado_layer *layer, cortado_blob *const *bottom,
                            int nbottom, cortado_blob *const *top, int ntop);
  cortado_status (*forward)(void *state, cortado_layer *layer, cortado_blob *const *bottom,
                            int nbottom, cortado_blob *const *top, int ntop);
  /* May be NULL (no backward).  Writes the bottom diffs whose
   * propagate_down is true; adds into the parameters' diffs. */
  cortado_status (*backward)(void *state, cortado_layer *layer, cortado_blob *const *top, int ntop,
                             const bool *propagate_down, cortado_blob *const *bottom, int nbottom);
  /* Frees the state of one layer (that layer is going); may be NULL. */
  void (*destroy)(void *state, cortado_layer *layer);
} cortado_layer_class;

/* Registers a layer class (copied; cls->user must outlive it).  Registering
 * the same type again with the same functions is a no-op.  Errors:
 * CORTADO_ERR_INVALID when the type is a built-in one or registered with
 * other functions. */
cortado_status cortado_layer_class_register(const cortado_layer_class *cls);

const char *cortado_layer_name(const cortado_layer *layer);
const char *cortado_layer_type(const cortado_layer *layer);
cortado_phase cortado_layer_phase(const cortado_layer *layer);
/* The worker this layer's net trains on: rank among world (0 of 1 outside
 * data parallelism). */
int cortado_layer_rank(const cortado_layer *layer);
int cortado_layer_world(const cortado_layer *layer);
/* During setup only: adds a learnable blob of the given shape (zeros),
 * returned for filling; NULL outside setup, for a negative dimension or
 * when the layer has CORTADO_MAX_LAYER_PARAMS already. */
#define CORTADO_MAX_LAYER_PARAMS 8
cortado_blob *cortado_layer_add_param(cortado_layer *layer, int num_axes, const int *shape);
int cortado_layer_num_params(const cortado_layer *layer);
cortado_blob *cortado_layer_param(cortado_layer *layer, int i);

/* ------------------------------------------------------------------ solvers */

typedef struct cortado_solver cortado_solver;

typedef struct cortado_solver_options {
  const char *type;          /* the update rule, replacing the file's `type`: "SGD",
                                "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam"; NULL:
                                the file's */
  int level;                 /* added to the train net's state (as --level) */
  const char *const *stages; /* added to the train net's stages (as --stage) */
  int nstages;
  bool quiet;                /* no per-layer lines while building the nets */
  bool keep_blob_diffs;      /* every blob keeps its own diff and its full values, as in
                                Caffe (default: blob values and diffs share memory by
                                lifetime: a blob's diff is only meaningful during the
                                backward pass that uses it, and an intermediate blob's
                                values only until the last layer that reads them has run,
                                forward or backward (the net's outputs keep theirs); on a
                                GPU a Convolution read only by a MAX Pooling leaves its bias
                                for the Pooling to add) */
} cortado_solver_options;
#define CORTADO_SOLVER_OPTIONS_INIT {NULL, 0, NULL, 0, false, false}

/* Builds a solver from a SolverParameter prototxt on ctx (Caffe's
 * Solver(file)): the train net, the test nets (sharing its weights), the
 * update rule's history.  Paths in the file are relative to the current
 * directory, as in Caffe.  opts may be NULL.  Errors: the file's, the
 * nets', an unknown type. */
cortado_status cortado_solver_create(cortado_context *ctx, const char *solver_path,
                                     const cortado_solver_options *opts, cortado_solver **out);
cortado_status cortado_solver_create_from_text(cortado_context *ctx, const char *text, size_t len,
                                               const cortado_solver_options *opts,
                                               cortado_solver **out);
void cortado_solver_free(cortado_solver *s);

const char *cortado_solver_type(const cortado_solver *s);
cortado_net *cortado_solver_net(cortado_solver *s); /* the train net */
int cortado_solver_num_test_nets(const cortado_solver *s);
cortado_net *cortado_solver_test_net(cortado_solver *s, int i);
int cortado_solver_iter(const cortado_solver *s);   /* updates done */
int cortado_solver_max_iter(const cortado_solver *s);
float cortado_solver_smoothed_loss(const cortado_solver *s);
float cortado_solver_rate(const cortado_solver *s); /* the learning rate of the last update */
/* The worker rank and world of a data-parallel worker's solver (0 and 1
 * otherwise). */
int cortado_solver_rank(const cortado_solver *s);
int cortado_solver_world(const cortado_solver *s);

/* Runs iters iterations (Caffe's Step): tests, callbacks, forward,
 * backward, update, display, snapshots as the file says.  Errors: bad data,
 * a NaN loss (CORTADO_ERR_NUMERIC), a failed callback or custom layer, a
 * snapshot that cannot be written. */
cortado_status cortado_solver_step(cortado_solver *s, int iters);
/* Caffe's Solve: restores resume_path (may be NULL), steps to max_iter,
 * snapshots and tests at the end. */
cortado_status cortado_solver_solve(cortado_solver *s, const char *resume_path);
/* Restores a .solverstate (Cortado's or BVLC Caffe's). */
cortado_status cortado_solver_restore(cortado_solver *s, const char *solverstate_path);
/* Writes <prefix>_iter_N.caffemodel and .solverstate. */
cortado_status cortado_solver_snapshot(cortado_solver *s);
/* Runs every test net for its test_iter passes (Caffe's TestAll). */
cortado_status cortado_solver_test_all(cortado_solver *s);
/* One update from the gradients in the train net's parameter diffs
 * (Caffe's ApplyUpdate; iter is not advanced). */
cortado_status cortado_solver_apply_update(cortado_solver *s);
/* Copies comma-separated .caffemodel files into every net (--weights). */
cortado_status cortado_solver_copy_from(cortado_solver *s, const char *caffemodels);

/* Called in every iteration (Caffe's Solver::Callback): on_start before the
 * forward passes, on_gradients after the backward passes (and the
 * gradients' average over data-parallel workers), before the update.
 * Either may be NULL.  A failure of on_gradients (a status other than
 * CORTADO_OK, message through cortado_set_error) ends the step with it. */
typedef struct cortado_solver_callback {
  void (*on_start)(void *user);
  cortado_status (*on_gradients)(void *user);
  void *user;
} cortado_solver_callback;
void cortado_solver_add_callback(cortado_solver *s, const cortado_solver_callback *cb);

/* pycaffe's NCCL(solver, uid): makes the solver (on a GPU context set up
 * with cortado_context_set_worker(ctx, rank, count)) one of count workers
 * (processes or threads, one per GPU) joined by one NCCL communicator made
 * from id (cortado_nccl_new_id, the same for all): its parameters are
 * broadcast from rank 0 now, and every step averages its gradients over
 * the workers.  Every worker calls it.  Errors: CORTADO_ERR_UNSUPPORTED on
 * the CPU or without NCCL, CORTADO_ERR_INVALID for a rank or count that do
 * not fit the context, NCCL's failures. */
cortado_status cortado_solver_join_nccl(cortado_solver *s, const unsigned char *id, int rank, int count);

/* Requests for the running step (async-signal-safe bit flags). */
#define CORTADO_REQUEST_STOP 1     /* finish the iteration and return */
#define CORTADO_REQUEST_SNAPSHOT 2 /* snapshot after the iteration */
void cortado_solver_request(cortado_solver *s, int requests);

/* ------------------------------------------------------------------ data-parallel training */

/* What the root worker reports at each display iteration. */
typedef struct cortado_display {
  int iter;       /* updates done */
  float loss;     /* the smoothed loss */
  float rate;     /* the learning rate of the last update */
  long long inputs_per_iter; /* inputs of one iteration over all workers */
  const float *test_scores;  /* the mean outputs of test net 0's last test (ntest_scores) */
  int ntest_scores;
} cortado_display;

typedef struct cortado_train_options {
  const char *weights;   /* .caffemodel files to start from, ','-separated, or NULL */
  const char *snapshot;  /* a .solverstate to resume from, or NULL */
  /* Workers: GPUs (ngpus > 1: worker threads of this process, NCCL between
   * them), or cpu_workers threads of this process (> 1), or one worker per
   * rank of an MPI job (mpi; with GPUs ngpus lists each node's), or one
   * shard of num_shards processes meeting through file_store_path or
   * redis_host (each on its GPUs, or one CPU worker through Gloo).  With
   * none of these: one worker on the CPU or gpus[0]. */
  const int *gpus;
  int ngpus;
  int cpu_workers;
  bool mpi;
  int num_shards, shard_id;
  const char *run_id, *file_store_path, *redis_host, *redis_password;
  int redis_port;                /* 0: 6379 */
  double rendezvous_timeout_s;   /* 0: 300 */
  const char *gloo_iface, *gloo_host;
  /* One worker process of ngpus on this host (process_rank of them), each
   * driving gpus[process_rank]; all pass the same nccl_id
   * (cortado_nccl_new_id, made by the launcher). */
  int process_rank;              /* -1: not a worker process */
  const unsigned char *nccl_id;  /* CORTADO_NCCL_ID_BYTES bytes */
  /* As `cortado train`'s flags of the same names. */
  int level;
  const char *const *stages;
  int nstages;
  bool global_batch;
  double bucket_mb;              /* 0: 25 */
  double comm_timeout_s;         /* 0: CORTADO_COMM_TIMEOUT or 300 */
  bool strict_fp32;
  /* Called on each worker's thread once its solver is built (weights
   * loaded, state restored), before training: add callbacks there.  A
   * failure ends the run with it.  on_worker_end is called before that
   * solver is freed.  Both may be NULL. */
  cortado_status (*on_worker)(void *user, cortado_solver *worker_solver);
  void (*on_worker_end)(void *user, cortado_solver *worker_solver);
  /* Called on the root worker at each display iteration. */
  cortado_status (*on_display)(void *user, const cortado_display *d);
  void *user;
} cortado_train_options;
#define CORTADO_TRAIN_OPTIONS_INIT                                                          \
  {NULL, NULL, NULL, 0, 0, false, 1, 0, NULL, NULL, NULL, NULL, 0, 0, NULL, NULL, -1, NULL, \
   0, NULL, 0, false, 0, 0, false, NULL, NULL, NULL, NULL}

/* Trains the solver file with the engine of `cortado train` (the same
 * workers, gradient averaging, snapshots and logs) and waits for the end.
 * Errors: a worker's failure ("worker 1 (GPU 1) failed at iteration 7:
 * ..."), CORTADO_ERR_UNSUPPORTED for what this build lacks (NCCL, MPI,
 * Gloo). */
cortado_status cortado_train(const char *solver_path, const cortado_train_options *opts);
/* Asks the running cortado_train of this process to stop or snapshot
 * (CORTADO_REQUEST_* bits; async-signal-safe). */
void cortado_train_request(int requests);

#define CORTADO_NCCL_ID_BYTES 128
/* A new NCCL unique id for worker processes (CORTADO_ERR_UNSUPPORTED
 * without NCCL). */
cortado_status cortado_nccl_new_id(unsigned char id[CORTADO_NCCL_ID_BYTES]);

/* ------------------------------------------------------------------ images */

/* Decodes a JPEG or PNG file into 8-bit pixels, h x w x c in row-major HWC
 * order: c = 3 in RGB order when color, else c = 1 (luma as OpenCV makes
 * it); alpha is dropped.  *pixels is malloc'd: free it with cortado_free.
 * Errors: the file's name and what is wrong with it. */
cortado_status cortado_image_read(const char *path, bool color, int *h, int *w, int *c,
                                  unsigned char **pixels);
/* Writes h x w x c 8-bit pixels (c = 1 gray or 3 RGB, HWC order) as a PNG
 * file.  Errors: CORTADO_ERR_INVALID for another channel count,
 * CORTADO_ERR_IO naming the file. */
cortado_status cortado_image_write_png(const char *path, const unsigned char *pixels, int h, int w,
                                       int c);
/* Frees memory this API allocated for the caller. */
void cortado_free(void *p);

/* ------------------------------------------------------------------ timing */

/* Wall-clock seconds of a monotonic clock (for timers). */
double cortado_seconds(void);

#ifdef __cplusplus
}
#endif

#endif
