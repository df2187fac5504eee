/* Layers: Caffe's layers as a small ops table per type plus private state.
 *
 * A layer type is one `ct_layer_ops` (a const table in its name.c, with GPU
 * launchers in name.cu), registered by type name in src/layers/registry.c.
 * A layer instance (`ct_layer`) keeps the LayerParameter it was made from,
 * its context (device, handles, RNG), its learnable parameters (Caffe's
 * blobs_) and a private pointer for whatever else the type needs.
 *
 * Life cycle, driven by the net:
 *   ct_layer_create   look the type up, check the bottom/top counts
 *   ct_layer_setup    ops->setup (read the typed *_param, validate, declare
 *                     the learnable parameters with ct_layer_add_param and
 *                     fill them on the host), then ops->reshape, then on a
 *                     GPU ops->reshape_gpu
 *   ct_layer_reshape  ops->reshape (and ops->reshape_gpu) when bottom shapes
 *                     change
 *   ct_layer_forward / ct_layer_backward  on the context's device
 *   ct_layer_free     ops->destroy_gpu, then ops->destroy
 *
 * On a GPU, forward and backward only enqueue work on the context's stream;
 * the net runs them without waiting (ct_layer_forward_async) and the runtime
 * may record the work once and replay the recording on later iterations
 * (src/runtime), so a GPU path must not wait for the device, allocate, or
 * compute kernel arguments on the host that change between calls (e.g. a
 * seed drawn on the host).  A type that cannot avoid it says so with
 * CT_LAYER_HOST_WORK and is called every iteration.  Device-side input checks use the context's deferred checks
 * (core/context.h) rather than reading a flag back.
 *
 * Conventions every layer follows (Caffe's):
 *  - forward writes every top value; backward *writes* (does not accumulate)
 *    bottom diffs whose propagate_down is true, and *accumulates* into the
 *    diffs of its learnable parameters (the net zeroes them once per
 *    iteration, which gives shared weights and iter_size for free);
 *  - a loss layer's top diff holds its loss weight when backward runs;
 *  - parameters live on the context's device after setup (the net moves
 *    them into its flat buffers); during ops->setup they are host tensors. */
#ifndef CT_LAYERS_LAYER_H
#define CT_LAYERS_LAYER_H

#include <stdbool.h>

#include "caffe.pb-c.h"
#include "core/context.h"
#include "core/status.h"
#include "core/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_phase { CT_PHASE_TRAIN = 0, CT_PHASE_TEST = 1 } ct_phase;

typedef struct ct_layer ct_layer;

typedef ct_status (*ct_layer_shape_fn)(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                       ct_error *err);
typedef ct_status (*ct_layer_forward_fn)(ct_layer *l, ct_tensor *const *bottom,
                                         ct_tensor *const *top, ct_error *err);
typedef void (*ct_layer_backward_fn)(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                                     ct_tensor *const *bottom);

/* Flags of a layer type. */
enum {
  CT_LAYER_LOSS = 1u << 0,            /* a loss: top 0 gets loss_weight 1 by default */
  CT_LAYER_DATA = 1u << 1,            /* produces data from a source (--dummy_data replaces it) */
  CT_LAYER_EQUAL_BOTTOM_TOP = 1u << 2, /* as many tops as bottoms */
  CT_LAYER_AUTO_TOPS = 1u << 3,       /* the net may create missing tops (min_tops of them) */
  CT_LAYER_NO_BACKWARD = 1u << 4,     /* never computes bottom gradients (Accuracy, ArgMax, data) */
  CT_LAYER_HOST_WORK = 1u << 5,       /* GPU forward/backward do host work every call: never
                                         replayed from a recording */
  CT_LAYER_DRAWS = 1u << 6,           /* each TRAIN forward takes one counter-based draw of the
                                         context (ct_context_next_draw) */
  CT_LAYER_OWN_TOP_16 = 1u << 8,      /* run in place, the 16-bit channels-last GPU path copies its
                                         bottom (and its top's gradient in backward): the net's
                                         precision pass gives it a top of its own instead, which
                                         later readers of the name read (BatchNorm) */
  CT_LAYER_BACKWARD_FROM_BLOBS = 1u << 9, /* its backward reads nothing its forward left but its
                                         bottoms' and tops' values (and its parameters): a
                                         pipeline stage may keep its micro-batches by their blobs
                                         (ct_layer_ops.backward_state) */
  CT_LAYER_GRAD_SIDE = 1u << 7,       /* GPU backward may compute the parameter gradients on the
                                         gradient stream (core/context.h) when the net sets
                                         grad_side: from the top diffs and bottom data only,
                                         through ct_context_grad_begin's context */
};

/* A piece of a layer's private memory on its device (ct_layer_ops.backward_state). */
typedef struct ct_layer_region {
  void *data;
  size_t bytes;
} ct_layer_region;

typedef struct ct_layer_ops {
  const char *type;          /* the prototxt type string, e.g. "Convolution" */
  int min_bottoms, max_bottoms; /* -1 for no upper limit */
  int min_tops, max_tops;
  unsigned flags;            /* CT_LAYER_* */
  /* Bit i set: bottom i never receives a gradient even under force_backward
   * (Caffe's AllowForceBackward), e.g. labels of a loss. */
  unsigned no_force_backward_bottoms;
  /* Data layers whose tops come from host memory (optional, both or
   * neither): next_batch hands out the next batch without copying it, host[t]
   * pointing to top[t]->count values in pinned host memory for each top t,
   * valid until release_batch(l, token).  A GPU net run as a program
   * (runtime/steps.c) then copies the batches into the tops itself, on the
   * context's copy stream and overlapped with the previous iteration, in
   * place of calling forward; it releases each batch once its copy is done
   * and before asking for the next (src/net/net_feed.c).  Errors: the
   * source's (the record that failed). */
  ct_status (*next_batch)(ct_layer *l, const float **host, void **token, ct_error *err);
  void (*release_batch)(ct_layer *l, void *token);
  ct_layer_shape_fn setup;   /* required */
  ct_layer_shape_fn reshape; /* required */
  ct_layer_forward_fn forward_cpu;   /* required */
  ct_layer_backward_fn backward_cpu; /* NULL when the layer has no backward */
  ct_layer_forward_fn forward_gpu;   /* NULL: the layer has no GPU path yet */
  ct_layer_backward_fn backward_gpu;
  void (*destroy)(ct_layer *l);      /* frees l->priv; may be NULL */
  /* Bytes of scratch the layer holds for its current shapes beyond its tops
   * and parameters (im2col columns), for `cortado time`'s memory report;
   * NULL: none. */
  size_t (*workspace_bytes)(const ct_layer *l);
  /* GPU only, both optional: reshape_gpu runs after ops->reshape on a GPU
   * context and plans the device side for the current shapes into
   * l->gpu_priv (library descriptors, algorithms, workspace: everything that
   * may synchronise or allocate, so that forward and backward do neither);
   * destroy_gpu frees l->gpu_priv. */
  ct_layer_shape_fn reshape_gpu;
  void (*destroy_gpu)(ct_layer *l);
  /* GPU only, optional: the work of a pass that depends on the layer's
   * parameters only (Winograd's transformed filters), enqueued with side
   * (another stream's context) so that it runs beside the layers below;
   * bottom_grad: the pass's backward will compute a bottom gradient (else
   * that direction's work is left out).  Returns whether there is any (with
   * side NULL it only answers, enqueuing nothing).  The net arms it at a
   * pass's start, calls it beside the forward of the layers below, and
   * makes the compute stream wait for side before the layer's forward
   * (ct_net_prepare_async).  It feeds that pass's next
   * forward and the backward after it; a forward not preceded by it does
   * the work itself. */
  bool (*prepare_gpu)(ct_layer *l, ct_context *side, bool bottom_grad);
  /* Data layers only (may be NULL): where the layer is in its source, so a
   * snapshot can save it and a resumed run continue exactly.  get_position
   * fills pos (layer is strdup'd into pos->layer: free it with free());
   * set_position makes the next forward give the batch that followed pos. */
  ct_status (*get_position)(ct_layer *l, Caffe__CortadoDataPosition *pos);
  ct_status (*set_position)(ct_layer *l, const Caffe__CortadoDataPosition *pos, ct_error *err);
  /* The element types the layer computes in besides float32, on the host
   * and on a GPU: masks of CT_DTYPE_BIT(type).  The net (net_dtype.c) runs
   * a layer in the net's 16-bit type when the mask has it, else in float32,
   * and puts Cast layers where a layer reads a blob of another type.  A
   * layer's type (l->dtype) is that of its tops and of all their and its
   * bottoms' gradients; its learnable parameters stay float32 (the solver's
   * master copy: a 16-bit layer converts them as it reads them, and adds
   * its parameter gradients into their float32 diffs).  CT_DTYPES_ANY:
   * every type, the type of bottom 0 (Split). */
  unsigned dtypes_cpu, dtypes_gpu;
  /* The memory orders (core/tensor.h) the layer's host and GPU paths take
   * in their 16-bit types besides NCHW: masks of CT_LAYOUT_BIT(layout).
   * The net runs a 16-bit layer channels-last (CT_NHWC) when its device's
   * mask has it; then all its bottoms, tops and their gradients are NHWC
   * (l->layout).  CT_LAYOUTS_ANY: the order of bottom 0, whatever it is
   * (element-wise types: ReLU, Eltwise, Split; in float32 too).  Other
   * float32 layers are NCHW. */
  unsigned layouts_cpu, layouts_gpu;
  /* Which values the layer's backward reads (or writes), set up as it is
   * now, its fusions included: clears bottoms[i] / tops[i] for a bottom /
   * top whose values it never touches (the arrays come filled with true).
   * NULL: it reads them all.  A layer that computes the backward of layers
   * absorbed into it (layer.absorbed) declares what they read too.  The
   * net shares a blob's memory with others
   * once the last step that reads its values is over (net_memory.c), and
   * lets a SUM Eltwise write its sum over a top that no backward reads
   * (net_fuse.c).  A layer that declares less than it reads computes from
   * another blob's values: tests/test_net_plan.c runs every net with the
   * memory of each finished blob filled with NaN. */
  void (*backward_reads)(const ct_layer *l, bool *bottoms, bool *tops);
  /* For a pipeline stage that keeps each micro-batch's activations instead
   * of recomputing its forward before its backward (runtime/stages.h), both
   * optional.  backward_state puts into out (at most cap) the memory on the
   * layer's device, beyond its bottoms, tops and parameters, that its
   * backward reads as its last forward left it (a max pooling's argmax, a
   * softmax loss's probabilities, a dropout's seed), and returns how many
   * regions; the stage copies them out after each forward and back before
   * that micro-batch's backward.  restored tells the layer that its blobs
   * and regions now hold another forward's values than its last forward
   * left: it drops what it derived from them and kept (oneDNN's reordered
   * copy of x).  A layer type with neither must say
   * CT_LAYER_BACKWARD_FROM_BLOBS (or have no backward) for such a stage to
   * take it (ct_layer_keeps_microbatches). */
  int (*backward_state)(ct_layer *l, ct_layer_region *out, int cap);
  void (*restored)(ct_layer *l);
} ct_layer_ops;

#define CT_DTYPE_BIT(t) (1u << (unsigned)(t))
#define CT_DTYPES_ANY (1u << 31)
#define CT_LAYOUT_BIT(l) (1u << (unsigned)(l))
#define CT_LAYOUTS_ANY (1u << 31)

#define CT_LAYER_MAX_PARAMS 8

struct ct_layer {
  const ct_layer_ops *ops;
  const Caffe__LayerParameter *param; /* borrowed: owned by the net's NetParameter */
  const char *name;                   /* param->name (or "" when unnamed) */
  ct_phase phase;
  ct_context *ctx;
  int nbottom, ntop;
  int nparams;
  ct_dtype dtype;                      /* what it computes in: its tops' type (set by the net) */
  ct_layout layout;                    /* its bottoms' and tops' memory order (set by the net) */
  ct_tensor *params[CT_LAYER_MAX_PARAMS]; /* learnable blobs, e.g. weights (K,C,kh,kw), bias (K) */
  bool param_propagate_down[CT_LAYER_MAX_PARAMS]; /* compute this parameter's gradient */
  float *loss_weight;                 /* (ntop) */
  void *priv;                         /* the type's private state */
  void *gpu_priv;                     /* GPU-side state (cuDNN), NULL when none */
  /* Set by the net (net_fuse.c) when the layer just before this one computes
   * this layer's forward and backward too (BatchNorm + Scale): forward and
   * backward of this layer then do nothing; its parameters stay its own. */
  bool absorbed;
  /* Set by the net (net_fuse.c) when the layer before this one computes
   * this layer's forward (a ReLU after a cuDNN convolution): forward does
   * nothing, backward runs as usual. */
  bool forward_absorbed;
  /* Set by the net (net_fuse.c) when the layer after this one computes this
   * layer's backward (a ReLU in place on the bottom of a GPU Pooling):
   * backward does nothing, forward runs as usual (or is absorbed too). */
  bool backward_absorbed;
  /* Set by the net for a CT_LAYER_GRAD_SIDE layer whose parameters no other
   * layer shares, on a context with a gradient stream: its GPU backward puts
   * the parameter gradients there (the net orders the rest). */
  bool grad_side;
  /* Set by ct_layer_release: the layer is held by another process (a
   * pipeline stage's, net.h); it describes itself (type, name, counts,
   * parameter shapes, loss weights) but has no state and no storage. */
  bool released;
  /* Set while the layer's forward runs again for a backward (a pipeline
   * stage's recomputation of a micro-batch, runtime/stages.h): what the
   * forward keeps across batches (BatchNorm's running statistics) stays as
   * the first forward of that micro-batch left it. */
  bool recomputing;
  /* Memory the layer's setup took on its device beyond its new tops'
   * storage (private state, saved copies, descriptors' workspaces), net
   * fusion's changes included: measured by the net as it builds, for
   * memory reports (bench/net_memory). */
  size_t state_bytes;
};

/* Makes a layer of param->type.  Fails with CT_ERR_NOTFOUND for an unknown type
 * (the message lists the known types and suggests the nearest), and
 * CT_ERR_INVALID when nbottom/ntop do not fit the type. */
ct_status ct_layer_create(const Caffe__LayerParameter *param, ct_phase phase, ct_context *ctx,
                          int nbottom, int ntop, ct_layer **out, ct_error *err);
/* Runs ops->setup then ops->reshape and sets the loss weights.  The bottom
 * tensors have their shapes; tops are reshaped by the layer.  Error messages
 * are prefixed with the layer's name and type. */
ct_status ct_layer_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top, ct_error *err);
ct_status ct_layer_reshape(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                           ct_error *err);
/* Forward on the context's device.  When loss is not NULL, adds
 * sum over tops with nonzero loss weight of dot(top data, top diff).
 * On a GPU this waits for the device when it reads the loss or when the
 * context has deferred checks (so that a bad label is reported here, by
 * this call); the net uses ct_layer_forward_async instead. */
ct_status ct_layer_forward(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                           double *loss, ct_error *err);
/* The forward alone: enqueued on a GPU without waiting, device checks left
 * raised in the context.  Errors found on the host are returned prefixed
 * with the layer's name and type. */
ct_status ct_layer_forward_async(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                                 ct_error *err);
void ct_layer_backward(ct_layer *l, ct_tensor *const *top, const bool *propagate_down,
                       ct_tensor *const *bottom);
void ct_layer_free(ct_layer *l);
/* Drops a set-up layer's state (ops->destroy_gpu, ops->destroy) and its
 * parameters' storage (ct_tensor_drop_storage), keeping what describes it,
 * and sets l->released.  After it only ct_layer_free may be called: what a
 * process keeps of the layers that another one holds (net.h). */
void ct_layer_release(ct_layer *l);

/* For ops->setup: declares learnable parameter number l->nparams (a host
 * tensor of the given shape, zeroed) and returns it for filling. */
ct_tensor *ct_layer_add_param(ct_layer *l, int ndim, const int *shape);

/* The most any count-like layer parameter may be (num_output, group,
 * kernel sizes, strides, dilations, pads, local_size, ...): 2^30. */
#define CT_LAYER_PARAM_MAX (1u << 30)
/* Checks an unsigned parameter as written (before any cast to int) against
 * [lo, CT_LAYER_PARAM_MAX].  CT_ERR_INVALID naming `field`:
 *   "convolution_param.num_output is 0 (must be at least 1)"
 *   "inner_product_param.num_output 2000000000 is too large (the limit is
 *    2^30 = 1073741824)" */
ct_status ct_layer_check_count(const char *field, uint64_t value, uint64_t lo, ct_error *err);
/* Whether the layer's GPU forward and backward enqueue the same work on
 * every call with no host work, so that the runtime may record them once
 * and replay the recording: not for CT_LAYER_HOST_WORK types, data layers
 * (but a DummyData whose refills are drawn on the device), stochastic
 * Pooling in TRAIN (host draws) and Python layers. */
bool ct_layer_replayable(const ct_layer *l);
/* Which of l's bottoms' and tops' values its backward reads
 * (ops->backward_reads; all of them without it): bottoms (nbottom) and tops
 * (ntop) are filled. */
void ct_layer_backward_reads(const ct_layer *l, bool *bottoms, bool *tops);
/* An ops->backward_reads for layers whose backward reads no values (their
 * gradients come from the top diffs and the layer's own state alone). */
void ct_layer_reads_no_values(const ct_layer *l, bool *bottoms, bool *tops);
/* l->ops->prepare_gpu on a GPU context (false on the CPU or without it). */
bool ct_layer_prepare_async(ct_layer *l, ct_context *side, bool bottom_grad);

/* Whether a pipeline stage can keep l's micro-batches without recomputing
 * them: l has no backward, or its type says what its backward reads
 * (ct_layer_ops.backward_state, CT_LAYER_BACKWARD_FROM_BLOBS); an absorbed
 * layer's work is its absorber's. */
bool ct_layer_keeps_microbatches(const ct_layer *l);
/* l's backward state regions (ct_layer_ops.backward_state; none without
 * it), at most cap into out; returns the count. */
int ct_layer_backward_state(ct_layer *l, ct_layer_region *out, int cap);
/* The most regions one layer's backward state takes. */
#define CT_LAYER_MAX_STATE 8

/* ---------------------------------------------------------------- registry */
/* The ops of a type name, or NULL. */
const ct_layer_ops *ct_layer_find(const char *type);
/* The same with an error that says what the type is: a BVLC Caffe type
 * Cortado does not implement yet (CT_ERR_UNSUPPORTED), a type of a known
 * Caffe fork (CT_ERR_UNSUPPORTED), a typo of a registered type ("did you
 * mean"), or else unknown (the registered types listed). */
ct_status ct_layer_lookup(const char *type, const ct_layer_ops **out, ct_error *err);
/* BVLC Caffe's layer types (proto/catalog.h) that no registered type
 * implements, alphabetically, into out (at most cap); returns the count.
 * The list shrinks by itself as types are registered. */
size_t ct_layer_missing_caffe_types(const char **out, size_t cap);
/* All registered types, in table order, then those registered at run time;
 * *n receives the count. */
const char *const *ct_layer_types(int *n);
/* Adds a layer type defined outside the table (cortado.h's custom layer
 * classes: the Python package's "Python" layers); ops must live as long as
 * the process.  Registering the same ops again is a no-op.  Errors
 * (CT_ERR_INVALID): a type of the table, a type registered with other ops,
 * too many types. */
ct_status ct_layer_register(const ct_layer_ops *ops, ct_error *err);

/* Typed parameters with Caffe's defaults when absent, e.g.
 * const Caffe__ReLUParameter *p = CT_PARAM_OR_DEFAULT(l, relu_param, CAFFE__RE_LUPARAMETER__INIT); */
#define CT_PARAM_OR_DEFAULT(l, field, init_macro)                                \
  ({                                                                             \
    static const __typeof__(*(l)->param->field) ct_default_ = init_macro;        \
    (l)->param->field ? (const __typeof__(*(l)->param->field) *)(l)->param->field \
                      : &ct_default_;                                            \
  })

#ifdef __cplusplus
}
#endif

#endif
