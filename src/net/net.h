/* Nets: a DAG of layers built from a NetParameter, as Caffe's Net.
 *
 * Building (ct_net_init) does what Caffe's Net::Init does: filter layers by
 * the NetState rules (phase, level, stages), insert Split layers for blobs
 * read by several layers, create each layer with its bottoms and tops
 * (in-place when a top names its bottom), set up and reshape the layers,
 * set loss weights, work out which layers need backward (force_backward,
 * propagate_down, layers that do not reach a loss), and share parameters
 * by ParamSpec name.
 *
 * Parameters: every learnable parameter of the net lives in one flat data
 * buffer and one flat gradient buffer on the net's device; each layer's
 * parameter tensors are views into them (shared parameters view their
 * owner's storage).  The flat layout runs in *reverse layer order* of when a
 * gradient becomes final, so during backward the final gradients always
 * form a growing prefix [0, grad_ready_offset) of the flat buffer: a
 * data-parallel reducer launches all-reduce buckets from the front while
 * backward goes on (runtime/reduce.h).
 *
 * Fusion: a training BatchNorm followed by a Scale in place on its top
 * computes both (net_fuse.c); the Scale stays in the net with its
 * parameters, marked absorbed (layers/layer.h).  On a GPU a cuDNN
 * Convolution also applies an in-place ReLU after it (the ReLU is marked
 * forward_absorbed).  opts.no_fusion turns both off.
 *
 * Gradient stream (GPU, core/context.h): layers with grad_side (set at
 * build, ct_net_mark_grad_side) compute their parameter gradients on a
 * second stream.  After each such layer's backward the compute stream waits
 * for the previous such layer's gradient work, and after the lowest one
 * for all of it, so backward ends with the streams joined; the diff
 * planner keeps those layers' top diffs alive until the wait.
 *
 * Blob memory: unless opts.keep_blob_diffs, blob values and diffs are not
 * arrays of each blob but views into one pool shared by lifetime
 * (net_memory.c).  A blob's diff is only meaningful between the backward of
 * its consumers and the backward of its producer; its values from its
 * producer's forward to the last step that reads them (a consumer's
 * forward, or a backward that reads them: ct_layer_ops.backward_reads).
 * Both are overwritten afterwards.  The net's inputs and outputs, the tops
 * of data layers and of losses keep their values.  While the net is built
 * a blob's values are released once the layers that read it are set up,
 * so that the build never holds every activation either.
 *
 * On a GPU nothing here waits for the device inside an iteration: the loss
 * is summed into device memory and read once per iteration, and
 * device-side input checks are deferred to that read (core/context.h). */
#ifndef CT_NET_NET_H
#define CT_NET_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "caffe.pb-c.h"
#include "core/context.h"
#include "core/status.h"
#include "core/strmap.h"
#include "core/tensor.h"
#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A learnable parameter, owner of its storage (shared ones are folded in). */
typedef struct ct_net_param {
  ct_tensor *tensor;   /* the owner layer's tensor (a view into the flat buffers) */
  char *name;          /* ParamSpec name, or "<layer>_<index>" when unnamed (owned) */
  int layer;           /* owner layer index */
  int index;           /* index among that layer's params */
  size_t offset;       /* start in the flat buffers (values) */
  size_t count;
  float lr_mult;
  float decay_mult;
  int final_layer;     /* its gradient is final after this layer's backward */
} ct_net_param;

/* Blob memory planning (net_memory.c): blob values and gradients share one
 * pool by lifetime.  Steps number one forward and backward pass: layer L's
 * forward is step L, its backward step 2n-1-L (n layers), and 2n is after
 * the pass. */
typedef enum ct_diff_kind {
  CT_DIFF_NONE = 0, /* touched by no backward: no diff */
  CT_DIFF_POOLED,   /* a place in the pool for its lifetime */
  CT_DIFF_LOSS,     /* a loss top: its own storage (the loss weight) */
  CT_DIFF_ZERO      /* read but never written: the shared zero buffer */
} ct_diff_kind;

/* Blobs whose data alias, and their one diff. */
typedef struct ct_diff_group {
  ct_diff_kind kind;
  int first, last;   /* the (backward) steps touching it, -1 when none */
  size_t count;      /* values, the members' extents from the group's base */
  size_t offset;     /* in the pool (POOLED) */
  bool read, written, loss, keep_to_end;
} ct_diff_group;

typedef enum ct_value_kind {
  CT_VALUE_OWN = 0, /* its own storage for the whole run: net inputs and outputs, data layers'
                       and loss tops, values a step reads before any writes them */
  CT_VALUE_POOLED   /* a place in the pool from the step that writes it to the last that reads it */
} ct_value_kind;

/* A blob that owns its values and the blobs that view them (in place,
 * Split, Flatten/Reshape, a SUM over its bottom): one storage. */
typedef struct ct_value_group {
  ct_value_kind kind;
  int owner;         /* the blob that owns the storage */
  int first, last;   /* steps that touch the values */
  size_t count;      /* float-sized words, the members' extents from the owner's start */
  size_t offset;     /* in the pool (POOLED) */
} ct_value_group;

typedef struct ct_blob_plan {
  int nblobs;
  int *blob_group;       /* (nblobs) diff group of each blob, -1 for none */
  size_t *blob_offset;   /* (nblobs) values from the group's base */
  int ngroups;
  ct_diff_group *groups; /* (ngroups) */
  int *blob_vgroup;      /* (nblobs) value group of each blob, -1 for none */
  int nvgroups;
  ct_value_group *vgroups; /* (nvgroups) */
  size_t pool_count;     /* float-sized words in the pool */
  size_t zero_count;     /* values in the zero buffer */
  size_t unplanned_count; /* words the pooled diff groups would take one array each */
  size_t values_unplanned; /* words the pooled value groups would take one array each */
  /* CORTADO_POOL_POISON: the pool ranges (word offset, length) that each
   * step ends (dead_at[s] to dead_at[s + 1] in dead), filled with NaN */
  int *dead_at;
  size_t *dead;
} ct_blob_plan;

typedef struct ct_net {
  Caffe__NetParameter *param; /* owned: the filtered net with Split layers inserted */
  const char *name;
  ct_phase phase;
  ct_context *ctx;

  int nlayers;
  ct_layer **layers;          /* (nlayers) */
  int nblobs;
  ct_tensor **blobs;          /* (nblobs), names in blobs[i]->name */
  int **bottom_ids, **top_ids; /* per layer: blob indices */
  ct_tensor ***bottoms, ***tops; /* per layer: tensor pointer arrays */
  bool **bottom_need_backward; /* per layer, per bottom */
  bool *layer_need_backward;   /* (nlayers) */
  bool *blob_need_backward;    /* (nblobs) */
  bool *layer_contributes_loss;

  int ninputs, noutputs;
  int *input_ids, *output_ids; /* blob indices of net inputs / outputs */

  int nparams;                 /* learnable (owner) parameters */
  ct_net_param *params;        /* (nparams) in flat-buffer order */
  float *flat_data;            /* (flat_count) on ctx->device */
  float *flat_diff;            /* (flat_count) on ctx->device */
  size_t flat_count;
  size_t *layer_ready_count;   /* (nlayers) final-gradient prefix after layer i's backward */

  bool quiet_build;           /* built with opts.quiet */
  bool exact_blobs;           /* built with opts.keep_blob_diffs: no fusion leaves a blob partial */
  bool plan_values;           /* blob values share the pool (net_memory.c) */
  bool typed;                 /* some blob holds values other than float32 in NCHW order */
  int grad_side_last;          /* the lowest layer with grad_side (layers/layer.h), -1 when none */
  /* ct_net_prepare_async's work: enqueued at layer prep_launch's forward
   * (-1: not armed), for layers from prep_at up; prep_first: prep_at while
   * the work is enqueued and not yet joined, else -1 */
  int prep_launch, prep_at, prep_first;

  /* Blob memory (see ct_blob_plan); NULL plan: each blob its own arrays. */
  ct_blob_plan *blob_plan;
  float *blob_pool;            /* (blob_plan->pool_count) on ctx->device */
  /* (nblobs) the blob whose storage each blob's values are (itself when it
   * owns them; -1: memory that is no blob's, or none) and the float-sized
   * words from that storage's start: recorded as each layer is set up, so
   * that it holds while the storage itself is released (net_memory.c) */
  int *value_owner;
  size_t *value_offset;
  float *diff_zero;            /* (blob_plan->zero_count) zeros on ctx->device */

  /* Loss scaling (solvers/loss_scale.h), set by the solver: when not NULL,
   * each backward pass of the runtime's programs starts from the loss
   * weight times its scale, and the loss tops' diffs hold the plain weight
   * again after it (the forward's loss sum reads them). */
  struct ct_loss_scale_state *loss_scale;
  /* The weighted loss sum of the forwards since ct_net_zero_loss. */
  double loss_host;            /* CPU */
  double *loss_dev;            /* (1) GPU: device memory */
  /* Layers [part_first, part_end) are this process's (a pipeline stage's,
   * ct_net_opts.part): only they and the blobs they read or write (and the
   * net's outputs) have storage; the others are released (layers/layer.h)
   * and their blobs are shapes (ct_tensor.no_storage).  0 and nlayers for
   * a whole net. */
  int part_first, part_end;
  struct ct_net_feed **feeds;  /* (nlayers) GPU: data layers fed by net_feed.c, else NULL */
  unsigned long layout_version; /* bumped whenever blob or buffer storage may have moved */
  bool *weights_copied;        /* (nlayers) the layer took blobs from a weights file since
                                  ct_net_weights_begin; NULL before the first copy */
  char weights_unmatched[3][64]; /* source layers with blobs the net has not (their number */
  int nweights_unmatched;        /* since ct_net_weights_begin, the first 3 names) */
  ct_strmap blob_index;        /* blob name -> index into blobs (named blobs) */
  ct_strmap layer_index;       /* layer name -> index of the first layer of that name */
} ct_net;

/* Whether layer `layer` is the process's own (within part_first .. part_end). */
static inline bool ct_net_in_part(const ct_net *net, int layer) {
  return layer >= net->part_first && layer < net->part_end;
}

/* A part of a net (ct_net_opts.part): fn(user, built, &first, &end, err)
 * gets the NetParameter as it is built (filtered, Casts and Splits
 * inserted) and sets the layers [first, end) this process holds, or fails
 * (its error is the build's, unprefixed). */
typedef ct_status (*ct_net_part_fn)(void *user, const Caffe__NetParameter *built, int *first,
                                    int *end, ct_error *err);
typedef struct ct_net_part {
  ct_net_part_fn fn; /* NULL: the whole net */
  void *user;
} ct_net_part;

/* Options of a build besides the NetParameter. */
typedef struct ct_net_opts {
  ct_phase phase;
  int level;                  /* NetState level (added to the param's state) */
  const char *const *stages;  /* NetState stages (added to the param's) */
  int nstages;
  const char *source_name;    /* file name for messages */
  bool quiet;                 /* no per-layer INFO lines */
  /* For callers that read intermediate blobs (cortado.h, pycaffe): every
   * blob keeps its own diff and its own values after backward, and holds
   * its full values (no fusion that leaves a blob partial: a Convolution
   * whose bias the MAX Pooling after it adds).  Otherwise values and diffs
   * share a pool by lifetime.  CORTADO_DIFF_PLANNING=0 in the environment
   * keeps both too; CORTADO_VALUE_PLANNING=0 keeps the values alone. */
  bool keep_blob_diffs;
  /* No layer fusion (net_fuse.c: a training BatchNorm computes the Scale
   * after it); CORTADO_FUSE=0 in the environment has the same effect. */
  bool no_fusion;
  /* Only some layers on this process (a pipeline stage, runtime/stages.h):
   * every layer is still created and set up in order, so that shapes
   * propagate and fillers draw what they draw in a whole net (the initial
   * parameters are one process's), but a layer outside the part is then
   * released at once: its parameters and state are dropped, its tops are
   * shapes without storage (unless a layer of the part reads them), it
   * takes no place in the flat buffers (which hold the part's parameters
   * only), in the diff pool or in weights copies, and it is never run.
   * Blobs the part reads or writes, and the net's outputs, have storage. */
  ct_net_part part;
} ct_net_opts;

/* Builds a net from param (not modified, not kept: the net keeps its own
 * copy) on ctx's device.  Old (V0/V1) nets must already be upgraded.
 * Errors (CT_ERR_INVALID / CT_ERR_NOTFOUND / CT_ERR_UNSUPPORTED) name the
 * layer and blob, e.g. "layer 'ip1': unknown bottom blob 'pool3'". */
ct_status ct_net_init(ct_net **out, const Caffe__NetParameter *param, const ct_net_opts *opts,
                      ct_context *ctx, ct_error *err);
void ct_net_free(ct_net *net);

/* Forward through every layer; *loss (may be NULL) gets the weighted sum of
 * the loss outputs.  Fails only on bad data (e.g. a label out of range, a
 * corrupt record) with the layer named.  On a GPU it waits for the device
 * once, at the end. */
ct_status ct_net_forward(ct_net *net, double *loss, ct_error *err);
ct_status ct_net_forward_range(ct_net *net, int start, int end, double *loss, ct_error *err);
/* Backward through the layers that need it, in reverse; calls the grad hook
 * after each layer whose backward finalised more of the flat gradient. */
void ct_net_backward(ct_net *net);

/* The pieces of a forward and backward for the runtime's programs
 * (src/runtime), which do not wait on each pass:
 *   ct_net_zero_loss            sets the loss sum (net->loss_dev on a GPU,
 *                               net->loss_host on the CPU) to 0;
 *   ct_net_forward_layer_async  layer i's forward, then its weighted loss
 *                               tops added to the sum on the device; errors
 *                               found on the host are returned at once,
 *                               device checks are deferred;
 *   ct_net_backward_layer       layer i's backward when it needs one;
 *   ct_net_loss_finish          waits for the device, reports a failed
 *                               deferred check with its layer's message
 *                               (and clears it), and gives the loss sum
 *                               (what ct_net_forward ends with).
 * On the CPU the same calls run synchronously. */
void ct_net_zero_loss(ct_net *net);
/* At a pass's start on a GPU: arms the work of the layers that depends on
 * their parameters only (ct_layer_prepare_async: Winograd's filter
 * transforms), which ct_net_forward_layer_async enqueues on the gradient
 * stream beside the forward of the layers below them, and makes the compute
 * stream wait for before the first such layer.  Nothing on the CPU or
 * without such layers.  ct_net_forward and the programs' begin call it. */
void ct_net_prepare_async(ct_net *net);
ct_status ct_net_forward_layer_async(ct_net *net, int i, ct_error *err);
void ct_net_backward_layer(ct_net *net, int i);
ct_status ct_net_loss_finish(ct_net *net, double *loss, ct_error *err);

/* Plans the blob memory anew (after shapes changed): values and diffs into
 * the pool.  Called by ct_net_init and ct_net_reshape unless the net keeps
 * every blob's arrays. */
ct_status ct_net_plan_blobs(ct_net *net, ct_error *err);
/* The plan of net's current shapes, without applying it (for tests and
 * reports); free with ct_net_blob_plan_free. */
ct_blob_plan *ct_net_blob_plan_make(const ct_net *net);
void ct_net_blob_plan_free(ct_blob_plan *plan);

/* Where a net's storage on its device goes, in bytes: the value arrays its
 * blobs own (views count nothing), the gradient arrays they own, the blob
 * pool (values and gradients by lifetime) and the zero buffer, the flat parameter and gradient buffers, and
 * what its layers' setup took besides (ct_layer.state_bytes). */
typedef struct ct_net_memory {
  size_t blob_data, blob_diffs, pool, flat, layer_state;
} ct_net_memory;
ct_net_memory ct_net_memory_split(const ct_net *net);
/* Zeroes the whole flat gradient buffer (once per iteration). */
void ct_net_clear_param_diffs(ct_net *net);
/* Re-propagates shapes after an input blob's shape changed. */
ct_status ct_net_reshape(ct_net *net, ct_error *err);

/* A hash of where the net's storage lives (blob data and diffs, the flat
 * buffers, the diff pool) and of its layout version: it changes when work
 * captured into a CUDA graph would touch stale memory. */
uint64_t ct_net_signature(const ct_net *net);

/* Counter-based draws of the context one forward pass takes (the layers
 * flagged CT_LAYER_DRAWS, in the TRAIN phase), so that a resumed run can
 * set the context's draw count where an uninterrupted one would be. */
int ct_net_draws_per_pass(const ct_net *net);

/* Lookups; NULL / -1 when absent. */
ct_tensor *ct_net_blob(const ct_net *net, const char *name);
int ct_net_layer_index(const ct_net *net, const char *name);

/* Copies weights from a trained NetParameter (V2 `layer` or upgraded V1) by
 * layer name: layers absent here are logged "Ignoring source layer X" and
 * skipped; a blob count or shape mismatch is an error naming the layer,
 * the blob and both shapes. */
ct_status ct_net_copy_trained(ct_net *net, const Caffe__NetParameter *trained, ct_error *err);
/* The same from a .caffemodel file (binary NetParameter). */
ct_status ct_net_copy_trained_file(ct_net *net, const char *path, ct_error *err);

/* Which layers took weights: ct_net_weights_begin forgets, each copy above
 * remembers the layers it filled; ct_net_weights_check then looks for layers
 * with parameters that none of the copies since filled (a weights file cut at
 * a layer boundary, or a layer renamed in the net or the file: the layer
 * keeps its random initial weights).  With strict it is CT_ERR_INVALID:
 *   "--weights a.caffemodel: layer 'ip2' (InnerProduct, 2 blobs) got no
 *    weights; its parameters stay as the fillers made them (renamed? the
 *    file has 'ip2_old' that this net has not)"
 * (up to 3 layers named, then "and N more"); otherwise the same text is
 * logged as a warning and CT_OK is returned.  `what` names the files
 * ("--weights a.caffemodel"); `hint` (may be NULL) is appended after "; ",
 * e.g. the flag that changes the behaviour. */
void ct_net_weights_begin(ct_net *net);
ct_status ct_net_weights_check(const ct_net *net, const char *what, bool strict, const char *hint,
                               ct_error *err);
/* Shares parameter storage (values and gradients) with other's layers of
 * the same name (Caffe's ShareTrainedLayersWith, used for test nets).  When
 * every parameter is then other's, this net's own flat buffers are freed
 * (flat_count becomes 0); other must outlive this net's use of them. */
void ct_net_share_trained(ct_net *net, const ct_net *other);

/* Writes the net with its parameters (and their gradients when write_diff)
 * as a binary NetParameter that BVLC Caffe reads, atomically. */
ct_status ct_net_save_caffemodel(const ct_net *net, const char *path, bool write_diff, ct_error *err);
/* The same message in memory (caller frees with ct_net_proto_free). */
Caffe__NetParameter *ct_net_to_proto(const ct_net *net, bool write_diff);
void ct_net_proto_free(Caffe__NetParameter *p);

/* After a non-finite loss: runs forward layer by layer and returns the index
 * of the first layer with a non-finite top value (-1 when none). */
int ct_net_first_nonfinite_layer(ct_net *net);

/* The NetState a net is built with (Caffe's merge): opts->phase, the
 * param's own level and stages, then opts' level (added) and stages
 * (appended).  state->stage borrows the strings; release the array with
 * ct_net_state_clear. */
void ct_net_state_make(const Caffe__NetParameter *param, const ct_net_opts *opts,
                       Caffe__NetState *state);
void ct_net_state_clear(Caffe__NetState *state);
/* Whether layer l is in a net of the given state: Caffe's include/exclude
 * rules (phase, level range, stages, not_stages), the one rule every part
 * of Cortado that asks "is this layer in the net" uses. */
bool ct_net_state_includes(const Caffe__NetState *state, const Caffe__LayerParameter *l);
/* Filters param by NetState rules into a new message (caller frees with
 * protobuf_c_message_free_unpacked).  Exposed for tests. */
ct_status ct_net_filter(const Caffe__NetParameter *param, const Caffe__NetState *state,
                        Caffe__NetParameter **out, ct_error *err);
/* Inserts Split layers (Caffe's naming) into net in place. */
ct_status ct_net_insert_splits(Caffe__NetParameter *net, ct_error *err);

/* Element types and memory orders (net_dtype.c): sets every layer's
 * forward_type to the type it runs in on device (the wanted type, precision
 * when precision_given, else the net's default_forward_type, where the
 * layer's type has a path for it; float32 otherwise) and its cortado_layout
 * to the order of its tops (NHWC for a 16-bit GPU layer whose type has a
 * channels-last path, the order of bottom 0 for element-wise types, NCHW
 * otherwise or where the prototxt pins it), and inserts Cast layers where a
 * layer reads a blob of another type or order.  A net that asks for float32
 * everywhere is left as it is.  Errors (CT_ERR_UNSUPPORTED): a forward_type
 * of INT or UINT. */
ct_status ct_net_plan_dtypes(Caffe__NetParameter *net, int device, ct_dtype precision,
                             bool precision_given, bool quiet, ct_error *err);
/* NVCaffe's Type as an element type (DOUBLE: float32, logged); what names
 * the field in messages.  Errors (CT_ERR_UNSUPPORTED): INT, UINT. */
ct_status ct_dtype_from_proto(Caffe__Type t, const char *what, ct_dtype *out, ct_error *err);
Caffe__Type ct_dtype_to_proto(ct_dtype t);

#ifdef __cplusplus
}
#endif

#endif
