/* Pipeline stages over a communicator: the plan and the iteration's program
 * (see stages.h; the boundary's buffers and steps are in stages_steps.c,
 * snapshots, agreement and timing in stages_host.c). */
#include "runtime/stages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/settings.h"
#include "gpu/gpu.h"
#include "runtime/stages_internal.h"
#include "runtime/steps.h"

/* The stage of `layer` among n stages of boundaries first. */
static int stage_in(const int *first, int n, int layer) {
  for (int s = 0; s < n; s++)
    if (layer < first[s + 1]) return s;
  CT_ASSERT(false);
  return -1;
}

static int stage_of(const ct_stages *pl, int layer) { return stage_in(pl->first, pl->nstages, layer); }

static bool writes(const ct_net *net, int layer, int blob) {
  for (int t = 0; t < net->layers[layer]->ntop; t++)
    if (net->top_ids[layer][t] == blob) return true;
  return false;
}

/* ------------------------------------------------------------------ plan */

/* The layer of np named `name` (the first of that name), or -1. */
static int layer_named(const Caffe__NetParameter *np, const char *name) {
  for (size_t i = 0; i < np->n_layer; i++)
    if (strcmp(np->layer[i]->name ? np->layer[i]->name : "", name) == 0) return (int)i;
  return -1;
}

static const char *layer_name(const Caffe__NetParameter *np, int i) {
  return np->layer[i]->name ? np->layer[i]->name : "";
}

/* The stage boundaries from the layer names: first (nafter + 2) gets
 * stage s as layers [first[s], first[s + 1]) of np (see stages.h for the
 * errors). */
static ct_status place_cuts(const Caffe__NetParameter *np, bool test, const char *const *after,
                            int nafter,
                            int *first, ct_error *err) {
  const int nlayers = (int)np->n_layer;
  for (int c = 0; c < nafter; c++) {
    const int i = layer_named(np, after[c]);
    if (i < 0) {
      char names[512] = "";
      size_t len = 0;
      for (int j = 0; j < nlayers && len + 4 < sizeof names; j++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", j ? ", " : "",
                                layer_name(np, j));
      return ct_error_set(err, CT_ERR_INVALID,
                          "--pipeline: no layer '%s' in the %s net '%s' (its layers: %s)%s",
                          after[c], test ? "test" : "train", np->name ? np->name : "", names,
                          test ? "; a test net is cut after the same layers as the train net" : "");
    }
    if (c > 0 && i <= first[c] - 1)
      return ct_error_set(err, CT_ERR_INVALID,
                          "--pipeline: split points must follow the net's order: '%s' (layer %d) "
                          "is not after '%s' (layer %d)",
                          after[c], i, after[c - 1], first[c] - 1);
    first[c + 1] = i + 1;
  }
  first[nafter + 1] = nlayers;
  if (nafter > 0 && first[nafter] >= nlayers)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--pipeline: stage %d would have no layers: '%s' is the net's last layer",
                        nafter, after[nafter - 1]);
  return CT_OK;
}

/* A parameter shared (ParamSpec name) by layers of two stages. */
static ct_status check_sharing(const Caffe__NetParameter *np, const int *first, int nstages,
                               ct_error *err) {
  for (int i = 0; i < (int)np->n_layer; i++)
    for (size_t k = 0; k < np->layer[i]->n_param; k++) {
      const char *name = np->layer[i]->param[k]->name;
      if (!name || !*name) continue;
      for (int j = 0; j < i; j++)
        for (size_t q = 0; q < np->layer[j]->n_param; q++) {
          const char *other = np->layer[j]->param[q]->name;
          const int si = stage_in(first, nstages, i), sj = stage_in(first, nstages, j);
          if (other && strcmp(other, name) == 0 && si != sj)
            return ct_error_set(err, CT_ERR_INVALID,
                                "--pipeline: parameter '%s' is shared by layers '%s' (stage %d) and "
                                "'%s' (stage %d); shared parameters must stay in one stage",
                                name, layer_name(np, j), sj, layer_name(np, i), si);
        }
    }
  return CT_OK;
}

/* The stages of the built train net np for `ranks` processes (replicas
 * of the stages): *first_out gets the (nstages + 1) boundaries (caller
 * frees), *nstages their count.  The cuts come from `after`, or when it is
 * NULL from the layers' pipeline_stage fields.  Errors: see
 * ct_stages_part. */
static ct_status plan_stages(const Caffe__NetParameter *np, bool test, const char *const *after,
                             int nafter,
                             int ranks, int **first_out, int *nstages, ct_error *err) {
  *first_out = NULL;
  const char **own = NULL;
  if (!after) {
    CT_TRY(ct_stages_cuts_from_param(np, &own, &nafter, err));
    after = own;
  }
  int *first = ct_xcalloc((size_t)nafter + 2, sizeof *first);
  const int n = nafter + 1;
  ct_status st = place_cuts(np, test, after, nafter, first, err);
  if (st == CT_OK && ranks % n != 0)
    st = ct_error_set(err, CT_ERR_INVALID,
                      "--pipeline: %d split point%s make%s %d stages, but %d ranks were started "
                      "(run mpirun -np %d: one rank per stage, or a multiple of %d for "
                      "data-parallel replicas of the stages)",
                      nafter, nafter == 1 ? "" : "s", nafter == 1 ? "s" : "", n, ranks, n, n);
  if (st == CT_OK) st = check_sharing(np, first, n, err);
  free(own);
  if (st != CT_OK) {
    free(first);
    return st;
  }
  *first_out = first;
  *nstages = n;
  return CT_OK;
}

ct_status ct_stages_part(void *cut_, const Caffe__NetParameter *built, int *first, int *end,
                         ct_error *err) {
  const ct_stages_cut *cut = cut_;
  int *bounds, n;
  CT_TRY(plan_stages(built, cut->test, cut->after, cut->nafter, cut->ranks, &bounds, &n, err));
  const int s = cut->rank % n;
  *first = bounds[s];
  *end = bounds[s + 1];
  free(bounds);
  return CT_OK;
}

/* The inputs of stage s: blobs its layers read before one of them writes
 * them, each with the stage of its last writer before s; n gets their
 * count.  Caller frees.  Errors: a blob no earlier layer writes. */
static ct_status stage_inputs(const ct_stages *pl, int s, ct_stages_crossing **out, int *n, ct_error *err) {
  const ct_net *net = pl->net;
  ct_stages_crossing *in = ct_xcalloc((size_t)net->nblobs + 1, sizeof *in);
  int k = 0;
  for (int i = pl->first[s]; i < pl->first[s + 1]; i++) {
    for (int b = 0; b < net->layers[i]->nbottom; b++) {
      const int blob = net->bottom_ids[i][b];
      bool inside = false, seen = false;
      for (int j = pl->first[s]; j < i && !inside; j++) inside = writes(net, j, blob);
      for (int q = 0; q < k && !seen; q++) seen = in[q].blob == blob;
      if (inside || seen) continue;
      int writer = -1;
      for (int j = pl->first[s] - 1; j >= 0 && writer < 0; j--)
        if (writes(net, j, blob)) writer = j;
      if (writer < 0) {
        free(in);
        return ct_error_set(err, CT_ERR_INVALID,
                            "--pipeline: blob '%s' (read by layer '%s' of stage %d) is written by "
                            "no layer before it: net inputs are not pipelined",
                            net->blobs[blob]->name, net->layers[i]->name, s);
      }
      in[k++] = (ct_stages_crossing){blob, stage_of(pl, writer), net->blob_need_backward[blob]};
    }
  }
  /* receive in the order of the sending stage, so that no two stages wait on each other */
  for (int a = 1; a < k; a++)
    for (int b = a; b > 0 && in[b].peer < in[b - 1].peer; b--) {
      ct_stages_crossing t = in[b];
      in[b] = in[b - 1];
      in[b - 1] = t;
    }
  *out = in;
  *n = k;
  return CT_OK;
}

/* This stage's outputs: the inputs of later stages that this one sends. */
static ct_status plan_outputs(ct_stages *pl, ct_error *err) {
  const ct_net *net = pl->net;
  pl->out = ct_xcalloc((size_t)net->nblobs * (size_t)pl->nstages + 1, sizeof *pl->out);
  /* diff_from[blob * nstages + sender]: the stage that sends that diff back (0: none yet) */
  int *diff_from = ct_xcalloc((size_t)net->nblobs * (size_t)pl->nstages + 1, sizeof *diff_from);
  ct_status st = CT_OK;
  for (int s = 1; s < pl->nstages && st == CT_OK; s++) {
    ct_stages_crossing *in = NULL;
    int n = 0;
    st = stage_inputs(pl, s, &in, &n, err);
    for (int k = 0; k < n && st == CT_OK; k++) {
      int *from = &diff_from[(size_t)in[k].blob * (size_t)pl->nstages + (size_t)in[k].peer];
      if (in[k].diff && *from)
        st = ct_error_set(err, CT_ERR_INVALID,
                          "--pipeline: the diff of blob '%s' would come back to stage %d from stages "
                          "%d and %d",
                          net->blobs[in[k].blob]->name, in[k].peer, *from, s);
      if (in[k].diff) *from = s;
      if (in[k].peer == pl->stage) pl->out[pl->nout++] = (ct_stages_crossing){in[k].blob, s, in[k].diff};
    }
    if (s == pl->stage && st == CT_OK) {
      pl->in = in;
      pl->nin = n;
    } else {
      free(in);
    }
  }
  free(diff_from);
  return st;
}

/* The ring: micro-batches in flight at once on this stage. */
static int ring_size(const ct_stages *pl) {
  if (pl->schedule == CT_STAGES_GPIPE) return pl->micro;
  const int inflight = pl->nstages - pl->stage;
  return inflight < pl->micro ? inflight : pl->micro;
}

/* Kept activations: every blob value the stage's backward reads (in blob
 * order) and the layers' backward state.  Errors: a layer that does not
 * say what its backward reads. */
static ct_status plan_kept(ct_stages *pl, ct_error *err) {
  ct_net *net = pl->net;
  const int lo = pl->first[pl->stage], hi = pl->first[pl->stage + 1];
  bool *read = ct_xcalloc((size_t)net->nblobs + 1, sizeof *read);
  pl->regions = ct_xcalloc((size_t)(hi - lo) * CT_LAYER_MAX_STATE + 1, sizeof *pl->regions);
  for (int i = lo; i < hi; i++) {
    ct_layer *l = net->layers[i];
    if (!ct_layer_keeps_microbatches(l)) {
      free(read);
      return ct_error_set(err, CT_ERR_UNSUPPORTED,
                          "--recompute=false: layer '%s' (%s) of stage %d does not say what its "
                          "backward keeps of its forward, so its micro-batches cannot be kept; "
                          "recompute them (--recompute=true)",
                          l->name, l->ops->type, pl->stage);
    }
    bool *bottoms = ct_xcalloc((size_t)l->nbottom + 1, sizeof *bottoms);
    bool *tops = ct_xcalloc((size_t)l->ntop + 1, sizeof *tops);
    if (l->ops->backward_cpu && !(l->ops->flags & CT_LAYER_NO_BACKWARD) && !l->absorbed)
      ct_layer_backward_reads(l, bottoms, tops);
    else
      ct_layer_reads_no_values(l, bottoms, tops);
    for (int b = 0; b < l->nbottom; b++) read[net->bottom_ids[i][b]] |= bottoms[b];
    for (int t = 0; t < l->ntop; t++) read[net->top_ids[i][t]] |= tops[t];
    free(bottoms);
    free(tops);
    ct_layer_region r[CT_LAYER_MAX_STATE];
    const int n = ct_layer_backward_state(l, r, CT_LAYER_MAX_STATE);
    for (int k = 0; k < n; k++) pl->regions[pl->nregions++] = (ct_stages_region){i, k, r[k].bytes, 0};
  }
  pl->stash = ct_xcalloc((size_t)net->nblobs + 1, sizeof *pl->stash);
  for (int b = 0; b < net->nblobs; b++)
    if (read[b]) pl->stash[pl->nstash++] = (ct_stages_stashed){b, -1, 0};
  free(read);
  for (int k = 0; k < pl->nstash; k++) {
    pl->stash[k].offset = pl->stash_bytes;
    pl->stash_bytes += 4 * ct_stages_words(ct_stages_blob_bytes(pl, pl->stash[k].blob));
  }
  for (int k = 0; k < pl->nregions; k++) {
    pl->regions[k].offset = pl->stash_bytes;
    pl->stash_bytes += 4 * ct_stages_words(pl->regions[k].bytes);
  }
  pl->stash_data = ct_mem_alloc(pl->device, pl->stash_bytes * (size_t)pl->ring + 1);
  return CT_OK;
}

/* The stash: the inputs, then the tops of the stage's data layers (kept
 * activations: plan_kept). */
static ct_status plan_stash(ct_stages *pl, ct_error *err) {
  const ct_net *net = pl->net;
  /* one micro-batch, or the last stage under 1F1B (each backward follows
   * its own forward): nothing is ever recomputed */
  if (pl->micro == 1 || (pl->schedule == CT_STAGES_1F1B && pl->stage == pl->nstages - 1)) return CT_OK;
  if (pl->keep) return plan_kept(pl, err);
  int n = pl->nin;
  for (int i = pl->first[pl->stage]; i < pl->first[pl->stage + 1]; i++)
    if (net->layers[i]->nbottom == 0) n += net->layers[i]->ntop;
  pl->stash = ct_xcalloc((size_t)n + 1, sizeof *pl->stash);
  for (int k = 0; k < pl->nin; k++) pl->stash[pl->nstash++] = (ct_stages_stashed){pl->in[k].blob, -1, 0};
  for (int i = pl->first[pl->stage]; i < pl->first[pl->stage + 1]; i++)
    for (int t = 0; net->layers[i]->nbottom == 0 && t < net->layers[i]->ntop; t++)
      pl->stash[pl->nstash++] = (ct_stages_stashed){net->top_ids[i][t], i, 0};
  for (int k = 0; k < pl->nstash; k++) {
    pl->stash[k].offset = pl->stash_bytes;
    pl->stash_bytes += 4 * ct_stages_words(ct_stages_blob_bytes(pl, pl->stash[k].blob));
  }
  pl->stash_data = ct_mem_alloc(pl->device, pl->stash_bytes * (size_t)pl->ring);
  return CT_OK;
}

ct_status ct_stages_create(ct_stages **out, ct_net *net, ct_comm *comm, const char *const *after,
                           int nafter, int microbatches, const ct_stages_opts *opts,
                           ct_error *err) {
  *out = NULL;
  CT_ASSERT(microbatches >= 1 && nafter >= 0);
  ct_stages *pl = ct_xcalloc(1, sizeof *pl);
  pl->net = net;
  pl->comm = comm;
  pl->device = net->ctx->device;
  pl->stage = comm->rank;
  pl->micro = microbatches;
  pl->schedule = opts ? opts->schedule : CT_STAGES_GPIPE;
  pl->keep = opts && opts->keep_activations;
  ct_status st = plan_stages(net->param, net->phase == CT_PHASE_TEST, after, nafter, comm->size,
                             &pl->first, &pl->nstages, err);
  if (st == CT_OK && comm->size != pl->nstages)
    st = ct_error_set(err, CT_ERR_INVALID,
                      "--pipeline: %d stages over a communicator of %d ranks (give the ranks of "
                      "one replica)",
                      pl->nstages, comm->size);
  if (st == CT_OK && (net->part_first != pl->first[pl->stage] || net->part_end != pl->first[pl->stage + 1]))
    st = ct_error_set(err, CT_ERR_INVALID,
                      "--pipeline: the train net holds layers %d-%d, but stage %d is layers %d-%d "
                      "(build it with ct_stages_part of the same cuts)",
                      net->part_first, net->part_end - 1, pl->stage, pl->first[pl->stage],
                      pl->first[pl->stage + 1] - 1);
  /* MPI promises tags up to 32767 */
  if (st == CT_OK && CT_STAGES_TAGS(net->nblobs) > 32767)
    st = ct_error_set(err, CT_ERR_UNSUPPORTED,
                      "--pipeline: the net has %d blobs, more than the message tags a stage "
                      "boundary can name (2 x blobs + 2 <= 32767)",
                      net->nblobs);
  if (st == CT_OK && pl->stage == 0) st = stage_inputs(pl, 0, &pl->in, &pl->nin, err);
  if (st == CT_OK) st = plan_outputs(pl, err);
  if (st == CT_OK) {
    pl->ring = ring_size(pl);
    st = plan_stash(pl, err);
  }
  if (st != CT_OK) {
    ct_stages_free(pl);
    return st;
  }
  ct_stages_plan_buffers(pl);
  pl->output_stage = ct_xcalloc((size_t)net->noutputs + 1, sizeof *pl->output_stage);
  size_t widest = 0;
  for (int k = 0; k < net->noutputs; k++) {
    const int blob = net->output_ids[k];
    for (int j = net->nlayers - 1; j >= 0; j--)
      if (writes(net, j, blob)) {
        pl->output_stage[k] = stage_of(pl, j);
        break;
      }
    pl->output_count += net->blobs[blob]->count;
    const size_t bytes = ct_stages_blob_bytes(pl, blob);
    if (bytes > widest) widest = bytes;
  }
  pl->output_host = ct_xcalloc(widest + 1, 1);
  pl->stats = ct_xcalloc((size_t)pl->nstages * CT_STAGES_NSTATS, sizeof *pl->stats);
  pl->hist_total = -1; /* counted at the first need (ct_stages_history_span) */
  /* the peaks of training, not of the build */
  ct_mem_host_reset_peak();
  if (pl->device != CT_DEVICE_CPU) ct_gpu_memory_reset_peak(pl->device);
  *out = pl;
  return CT_OK;
}

ct_status ct_stages_cuts_from_param(const Caffe__NetParameter *np, const char ***after, int *n,
                                    ct_error *err) {
  *after = NULL;
  *n = 0;
  const int nlayers = (int)np->n_layer;
  const char **names = ct_xcalloc((size_t)nlayers + 1, sizeof *names);
  int stage = 0, count = 0;
  for (int i = 0; i < nlayers; i++) {
    const Caffe__LayerParameter *lp = np->layer[i];
    if (!lp->has_pipeline_stage || lp->pipeline_stage == stage) continue;
    if (lp->pipeline_stage != stage + 1 || i == 0) {
      free(names);
      return ct_error_set(err, CT_ERR_INVALID,
                          "layer '%s': pipeline_stage %d after stage %d: stages start at 0 and go "
                          "up one at a time through the net",
                          lp->name ? lp->name : "", (int)lp->pipeline_stage, stage);
    }
    names[count++] = layer_name(np, i - 1);
    stage++;
  }
  if (count == 0) {
    free(names);
    return CT_OK;
  }
  *after = names;
  *n = count;
  return CT_OK;
}

void ct_stages_free(ct_stages *pl) {
  if (!pl) return;
  free(pl->first);
  free(pl->in);
  free(pl->out);
  free(pl->stash);
  free(pl->regions);
  if (pl->stash_data) ct_mem_free(pl->device, pl->stash_data);
  free(pl->output_stage);
  free(pl->output_host);
  ct_stages_free_buffers(pl);
  free(pl->stats);
  free(pl);
}

int ct_stages_stage(const ct_stages *pl) { return pl->stage; }
int ct_stages_count(const ct_stages *pl) { return pl->nstages; }

typedef struct {
  ct_stages *pl;
  int micro;
} stash_placer;

static void add(ct_program *p, ct_stages *pl, ct_program_fn fn, int arg, const char *what,
                ct_step_kind kind, size_t bytes) {
  ct_program_add(p, (ct_program_step){.run = fn, .user = pl, .arg = arg, .what = what, .kind = kind,
                                      .bytes = bytes});
}

/* After a data layer's forward: its tops into the stash. */
static void stash_tops(void *user, ct_program *p, int layer) {
  const stash_placer *sp = user;
  ct_stages *pl = sp->pl;
  for (int k = pl->nin; k < pl->nstash; k++)
    if (pl->stash[k].layer == layer)
      add(p, pl, ct_stages_step_stash, sp->micro * pl->nstash + k, pl->net->blobs[pl->stash[k].blob]->name,
          CT_STEP_STASH, ct_stages_blob_bytes(pl, pl->stash[k].blob));
}

/* One micro-batch's forward: receive (from the receives posted ahead when
 * `posted`), (stash its inputs,) compute, (keep its activations,) send,
 * its loss. */
static void add_forward(ct_stages *pl, ct_program *p, int m, bool posted, bool stash, bool keep,
                        const ct_program_step *pass_loss) {
  ct_net *net = pl->net;
  for (int k = 0; k < pl->nin; k++) {
    const char *name = net->blobs[pl->in[k].blob]->name;
    if (posted) add(p, pl, ct_stages_step_take, m * pl->nin + k, name, CT_STEP_RECV, ct_stages_blob_bytes(pl, pl->in[k].blob));
    else add(p, pl, ct_stages_step_recv, k, name, CT_STEP_RECV, ct_stages_blob_bytes(pl, pl->in[k].blob));
    if (stash) add(p, pl, ct_stages_step_stash, m * pl->nstash + k, name, CT_STEP_STASH, ct_stages_blob_bytes(pl, pl->in[k].blob));
  }
  stash_placer sp = {pl, m};
  add(p, pl, ct_stages_step_mark, 0, "forward begins", CT_STEP_MARK, 0);
  ct_steps_forward_range(p, net, pl->first[pl->stage], pl->first[pl->stage + 1], false,
                         stash ? stash_tops : NULL, &sp);
  add(p, pl, ct_stages_step_mark_end, 0, "forward ends", CT_STEP_MARK, 0);
  if (keep) add(p, pl, ct_stages_step_keep, m, "activations", CT_STEP_STASH, pl->stash_bytes);
  for (int k = 0; k < pl->nout; k++)
    add(p, pl, ct_stages_step_send, m * pl->nout + k, net->blobs[pl->out[k].blob]->name, CT_STEP_SEND,
        ct_stages_blob_bytes(pl, pl->out[k].blob));
  if (pass_loss) ct_program_add(p, *pass_loss);
}

/* The last micro-batch's backward: what the runtime places in it. */
typedef struct {
  const ct_program_step *begin;
  void (*after)(void *user, ct_program *p, int layer);
  void *user;
} last_placer;

/* One micro-batch's backward; unless its activations are the ones in the
 * blobs (*live), they are put back from the stash first (kept), or its
 * forward is recomputed from its stash. */
static void add_backward(ct_stages *pl, ct_program *p, int m, int *live, const last_placer *last) {
  ct_net *net = pl->net;
  const int lo = pl->first[pl->stage], hi = pl->first[pl->stage + 1];
  if (*live != m && pl->keep) {
    CT_ASSERT(pl->stash_data);
    add(p, pl, ct_stages_step_restore, m, "activations", CT_STEP_RESTORE, pl->stash_bytes);
    *live = m;
  }
  if (*live != m) {
    CT_ASSERT(pl->stash_data);
    add(p, pl, ct_stages_step_restore, m, "micro-batch", CT_STEP_RESTORE, pl->stash_bytes);
    add(p, pl, ct_stages_step_mark, 1, "backward begins", CT_STEP_MARK, 0);
    add(p, pl, ct_stages_step_keep_loss, 0, "loss kept", CT_STEP_LOSS, 0);
    ct_steps_forward_range(p, net, lo, hi, true, NULL, NULL);
    add(p, pl, ct_stages_step_keep_loss, 1, "recomputed loss dropped", CT_STEP_LOSS, 0);
    add(p, pl, ct_stages_step_mark_end, 1, "recomputation ends", CT_STEP_MARK, 0);
    *live = m;
  }
  for (int k = 0; k < pl->nout; k++)
    if (pl->out[k].diff)
      add(p, pl, pl->rreqs ? ct_stages_step_take_diff : ct_stages_step_recv_diff, pl->rreqs ? m * pl->nout + k : k,
          net->blobs[pl->out[k].blob]->name, CT_STEP_RECV, ct_stages_blob_bytes(pl, pl->out[k].blob));
  add(p, pl, ct_stages_step_mark, 1, "backward begins", CT_STEP_MARK, 0);
  if (last && last->begin) ct_program_add(p, *last->begin);
  ct_steps_backward_range(p, net, lo, hi, last ? last->after : NULL, last ? last->user : NULL);
  add(p, pl, ct_stages_step_mark_end, 1, "backward ends", CT_STEP_MARK, 0);
  for (int k = 0; k < pl->nin; k++)
    if (pl->in[k].diff)
      add(p, pl, ct_stages_step_send_diff, m * pl->nin + k, net->blobs[pl->in[k].blob]->name, CT_STEP_SEND,
          ct_stages_blob_bytes(pl, pl->in[k].blob));
}

void ct_stages_build(ct_stages *pl, ct_program *p, const ct_program_step *pass_loss,
                     const ct_program_step *last_begin,
                     void (*last_after)(void *user, ct_program *p, int layer), void *last_user) {
  const bool stash = pl->stash_data && !pl->keep, keep = pl->stash_data && pl->keep;
  const last_placer last = {last_begin, last_after, last_user};
  /* the training program posts its receives ahead (the forward-only one
   * receives as it goes: it shares the blobs, not the ring) */
  if (!pl->rreqs && ct_comm_has_irecv(pl->comm) && ct_setting_bool("CORTADO_PIPELINE_POST_RECEIVES"))
    ct_stages_plan_posted(pl);
  const bool posted = pl->rreqs != NULL;
  add(p, pl, ct_stages_step_iteration_begin, 0, "iteration begins", CT_STEP_MARK, 0);
  if (posted) add(p, pl, ct_stages_step_post, 0, "receives posted", CT_STEP_RECV, 0);
  /* GPipe: every forward first.  1F1B: stage s runs P - s - 1 forwards
   * ahead, then one forward and one backward in turn, then the rest of the
   * backwards.  Backwards run in micro-batch order either way. */
  int ahead = pl->micro;
  if (pl->schedule == CT_STAGES_1F1B) {
    ahead = pl->nstages - pl->stage - 1;
    if (ahead > pl->micro) ahead = pl->micro;
  }
  int live = -1, next_b = 0;
  for (int m = 0; m < pl->micro; m++) {
    add_forward(pl, p, m, posted, stash, keep, pass_loss);
    live = m;
    if (m >= ahead) {
      add_backward(pl, p, next_b, &live, next_b == pl->micro - 1 ? &last : NULL);
      next_b++;
    }
  }
  for (; next_b < pl->micro; next_b++)
    add_backward(pl, p, next_b, &live, next_b == pl->micro - 1 ? &last : NULL);
  add(p, pl, ct_stages_step_send_join, 0, "send join", CT_STEP_SEND, 0);
}

void ct_stages_build_forward(ct_stages *pl, ct_program *p) {
  add_forward(pl, p, 0, false, false, false, NULL);
  add(p, pl, ct_stages_step_send_join, 0, "send join", CT_STEP_SEND, 0);
}
