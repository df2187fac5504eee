/* The runtime (see runtime.h): builds the iteration's program, launches and
 * finishes iterations, samples and agrees on requests. */
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/settings.h"
#include "core/trace.h"
#include "runtime/stages.h"
#include "runtime/steps.h"

struct ct_runtime {
  ct_net *net;
  ct_context *ctx;
  ct_rt_opts opts;
  ct_iter_clock clock;
  unsigned finished;     /* the last finished iteration */
  ct_program *prog;      /* built at the first launch (NULL: to build) */
  void *loss_slots;      /* two ct_loss_slot */
  /* CPU: the loss of the iteration under way: each pass's sum added in
   * single precision, as Caffe adds ForwardBackward's losses */
  float pass_losses;
  double iter_loss;      /* CPU: pass_losses as the update step reads it */
  ct_reducer *reducer;   /* data parallel, or NULL */
  ct_stages *pipe;       /* a pipeline stage, or NULL */
  ct_ps_client *ps;      /* a parameter server's worker (borrowed), or NULL */
  ct_program *fwd_prog;  /* pipeline: a forward of one batch (ct_runtime_forward), or NULL */
  int own_requests;      /* CT_RT_* bits asked for (ct_runtime_request) */
  int *requests;         /* where this worker's wishes are read: own_requests or the driver's */
  int actions;           /* agreed actions waiting for the last launched iteration's finish */
  ct_program_fn on_gradients; /* the callback step, or NULL */
  void *gradients_user;
  long long trace_base;  /* iteration seq is iteration trace_base + seq in traces */
  double trace_t0[2];    /* traces: when iteration seq (index seq & 1) was launched */
};

static bool on_gpu(const ct_runtime *rt) { return rt->ctx->device != CT_DEVICE_CPU; }

ct_status ct_runtime_new(ct_runtime **out, ct_net *net, const ct_rt_opts *opts, ct_error *err) {
  *out = NULL;
  ct_rt_opts o = {0};
  if (opts) o = *opts;
  if (o.iter_size == 0) o.iter_size = 1;
  if (o.iter_size < 1)
    return ct_error_set(err, CT_ERR_INVALID, "iter_size: must be at least 1, got %d", o.iter_size);
  ct_runtime *rt = ct_xcalloc(1, sizeof *rt);
  rt->net = net;
  rt->ctx = net->ctx;
  rt->opts = o;
  ct_iter_clock_init(&rt->clock, rt->ctx);
  rt->loss_slots = ct_slots_new(rt->ctx, sizeof(ct_loss_slot));
  rt->requests = &rt->own_requests;
  rt->trace_base = -1;
  *out = rt;
  return CT_OK;
}

void ct_runtime_free(ct_runtime *rt) {
  if (!rt) return;
  ct_runtime_drain(rt);
  ct_program_free(rt->prog);
  ct_reducer_free(rt->reducer);
  ct_stages_free(rt->pipe);
  ct_program_free(rt->fwd_prog);
  ct_slots_free(rt->ctx, rt->loss_slots);
  ct_iter_clock_free(&rt->clock);
  free(rt);
}

/* ------------------------------------------------------------------ parallel */

void ct_runtime_set_gradients_callback(ct_runtime *rt, ct_program_fn fn, void *user) {
  CT_ASSERT(rt->finished == rt->clock.launched);
  rt->on_gradients = fn;
  rt->gradients_user = user;
  ct_program_free(rt->prog);
  rt->prog = NULL;
}

ct_status ct_runtime_set_reduce(ct_runtime *rt, ct_comm *comm, const ct_reduce_opts *opts,
                                bool log_timing, int *requests, ct_error *err) {
  CT_ASSERT(rt->finished == rt->clock.launched);
  ct_reducer_free(rt->reducer);
  rt->reducer = NULL;
  ct_program_free(rt->prog);
  rt->prog = NULL;
  rt->requests = requests ? requests : &rt->own_requests;
  return ct_reducer_create(&rt->reducer, rt->net, &rt->clock, comm, opts, log_timing, err);
}

ct_status ct_runtime_set_ps(ct_runtime *rt, ct_ps_client *ps, int *requests, ct_error *err) {
  CT_ASSERT(rt->finished == rt->clock.launched);
  if (rt->pipe || rt->reducer)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "--dp_mode=%s: parameter servers with pipeline stages or an all-reduce are not "
                        "written yet", ct_dp_mode_name(ct_ps_client_opts(ps)->mode));
  rt->ps = ps;
  rt->requests = requests ? requests : &rt->own_requests;
  ct_program_free(rt->prog);
  rt->prog = NULL;
  return CT_OK;
}

ct_ps_client *ct_runtime_ps(const ct_runtime *rt) { return rt->ps; }

ct_status ct_runtime_set_pipeline(ct_runtime *rt, ct_comm *comm, const char *const *after,
                                  int nafter, const ct_stages_opts *opts, ct_error *err) {
  CT_ASSERT(rt->finished == rt->clock.launched);
  if (rt->reducer || rt->ps)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "--pipeline: set the pipeline before the data-parallel reducer (D x P), "
                        "and not with parameter servers");
  ct_stages_free(rt->pipe);
  rt->pipe = NULL;
  ct_program_free(rt->fwd_prog);
  rt->fwd_prog = NULL;
  ct_program_free(rt->prog);
  rt->prog = NULL;
  CT_TRY(ct_stages_create(&rt->pipe, rt->net, comm, after, nafter, rt->opts.iter_size, opts,
                          err));
  char line[256];
  ct_stages_describe(rt->pipe, line, sizeof line);
  LOG_INFO("Pipeline %s", line);
  return CT_OK;
}

ct_status ct_runtime_forward(ct_runtime *rt, double *loss, ct_error *err) {
  if (!rt->pipe) return ct_net_forward(rt->net, loss, err);
  CT_ASSERT(rt->finished == rt->clock.launched);
  if (!rt->fwd_prog) {
    rt->fwd_prog = ct_program_new(rt->ctx, false);
    ct_stages_build_forward(rt->pipe, rt->fwd_prog);
  }
  ct_net_zero_loss(rt->net);
  CT_TRY(ct_program_run(rt->fwd_prog, ct_net_signature(rt->net), err));
  double sum = rt->net->loss_host;
  int none = 0;
  CT_TRY(ct_stages_agree(rt->pipe, &sum, &none, err));
  if (loss) *loss = sum;
  return CT_OK;
}

int ct_runtime_stage(const ct_runtime *rt) { return rt->pipe ? ct_stages_stage(rt->pipe) : 0; }

ct_stages *ct_runtime_stages(const ct_runtime *rt) { return rt->pipe; }

ct_status ct_runtime_broadcast_params(ct_runtime *rt, int root, ct_error *err) {
  return rt->reducer ? ct_reducer_broadcast_params(rt->reducer, root, err) : CT_OK;
}

void ct_runtime_describe_reduce(const ct_runtime *rt, char *buf, size_t size) {
  if (rt->reducer) ct_reducer_describe(rt->reducer, buf, size);
  else if (size) buf[0] = '\0';
}

int ct_runtime_workers(const ct_runtime *rt) {
  return rt->reducer ? ct_reducer_world(rt->reducer) : 1;
}

ct_status ct_runtime_average(ct_runtime *rt, double *values, size_t count, ct_error *err) {
  return rt->reducer ? ct_reducer_average_host(rt->reducer, values, count, err) : CT_OK;
}

const ct_iter_clock *ct_runtime_clock(const ct_runtime *rt) { return &rt->clock; }

const double *ct_runtime_loss_sum(const ct_runtime *rt) {
  return on_gpu(rt) ? rt->net->loss_dev : &rt->iter_loss;
}

/* ------------------------------------------------------------------ steps */

static ct_status step_clock(void *user, int arg, ct_error *err) {
  ct_runtime *rt = user;
  ct_iter_clock_advance_async(&rt->clock);
  return CT_OK;
}

/* CPU: the pass's loss added to the iteration's, as Caffe's Step adds each
 * ForwardBackward's. */
static ct_status step_pass_loss(void *user, int arg, ct_error *err) {
  ct_runtime *rt = user;
  rt->pass_losses += (float)rt->net->loss_host;
  rt->net->loss_host = 0;
  rt->iter_loss = rt->pass_losses;
  return CT_OK;
}

static ct_status step_reduce_begin(void *user, int arg, ct_error *err) {
  ct_runtime *rt = user;
  ct_reducer_begin(rt->reducer);
  return CT_OK;
}

static ct_status step_reduce(void *user, int bucket, ct_error *err) {
  ct_runtime *rt = user;
  return ct_reducer_launch(rt->reducer, bucket, err);
}

static ct_status step_reduce_join(void *user, int arg, ct_error *err) {
  ct_runtime *rt = user;
  return ct_reducer_join(rt->reducer, err);
}

static ct_status step_capture_end(void *user, int arg, ct_error *err) {
  ct_runtime *rt = user;
  return ct_reducer_capture_end(rt->reducer, err);
}

static ct_status step_callback(void *user, int arg, ct_error *err) {
  ct_runtime *rt = user;
  ct_context_sync(rt->ctx);
  return rt->on_gradients(rt->gradients_user, 0, err);
}

static ct_status step_readback(void *user, int arg, ct_error *err) {
  ct_runtime *rt = user;
  if (on_gpu(rt)) {
    ct_slots_gpu_store_loss(&rt->clock, rt->loss_slots, rt->net->loss_dev, rt->ctx->check_word);
  } else {
    ct_loss_slot *slot = ct_slot(rt->loss_slots, sizeof(ct_loss_slot), rt->clock.launched);
    slot->loss = rt->pass_losses;
    slot->check = 0; /* the CPU's checks fail at once */
    rt->pass_losses = 0;
  }
  return CT_OK;
}

static int take_requests(ct_runtime *rt) {
  return __atomic_exchange_n(rt->requests, 0, __ATOMIC_SEQ_CST);
}

static ct_status step_push(void *user, int shard, ct_error *err) {
  ct_runtime *rt = user;
  return ct_ps_push(rt->ps, shard, err);
}

/* The weights from the servers.  The root decides (ps.h): the other
 * workers send their wishes along and act only on a stop the servers
 * announce; the root adds the wishes relayed to it to its own.  Both act at
 * the iteration's finish. */
static ct_status step_pull(void *user, int arg, ct_error *err) {
  ct_runtime *rt = user;
  const bool root = ct_ps_client_rank(rt->ps) == 0;
  int relayed = 0;
  CT_TRY(ct_ps_pull(rt->ps, root ? 0 : take_requests(rt), &relayed, err));
  rt->actions |= relayed;
  if (ct_ps_stop_seen(rt->ps)) rt->actions |= CT_RT_STOP;
  return CT_OK;
}

/* Parts of the flat gradient that leave as soon as they are final (the
 * reducer's buckets, the servers' shards): part k ends at end(rt, k), and
 * `step` (its arg the part) is placed by ct_steps_backward's `after` at the
 * first layer after whose backward the prefix up to there is final: the
 * flat gradient's final prefix after layer i is net->layer_ready_count[i],
 * and all of it after layer 0. */
typedef struct {
  ct_runtime *rt;
  int count;
  size_t (*end)(const ct_runtime *rt, int k);
  ct_program_step step;
  int next; /* the next part to place */
} part_placer;

static void place_parts(void *user, ct_program *p, int layer) {
  part_placer *pp = user;
  const ct_net *net = pp->rt->net;
  const size_t ready =
      layer == 0 || !net->layer_ready_count ? net->flat_count : net->layer_ready_count[layer];
  for (; pp->next < pp->count && pp->end(pp->rt, pp->next) <= ready; pp->next++) {
    const size_t start = pp->next ? pp->end(pp->rt, pp->next - 1) : 0;
    ct_program_step st = pp->step;
    st.arg = pp->next;
    st.bytes = (pp->end(pp->rt, pp->next) - start) * sizeof(float);
    ct_program_add(p, st);
  }
}

static size_t bucket_end(const ct_runtime *rt, int k) { return ct_reducer_bucket_end(rt->reducer, k); }
static size_t shard_end(const ct_runtime *rt, int k) { return ct_ps_client_shard_end(rt->ps, k); }

/* The placer of the last backward pass: all-reduce buckets, or pushes to
 * the servers (unless they update locally: BMUF); count 0: none. */
static part_placer last_pass_parts(ct_runtime *rt) {
  part_placer pp = {.rt = rt};
  if (rt->reducer) {
    pp.count = ct_reducer_buckets(rt->reducer);
    pp.end = bucket_end;
    pp.step = (ct_program_step){.run = step_reduce, .user = rt, .capturable = true,
                                .what = "all-reduce", .kind = CT_STEP_REDUCE};
  } else if (rt->ps && !ct_ps_client_local_update(rt->ps)) {
    pp.count = ct_ps_client_shards(rt->ps);
    pp.end = shard_end;
    pp.step = (ct_program_step){.run = step_push, .user = rt, .what = "push", .kind = CT_STEP_PUSH};
  }
  return pp;
}

static void add(ct_runtime *rt, ct_program_fn fn, bool capturable, const char *what,
                ct_step_kind kind) {
  ct_program_add(rt->prog, (ct_program_step){.run = fn, .user = rt, .capturable = capturable,
                                             .what = what, .kind = kind});
}

/* The program of runtime.h's picture. */
static void build_program(ct_runtime *rt) {
  ct_net *net = rt->net;
  rt->prog = ct_program_new(rt->ctx, !rt->opts.no_graphs);
  ct_program_trace_device(rt->prog);
  if (rt->reducer) ct_program_set_capture_end(rt->prog, step_capture_end, rt);
  add(rt, step_clock, true, "iteration count", CT_STEP_CLOCK);
  ct_steps_begin(rt->prog, net);
  if (rt->pipe) {
    const ct_program_step loss = {.run = step_pass_loss, .user = rt, .what = "pass loss",
                                  .kind = CT_STEP_LOSS};
    /* D x P: the buckets of the stage's parameters in its last backward */
    part_placer pp = last_pass_parts(rt);
    const ct_program_step begin = {.run = step_reduce_begin, .user = rt, .capturable = true,
                                   .what = "reduce begin", .kind = CT_STEP_REDUCE_BEGIN};
    ct_stages_build(rt->pipe, rt->prog, on_gpu(rt) ? NULL : &loss, pp.count ? &begin : NULL,
                    pp.count ? place_parts : NULL, &pp);
    CT_ASSERT(pp.next == pp.count);
  }
  for (int pass = 0; !rt->pipe && pass < rt->opts.iter_size; pass++) {
    const bool last = pass == rt->opts.iter_size - 1;
    ct_steps_forward(rt->prog, net);
    if (!on_gpu(rt)) add(rt, step_pass_loss, false, "pass loss", CT_STEP_LOSS);
    part_placer pp = last_pass_parts(rt);
    if (last && pp.count > 0) {
      if (rt->reducer) add(rt, step_reduce_begin, true, "reduce begin", CT_STEP_REDUCE_BEGIN);
      ct_steps_backward(rt->prog, net, place_parts, &pp);
      CT_ASSERT(pp.next == pp.count);
    } else {
      ct_steps_backward(rt->prog, net, NULL, NULL);
    }
  }
  if (rt->reducer) add(rt, step_reduce_join, true, "reduce join", CT_STEP_REDUCE_JOIN);
  if (rt->on_gradients) add(rt, step_callback, false, "on_gradients", CT_STEP_CALLBACK);
  /* with parameter servers the servers update (ssp, async) or the worker
   * does and then syncs at a block's end (bmuf) */
  if (rt->opts.update && (!rt->ps || ct_ps_client_local_update(rt->ps)))
    ct_program_add(rt->prog, (ct_program_step){.run = rt->opts.update, .user = rt->opts.update_user,
                                               .capturable = true, .what = "update",
                                               .kind = CT_STEP_UPDATE});
  if (rt->ps) add(rt, step_pull, false, "pull", CT_STEP_PULL);
  add(rt, step_readback, true, "readback", CT_STEP_READBACK);
  ct_steps_prefetch(rt->prog, net);
}

/* ------------------------------------------------------------------ iterations */


void ct_runtime_request(ct_runtime *rt, int actions) {
  __atomic_fetch_or(rt->requests, actions, __ATOMIC_SEQ_CST);
}

int ct_runtime_poll(ct_runtime *rt) {
  return rt->reducer || rt->pipe || rt->ps ? 0 : take_requests(rt);
}

unsigned ct_runtime_next(const ct_runtime *rt) { return rt->clock.launched + 1; }

void ct_runtime_set_trace_iter(ct_runtime *rt, long long iter) {
  rt->trace_base = iter - (long long)ct_runtime_next(rt);
}

ct_status ct_runtime_launch(ct_runtime *rt, unsigned *seq, ct_error *err) {
  CT_ASSERT(rt->clock.launched - rt->finished < 2);
  if (rt->reducer && ct_reducer_cancelled(rt->reducer))
    return ct_error_set(err, CT_ERR_INTERRUPTED, "stopped because another worker failed");
  if (!rt->prog) build_program(rt);
  const unsigned n = ++rt->clock.launched;
  if (ct_trace_enabled()) {
    rt->trace_t0[n & 1] = ct_trace_iteration_begin(rt->trace_base + n);
    ct_program_trace_set(rt->prog, (int)(n & 1));
  }
  /* requests travel inside the iteration: this one carries the wish of now */
  if (rt->reducer && ct_reducer_carries_requests(rt->reducer))
    ct_reducer_carry(rt->reducer, n, take_requests(rt));
  ct_status st = ct_program_run(rt->prog, ct_net_signature(rt->net), err);
  if (st != CT_OK) {
    ct_runtime_drain(rt); /* leave nothing in flight that reads the slots */
    return st;
  }
  ct_iter_clock_record_end(&rt->clock);
  *seq = n;
  return CT_OK;
}

/* The requests to act on after iteration seq: what it carried (agreed when
 * it ended), and when no iteration follows it, what is asked now (agreed
 * with the others by a host round when the iterations carry none). */
static ct_status agree(ct_runtime *rt, unsigned seq, int *actions, ct_error *err) {
  ct_reducer *r = rt->reducer;
  const bool carried = r && ct_reducer_carries_requests(r);
  if (carried) {
    int a;
    CT_TRY(ct_reducer_agree(r, seq, 0, &a, err));
    rt->actions |= a;
  }
  *actions = 0;
  if (seq != rt->clock.launched) return CT_OK; /* they come with the next one */
  /* a parameter server's worker other than the root relays its wishes
   * (step_pull) */
  if (!carried && !rt->pipe && !(rt->ps && ct_ps_client_rank(rt->ps) != 0)) {
    int a = take_requests(rt);
    if (r) CT_TRY(ct_reducer_agree(r, seq, a, &a, err));
    rt->actions |= a;
  }
  *actions = rt->actions;
  rt->actions = 0;
  return CT_OK;
}

static ct_status finish(ct_runtime *rt, unsigned seq, ct_rt_result *res, ct_error *err) {
  if (rt->reducer) CT_TRY(ct_reducer_wait(rt->reducer, seq, err));
  else ct_iter_clock_wait(&rt->clock, seq);
  CT_TRY(agree(rt, seq, &res->actions, err));
  const ct_loss_slot *slot = ct_slot(rt->loss_slots, sizeof(ct_loss_slot), seq);
  res->loss = slot->loss;
  if (rt->pipe) {
    /* the loss stage's loss and every stage's requests, on every stage */
    int a = take_requests(rt);
    CT_TRY(ct_stages_agree(rt->pipe, &res->loss, &a, err));
    /* D x P: and over the stage's replicas, so that every rank acts alike */
    if (rt->reducer) CT_TRY(ct_reducer_agree(rt->reducer, seq, a, &a, err));
    res->actions |= a;
  }
  if (slot->check == 0) return CT_OK;
  const unsigned word = slot->check;
  ct_context_clear_checks_async(rt->ctx);
  return ct_context_report_check(rt->ctx, word, err);
}

ct_status ct_runtime_finish(ct_runtime *rt, unsigned seq, ct_rt_result *res, ct_error *err) {
  CT_ASSERT(seq == rt->finished + 1 && seq <= rt->clock.launched);
  memset(res, 0, sizeof *res);
  ct_status st = finish(rt, seq, res, err);
  rt->finished = seq;
  /* a traced GPU iteration's device times (the next, if launched, marks the other set) */
  if (st == CT_OK && ct_trace_wants(rt->trace_base + seq))
    st = ct_program_trace_collect(rt->prog, (int)(seq & 1), rt->trace_base + seq, err);
  if (ct_trace_enabled()) ct_trace_iteration_end(rt->trace_base + seq, rt->trace_t0[seq & 1]);
  if (st != CT_OK) ct_runtime_drain(rt); /* an iteration launched ahead: leave nothing in flight */
  return st;
}

bool ct_runtime_may_launch_ahead(const ct_runtime *rt) {
  if (!on_gpu(rt) || rt->opts.no_launch_ahead || !ct_setting_bool("CORTADO_LAUNCH_AHEAD"))
    return false;
  if (!rt->prog || !ct_program_steady(rt->prog)) return false;
  if (rt->actions) return false;
  /* a pipeline stage's next iteration would talk to stages still in this
   * one's agreement */
  if (rt->pipe) return false;
  /* Workers must decide alike: they see the same agreed actions, but a wish
   * only where it was asked (it is carried or agreed on at a finish). */
  if (!rt->reducer) return __atomic_load_n(rt->requests, __ATOMIC_SEQ_CST) == 0;
  return ct_reducer_may_launch_ahead(rt->reducer);
}

void ct_runtime_drain(ct_runtime *rt) {
  ct_context_sync(rt->ctx);
  rt->finished = rt->clock.launched; /* what was in flight is done, its results dropped */
  rt->actions = 0;
}

void ct_runtime_stats(const ct_runtime *rt, ct_program_stats *st) {
  if (rt->prog) ct_program_get_stats(rt->prog, st);
  else memset(st, 0, sizeof *st);
}

void ct_runtime_describe(const ct_runtime *rt, char *buf, size_t size) {
  ct_program_stats st;
  ct_runtime_stats(rt, &st);
  if (st.replaying)
    snprintf(buf, size, "CUDA graphs: %d of %d steps in %d graphs (%zu nodes), %d steps launched plainly",
             st.graph_steps, st.steps, st.graphs, st.graph_nodes, st.plain_steps);
  else
    snprintf(buf, size, "CUDA graphs: off; %d steps launched plainly", st.steps);
}
