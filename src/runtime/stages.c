/* Pipeline stages over a communicator (see stages.h). */
#include "runtime/stages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "runtime/steps.h"

/* A blob crossing a stage boundary: for an input, peer is the stage that
 * sends it; for an output, the stage it goes to. */
typedef struct {
  int blob;
  int peer;
  bool diff; /* its diff comes back */
} crossing;

/* A blob kept per micro-batch: a received input (layer -1, stashed after
 * its receive) or a data layer's top (stashed after that layer). */
typedef struct {
  int blob;
  int layer;
  size_t offset; /* in a micro-batch's part of the stash */
} stashed;

struct ct_stages {
  ct_net *net;
  ct_comm *comm;
  int stage, nstages, micro;
  int *first;           /* (nstages + 1) stage s is layers [first[s], first[s + 1]) */
  int nin, nout;
  crossing *in, *out;   /* (nin), (nout) in the order of (peer, blob) */
  int nstash;
  stashed *stash;       /* (nstash) inputs first, then the data layers' tops */
  size_t stash_count;   /* values per micro-batch */
  float *stash_data;    /* (micro * stash_count) */
  ct_stages_schedule schedule;
  /* Sends return at once and complete at the iteration's end (send join):
   * micro-batch m's values of output k travel from sendbuf + m * send_count
   * + out_off[k], the diff of input k from ... + in_off[k]. */
  size_t *out_off, *in_off; /* (nout), (nin) */
  size_t send_count;        /* values per micro-batch */
  float *sendbuf;           /* (micro * send_count) */
  void **reqs;              /* (micro * (nout + nin)) pending sends, NULL: none */
  int *output_stage;    /* (net->noutputs) the stage that computes each net output */
  size_t output_count;  /* values of all net outputs */
};

static int stage_of(const ct_stages *pl, int layer) {
  for (int s = 0; s < pl->nstages; s++)
    if (layer < pl->first[s + 1]) return s;
  CT_ASSERT(false);
  return -1;
}

static bool writes(const ct_net *net, int layer, int blob) {
  for (int t = 0; t < net->layers[layer]->ntop; t++)
    if (net->top_ids[layer][t] == blob) return true;
  return false;
}

/* The inputs of stage s: blobs its layers read before one of them writes
 * them, each with the stage of its last writer before s; n gets their
 * count.  Caller frees.  Errors: a blob no earlier layer writes. */
static ct_status stage_inputs(const ct_stages *pl, int s, crossing **out, int *n, ct_error *err) {
  const ct_net *net = pl->net;
  crossing *in = ct_xcalloc((size_t)net->nblobs + 1, sizeof *in);
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
      in[k++] = (crossing){blob, stage_of(pl, writer), net->blob_need_backward[blob]};
    }
  }
  /* receive in the order of the sending stage, so that no two stages wait on each other */
  for (int a = 1; a < k; a++)
    for (int b = a; b > 0 && in[b].peer < in[b - 1].peer; b--) {
      crossing t = in[b];
      in[b] = in[b - 1];
      in[b - 1] = t;
    }
  *out = in;
  *n = k;
  return CT_OK;
}

/* The stage boundaries from the layer names (see stages.h for the errors). */
static ct_status place_cuts(ct_stages *pl, const char *const *after, int nafter, ct_error *err) {
  const ct_net *net = pl->net;
  pl->first = ct_xcalloc((size_t)nafter + 2, sizeof *pl->first);
  for (int c = 0; c < nafter; c++) {
    const int i = ct_net_layer_index(net, after[c]);
    if (i < 0) {
      char names[512] = "";
      size_t len = 0;
      for (int j = 0; j < net->nlayers && len + 4 < sizeof names; j++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", j ? ", " : "",
                                net->layers[j]->name);
      return ct_error_set(err, CT_ERR_INVALID, "--pipeline: no layer '%s' in the train net '%s' (its layers: %s)",
                          after[c], net->name ? net->name : "", names);
    }
    if (c > 0 && i <= pl->first[c] - 1)
      return ct_error_set(err, CT_ERR_INVALID,
                          "--pipeline: split points must follow the net's order: '%s' (layer %d) "
                          "is not after '%s' (layer %d)",
                          after[c], i, after[c - 1], pl->first[c] - 1);
    pl->first[c + 1] = i + 1;
  }
  pl->first[nafter + 1] = net->nlayers;
  if (nafter > 0 && pl->first[nafter] >= net->nlayers)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--pipeline: stage %d would have no layers: '%s' is the net's last layer",
                        nafter, after[nafter - 1]);
  return CT_OK;
}

/* Nets the plan cannot train as one process would (see stages.h). */
static ct_status check_net(const ct_stages *pl, ct_error *err) {
  const ct_net *net = pl->net;
  for (int i = 0; i < net->nlayers; i++) {
    const ct_layer *l = net->layers[i];
    if (pl->micro > 1 && strcmp(l->ops->type, "BatchNorm") == 0)
      return ct_error_set(err, CT_ERR_INVALID,
                          "--pipeline with %d micro-batches: layer '%s' is BatchNorm, whose "
                          "forward would update its statistics again when a micro-batch is "
                          "recomputed for its backward; use one micro-batch (--microbatches=1)",
                          pl->micro, l->name);
  }
  const Caffe__NetParameter *np = net->param;
  if ((int)np->n_layer != net->nlayers) return CT_OK;
  for (int i = 0; i < net->nlayers; i++)
    for (size_t k = 0; k < np->layer[i]->n_param; k++) {
      const char *name = np->layer[i]->param[k]->name;
      if (!name || !*name) continue;
      for (int j = 0; j < i; j++)
        for (size_t q = 0; q < np->layer[j]->n_param; q++) {
          const char *other = np->layer[j]->param[q]->name;
          if (other && strcmp(other, name) == 0 && stage_of(pl, i) != stage_of(pl, j))
            return ct_error_set(err, CT_ERR_INVALID,
                                "--pipeline: parameter '%s' is shared by layers '%s' (stage %d) and "
                                "'%s' (stage %d); shared parameters must stay in one stage",
                                name, np->layer[j]->name, stage_of(pl, j), np->layer[i]->name,
                                stage_of(pl, i));
        }
    }
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
    crossing *in = NULL;
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
      if (in[k].peer == pl->stage) pl->out[pl->nout++] = (crossing){in[k].blob, s, in[k].diff};
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

/* The stash: the inputs, then the tops of the stage's data layers. */
static void plan_stash(ct_stages *pl) {
  const ct_net *net = pl->net;
  /* one micro-batch, or the last stage under 1F1B (each backward follows
   * its own forward): nothing is ever recomputed */
  if (pl->micro == 1 || (pl->schedule == CT_STAGES_1F1B && pl->stage == pl->nstages - 1)) return;
  int n = pl->nin;
  for (int i = pl->first[pl->stage]; i < pl->first[pl->stage + 1]; i++)
    if (net->layers[i]->nbottom == 0) n += net->layers[i]->ntop;
  pl->stash = ct_xcalloc((size_t)n + 1, sizeof *pl->stash);
  for (int k = 0; k < pl->nin; k++) pl->stash[pl->nstash++] = (stashed){pl->in[k].blob, -1, 0};
  for (int i = pl->first[pl->stage]; i < pl->first[pl->stage + 1]; i++)
    for (int t = 0; net->layers[i]->nbottom == 0 && t < net->layers[i]->ntop; t++)
      pl->stash[pl->nstash++] = (stashed){net->top_ids[i][t], i, 0};
  for (int k = 0; k < pl->nstash; k++) {
    pl->stash[k].offset = pl->stash_count;
    pl->stash_count += net->blobs[pl->stash[k].blob]->count;
  }
  pl->stash_data = ct_xcalloc(pl->stash_count * (size_t)pl->micro + 1, sizeof(float));
}

/* The send buffers (see the struct). */
static void plan_sends(ct_stages *pl) {
  pl->out_off = ct_xcalloc((size_t)pl->nout + 1, sizeof *pl->out_off);
  pl->in_off = ct_xcalloc((size_t)pl->nin + 1, sizeof *pl->in_off);
  for (int k = 0; k < pl->nout; k++) {
    pl->out_off[k] = pl->send_count;
    pl->send_count += pl->net->blobs[pl->out[k].blob]->count;
  }
  for (int k = 0; k < pl->nin; k++) {
    pl->in_off[k] = pl->send_count;
    if (pl->in[k].diff) pl->send_count += pl->net->blobs[pl->in[k].blob]->count;
  }
  pl->sendbuf = ct_xcalloc(pl->send_count * (size_t)pl->micro + 1, sizeof(float));
  pl->reqs = ct_xcalloc((size_t)pl->micro * (size_t)(pl->nout + pl->nin) + 1, sizeof *pl->reqs);
}

ct_status ct_stages_create(ct_stages **out, ct_net *net, ct_comm *comm, const char *const *after,
                             int nafter, int microbatches, ct_stages_schedule schedule, ct_error *err) {
  *out = NULL;
  CT_ASSERT(microbatches >= 1 && nafter >= 0);
  if (net->ctx->device != CT_DEVICE_CPU)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "--pipeline: stages run on CPU ranks only for now (GPU stages are not "
                        "written yet)");
  ct_stages *pl = ct_xcalloc(1, sizeof *pl);
  pl->net = net;
  pl->comm = comm;
  pl->stage = comm->rank;
  pl->nstages = nafter + 1;
  pl->micro = microbatches;
  pl->schedule = schedule;
  ct_status st = place_cuts(pl, after, nafter, err);
  if (st == CT_OK && comm->size != pl->nstages)
    st = ct_error_set(err, CT_ERR_INVALID,
                      "--pipeline: %d split point%s make%s %d stages, but %d ranks were started "
                      "(run mpirun -np %d: one rank per stage)",
                      nafter, nafter == 1 ? "" : "s", nafter == 1 ? "s" : "", pl->nstages,
                      comm->size, pl->nstages);
  /* tags: blobs, their diffs, then the parameters of a gather; MPI promises 32767 */
  if (st == CT_OK && 2 * net->nblobs + net->nparams > 32767)
    st = ct_error_set(err, CT_ERR_UNSUPPORTED,
                      "--pipeline: the net has %d blobs and %d parameters, more than the message "
                      "tags a stage boundary can name (2 x blobs + parameters <= 32767)",
                      net->nblobs, net->nparams);
  if (st == CT_OK) st = check_net(pl, err);
  if (st == CT_OK && pl->stage == 0) st = stage_inputs(pl, 0, &pl->in, &pl->nin, err);
  if (st == CT_OK) st = plan_outputs(pl, err);
  if (st != CT_OK) {
    ct_stages_free(pl);
    return st;
  }
  plan_stash(pl);
  plan_sends(pl);
  pl->output_stage = ct_xcalloc((size_t)net->noutputs + 1, sizeof *pl->output_stage);
  for (int k = 0; k < net->noutputs; k++) {
    const int blob = net->output_ids[k];
    for (int j = net->nlayers - 1; j >= 0; j--)
      if (writes(net, j, blob)) {
        pl->output_stage[k] = stage_of(pl, j);
        break;
      }
    pl->output_count += net->blobs[blob]->count;
  }
  *out = pl;
  return CT_OK;
}

ct_status ct_stages_cuts_from_net(const ct_net *net, const char ***after, int *n, ct_error *err) {
  *after = NULL;
  *n = 0;
  const Caffe__NetParameter *np = net->param;
  CT_ASSERT((int)np->n_layer == net->nlayers);
  const char **names = ct_xcalloc((size_t)net->nlayers + 1, sizeof *names);
  int stage = 0, count = 0;
  for (int i = 0; i < net->nlayers; i++) {
    const Caffe__LayerParameter *lp = np->layer[i];
    if (!lp->has_pipeline_stage || lp->pipeline_stage == stage) continue;
    if (lp->pipeline_stage != stage + 1 || i == 0) {
      free(names);
      return ct_error_set(err, CT_ERR_INVALID,
                          "layer '%s': pipeline_stage %d after stage %d: stages start at 0 and go "
                          "up one at a time through the net",
                          lp->name ? lp->name : "", (int)lp->pipeline_stage, stage);
    }
    names[count++] = net->layers[i - 1]->name;
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
  free(pl->stash_data);
  free(pl->output_stage);
  free(pl->out_off);
  free(pl->in_off);
  free(pl->sendbuf);
  free(pl->reqs);
  free(pl);
}

int ct_stages_stage(const ct_stages *pl) { return pl->stage; }
int ct_stages_count(const ct_stages *pl) { return pl->nstages; }

/* ------------------------------------------------------------------ steps */

/* Tags: a blob's values travel with its index, its diff with nblobs more. */
static int data_tag(const ct_stages *pl, int blob) { return blob; }
static int diff_tag(const ct_stages *pl, int blob) { return pl->net->nblobs + blob; }

static ct_status step_recv(void *user, int k, ct_error *err) {
  ct_stages *pl = user;
  const ct_tensor *t = pl->net->blobs[pl->in[k].blob];
  return ct_comm_recv(pl->comm, ct_f32(t), t->count, pl->in[k].peer, data_tag(pl, pl->in[k].blob),
                      NULL, err);
}

/* arg: micro-batch * nout + output k */
static ct_status step_send(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  const int m = arg / (pl->nout ? pl->nout : 1), k = arg % (pl->nout ? pl->nout : 1);
  const ct_tensor *t = pl->net->blobs[pl->out[k].blob];
  float *buf = pl->sendbuf + (size_t)m * pl->send_count + pl->out_off[k];
  CT_ASSERT(pl->reqs[arg] == NULL);
  memcpy(buf, ct_f32(t), t->count * sizeof(float));
  return ct_comm_isend(pl->comm, buf, t->count, pl->out[k].peer, data_tag(pl, pl->out[k].blob),
                       &pl->reqs[arg], err);
}

static ct_status step_recv_diff(void *user, int k, ct_error *err) {
  ct_stages *pl = user;
  const ct_tensor *t = pl->net->blobs[pl->out[k].blob];
  return ct_comm_recv(pl->comm, ct_f32_diff(t), t->count, pl->out[k].peer,
                      diff_tag(pl, pl->out[k].blob), NULL, err);
}

/* arg: micro-batch * nin + input k */
static ct_status step_send_diff(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  const int m = arg / pl->nin, k = arg % pl->nin;
  const ct_tensor *t = pl->net->blobs[pl->in[k].blob];
  float *buf = pl->sendbuf + (size_t)m * pl->send_count + pl->in_off[k];
  void **req = &pl->reqs[(size_t)pl->micro * (size_t)pl->nout + (size_t)arg];
  CT_ASSERT(*req == NULL);
  memcpy(buf, ct_f32_diff(t), t->count * sizeof(float));
  return ct_comm_isend(pl->comm, buf, t->count, pl->in[k].peer, diff_tag(pl, pl->in[k].blob), req,
                       err);
}

/* The iteration's sends complete (their buffers are reused next time). */
static ct_status step_send_join(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  ct_status st = CT_OK;
  for (int i = 0; i < pl->micro * (pl->nout + pl->nin); i++) {
    if (st == CT_OK) st = ct_comm_send_wait(pl->comm, pl->reqs[i], err);
    else free(pl->reqs[i]);
    pl->reqs[i] = NULL;
  }
  return st;
}

/* arg: micro-batch * nstash + the stashed blob */
static ct_status step_stash(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  const stashed *s = &pl->stash[arg % pl->nstash];
  const ct_tensor *t = pl->net->blobs[s->blob];
  CT_ASSERT(s->offset + t->count <= pl->stash_count);
  float *dst = pl->stash_data + (size_t)(arg / pl->nstash) * pl->stash_count + s->offset;
  memcpy(dst, ct_f32(t), t->count * sizeof(float));
  return CT_OK;
}

/* arg: the micro-batch */
static ct_status step_restore(void *user, int m, ct_error *err) {
  ct_stages *pl = user;
  for (int k = 0; k < pl->nstash; k++) {
    const ct_tensor *t = pl->net->blobs[pl->stash[k].blob];
    memcpy(ct_f32(t), pl->stash_data + (size_t)m * pl->stash_count + pl->stash[k].offset,
           t->count * sizeof(float));
  }
  return CT_OK;
}

/* The recomputed forward added its loss again: the pass's was counted. */
static ct_status step_drop_loss(void *user, int arg, ct_error *err) {
  ct_stages *pl = user;
  pl->net->loss_host = 0;
  return CT_OK;
}

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
      add(p, pl, step_stash, sp->micro * pl->nstash + k, pl->net->blobs[pl->stash[k].blob]->name,
          CT_STEP_STASH, pl->net->blobs[pl->stash[k].blob]->count * sizeof(float));
}

static size_t blob_bytes(const ct_stages *pl, int blob) {
  return pl->net->blobs[blob]->count * sizeof(float);
}

/* One micro-batch's forward: receive, (stash,) compute, send, its loss. */
static void add_forward(ct_stages *pl, ct_program *p, int m, bool stash,
                        const ct_program_step *pass_loss) {
  ct_net *net = pl->net;
  for (int k = 0; k < pl->nin; k++) {
    const char *name = net->blobs[pl->in[k].blob]->name;
    add(p, pl, step_recv, k, name, CT_STEP_RECV, blob_bytes(pl, pl->in[k].blob));
    if (stash) add(p, pl, step_stash, m * pl->nstash + k, name, CT_STEP_STASH, blob_bytes(pl, pl->in[k].blob));
  }
  stash_placer sp = {pl, m};
  ct_steps_forward_range(p, net, pl->first[pl->stage], pl->first[pl->stage + 1], false,
                         stash ? stash_tops : NULL, &sp);
  for (int k = 0; k < pl->nout; k++)
    add(p, pl, step_send, m * pl->nout + k, net->blobs[pl->out[k].blob]->name, CT_STEP_SEND,
        blob_bytes(pl, pl->out[k].blob));
  if (pass_loss) ct_program_add(p, *pass_loss);
}

/* One micro-batch's backward; its forward is recomputed from its stash
 * first unless its activations are the ones in the blobs (*live). */
static void add_backward(ct_stages *pl, ct_program *p, int m, int *live) {
  ct_net *net = pl->net;
  const int lo = pl->first[pl->stage], hi = pl->first[pl->stage + 1];
  if (*live != m) {
    CT_ASSERT(pl->stash_data);
    add(p, pl, step_restore, m, "micro-batch", CT_STEP_RESTORE, pl->stash_count * sizeof(float));
    ct_steps_forward_range(p, net, lo, hi, true, NULL, NULL);
    add(p, pl, step_drop_loss, 0, "recomputed loss", CT_STEP_LOSS, 0);
    *live = m;
  }
  for (int k = 0; k < pl->nout; k++)
    if (pl->out[k].diff)
      add(p, pl, step_recv_diff, k, net->blobs[pl->out[k].blob]->name, CT_STEP_RECV,
          blob_bytes(pl, pl->out[k].blob));
  ct_steps_backward_range(p, net, lo, hi, NULL, NULL);
  for (int k = 0; k < pl->nin; k++)
    if (pl->in[k].diff)
      add(p, pl, step_send_diff, m * pl->nin + k, net->blobs[pl->in[k].blob]->name, CT_STEP_SEND,
          blob_bytes(pl, pl->in[k].blob));
}

void ct_stages_build(ct_stages *pl, ct_program *p, const ct_program_step *pass_loss) {
  const bool stash = pl->stash_data != NULL;
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
    add_forward(pl, p, m, stash, pass_loss);
    live = m;
    if (m >= ahead) add_backward(pl, p, next_b++, &live);
  }
  while (next_b < pl->micro) add_backward(pl, p, next_b++, &live);
  add(p, pl, step_send_join, 0, "send join", CT_STEP_SEND, 0);
}

void ct_stages_build_forward(ct_stages *pl, ct_program *p) {
  add_forward(pl, p, 0, false, NULL);
  add(p, pl, step_send_join, 0, "send join", CT_STEP_SEND, 0);
}

/* ------------------------------------------------------------------ host */

ct_status ct_stages_gather(ct_stages *pl, float *flat, ct_error *err) {
  const ct_net *net = pl->net;
  const int tag0 = 2 * net->nblobs;
  for (int q = 0; q < net->nparams; q++) {
    const ct_net_param *par = &net->params[q];
    const int owner = stage_of(pl, par->layer);
    if (owner == 0 || par->count == 0) continue;
    if (pl->stage == owner)
      CT_TRY(ct_comm_send(pl->comm, flat + par->offset, par->count, 0, tag0 + q, NULL, err));
    else if (pl->stage == 0)
      CT_TRY(ct_comm_recv(pl->comm, flat + par->offset, par->count, owner, tag0 + q, NULL, err));
  }
  return CT_OK;
}

ct_status ct_stages_agree(ct_stages *pl, double *loss, int *actions, ct_error *err) {
  const ct_net *net = pl->net;
  const int nbits = 8 * (int)sizeof(int);
  const size_t n = 1 + (size_t)nbits + pl->output_count;
  double *v = ct_xcalloc(n, sizeof *v);
  v[0] = *loss;
  for (int b = 0; b < nbits; b++) v[1 + b] = (*actions >> b) & 1;
  size_t at = 1 + (size_t)nbits;
  for (int k = 0; k < net->noutputs; k++) {
    const ct_tensor *t = net->blobs[net->output_ids[k]];
    for (size_t i = 0; i < t->count; i++)
      v[at + i] = pl->output_stage[k] == pl->stage ? (double)ct_f32(t)[i] : 0.0;
    at += t->count;
  }
  ct_status st = ct_comm_allreduce_host_f64(pl->comm, v, n, err);
  if (st == CT_OK) {
    *loss = v[0];
    *actions = 0;
    for (int b = 0; b < nbits; b++)
      if (v[1 + b] > 0) *actions |= 1 << b;
    at = 1 + (size_t)nbits;
    for (int k = 0; k < net->noutputs; k++) {
      const ct_tensor *t = net->blobs[net->output_ids[k]];
      for (size_t i = 0; i < t->count; i++) ct_f32(t)[i] = (float)v[at + i];
      at += t->count;
    }
  }
  free(v);
  return st;
}

void ct_stages_describe(const ct_stages *pl, char *buf, size_t size) {
  const ct_net *net = pl->net;
  const int lo = pl->first[pl->stage], hi = pl->first[pl->stage + 1];
  snprintf(buf, size, "stage %d of %d: layers %d-%d ('%s' to '%s'), %d input%s, %d output%s, %d "
           "micro-batch%s (%s)",
           pl->stage, pl->nstages, lo, hi - 1, net->layers[lo]->name, net->layers[hi - 1]->name,
           pl->nin, pl->nin == 1 ? "" : "s", pl->nout, pl->nout == 1 ? "" : "s", pl->micro,
           pl->micro == 1 ? "" : "es", pl->schedule == CT_STAGES_1F1B ? "1F1B" : "GPipe");
}
