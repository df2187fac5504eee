/* Launching iteration n + 1 before iteration n is finished (solver.c,
 * solver_gpu.c, gpu/iter_slots.h), on GPU 0, against the same solver that
 * finishes every iteration before it launches the next
 * (ct_solver_opts.no_launch_ahead):
 *  - LeNet with Dropout, 40 iterations in one step, SGD with an 'inv' rate
 *    (a new rate every iteration, read from its slot) and a clip, and Adam
 *    (a new bias correction every iteration): the same parameters, draws
 *    and mean loss, with deterministic algorithms;
 *  - displays, snapshots and a stop request: the same display values, the
 *    same snapshot files byte for byte, and the stop after the same
 *    iteration;
 *  - a NaN loss while the next iteration is in flight: the CPU's message
 *    and no update applied.
 * Skipped (77) without a GPU. */
#include <sys/stat.h>

#include "runtime_nets.h"

/* FP32 and deterministic algorithms: two runs of the same work give the
 * same bits. */
static void gpu_context(ct_context *ctx, uint64_t seed) {
  rn_gpu_context(ctx, seed);
  ct_context_set_deterministic(ctx, true);
}

/* Two solvers of the same net and solver text on two deterministic
 * contexts: [0] launches ahead (the default), [1] does not. */
typedef struct {
  ct_context ctx[2];
  ct_solver *s[2];
} pair;

static void pair_init(pair *p, const char *net, const char *solver, const ct_solver_opts *base) {
  for (int k = 0; k < 2; k++) {
    gpu_context(&p->ctx[k], 9);
    ct_solver_opts o = {.quiet_nets = true};
    if (base) o = *base;
    o.no_launch_ahead = k == 1;
    p->s[k] = rn_solver(net, solver, &p->ctx[k], &o);
    rn_fill_inputs(p->s[k]->net, 10, 5);
  }
}

static void pair_free(pair *p) {
  for (int k = 0; k < 2; k++) {
    ct_solver_free(p->s[k]);
    ct_context_free(&p->ctx[k]);
  }
}

/* Largest relative difference of the two solvers' parameters. */
static double params_apart(const pair *p) {
  float *a = rn_flat(p->s[0]->net, false), *b = rn_flat(p->s[1]->net, false);
  double e = tu_max_rel_err(a, b, p->s[0]->net->flat_count, 1e-3);
  free(a);
  free(b);
  return e;
}

static void test_same_training(void **state) {
  const char *solvers[] = {
      "type: 'SGD' base_lr: 0.01 momentum: 0.9 weight_decay: 0.0005 lr_policy: 'inv' "
      "gamma: 0.05 power: 0.75 clip_gradients: 2 random_seed: 1 display: 0 average_loss: 40",
      "type: 'Adam' base_lr: 0.001 momentum: 0.9 momentum2: 0.999 lr_policy: 'fixed' "
      "random_seed: 1 display: 0 average_loss: 40"};
  char *net = rn_lenet_text(16, true);
  for (int v = 0; v < 2; v++) {
    pair p;
    pair_init(&p, net, solvers[v], NULL);
    ct_error err;
    for (int k = 0; k < 2; k++) assert_int_equal(ct_solver_step(p.s[k], 40, &err), CT_OK);
    const double e = params_apart(&p);
    const float la = p.s[0]->smoothed_loss, lb = p.s[1]->smoothed_loss;
    print_message("%s: 40 iterations, %ld launched ahead; mean loss %.7g / %.7g, parameters %.3g "
                  "apart\n",
                  v ? "Adam" : "SGD inv + clip", p.s[0]->launched_ahead, (double)la, (double)lb, e);
    assert_int_equal(p.s[0]->iter, 40);
    assert_int_equal(p.s[1]->iter, 40);
    assert_true(p.s[0]->launched_ahead >= 35); /* all but the warm-up and the last */
    assert_int_equal(p.s[1]->launched_ahead, 0);
    assert_true(ct_context_draws(&p.ctx[0]) == ct_context_draws(&p.ctx[1]));
    assert_true(fabsf(la - lb) <= 1e-6f * fabsf(lb));
    assert_true(e <= 1e-6);
    pair_free(&p);
  }
  free(net);
}

/* What the root displayed, and a stop asked for at one launch. */
typedef struct {
  int n;
  int iter[16];
  float loss[16], lr[16];
} displays;

static ct_status record_display(void *user, const ct_solver_display *d, ct_error *err) {
  displays *r = user;
  if (r->n < 16) {
    r->iter[r->n] = d->iter;
    r->loss[r->n] = d->loss;
    r->lr[r->n] = d->lr;
    r->n++;
  }
  return CT_OK;
}

typedef struct {
  ct_solver *s;
  int launches, stop_at;
} stopper;

static void stop_on_launch(void *user) {
  stopper *t = user;
  if (t->launches++ == t->stop_at) ct_solver_request(t->s, CT_SOLVER_ACTION_STOP);
}

static void test_display_snapshot_stop(void **state) {
  const char *dir = tu_tmpdir("launch_ahead");
  char dirs[2][4200], solver[2][4400];
  for (int k = 0; k < 2; k++) {
    snprintf(dirs[k], sizeof dirs[k], "%s/%s", dir, k ? "b" : "a"); /* a: launches ahead */
    mkdir(dirs[k], 0755);
    snprintf(solver[k], sizeof solver[k],
             "type: 'SGD' base_lr: 0.01 momentum: 0.9 lr_policy: 'inv' gamma: 0.05 power: 0.75 "
             "random_seed: 1 display: 5 average_loss: 3 snapshot: 7 snapshot_prefix: '%s/s'",
             dirs[k]);
  }
  char *net = rn_lenet_text(16, true);
  displays shown[2] = {{0}};
  stopper stop[2];
  ct_solver *s[2];
  ct_context ctx[2];
  for (int k = 0; k < 2; k++) {
    gpu_context(&ctx[k], 9);
    ct_solver_opts o = {.quiet_nets = true, .no_launch_ahead = k == 1,
                        .on_display = record_display, .display_user = &shown[k]};
    s[k] = rn_solver(net, solver[k], &ctx[k], &o);
    rn_fill_inputs(s[k]->net, 10, 5);
    stop[k] = (stopper){.s = s[k], .stop_at = 23};
    ct_solver_callback h = {.on_start = stop_on_launch, .user = &stop[k]};
    ct_solver_add_callback(s[k], &h);
  }
  free(net);
  ct_error err;
  for (int k = 0; k < 2; k++) {
    assert_int_equal(ct_solver_step(s[k], 40, &err), CT_OK);
    /* asked at the launch of iteration 23: it stops after it, either way */
    assert_true(s[k]->requested_early_exit);
    assert_int_equal(s[k]->iter, 24);
  }
  print_message("display, snapshot every 7, stop at 23: %ld iterations launched ahead\n",
                s[0]->launched_ahead);
  assert_true(s[0]->launched_ahead >= 10);
  assert_int_equal(shown[0].n, 5); /* iterations 0, 5, 10, 15, 20 */
  assert_int_equal(shown[1].n, shown[0].n);
  for (int i = 0; i < shown[0].n; i++) {
    assert_int_equal(shown[0].iter[i], 5 * i);
    assert_int_equal(shown[1].iter[i], shown[0].iter[i]);
    assert_true(shown[0].loss[i] == shown[1].loss[i]);
    assert_true(shown[0].lr[i] == shown[1].lr[i]);
  }
  const char *files[] = {"s_iter_7.caffemodel", "s_iter_7.solverstate", "s_iter_14.caffemodel",
                         "s_iter_21.solverstate"};
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    char pa[4400], pb[4400];
    snprintf(pa, sizeof pa, "%s/%s", dirs[0], files[f]);
    snprintf(pb, sizeof pb, "%s/%s", dirs[1], files[f]);
    size_t na, nb;
    char *a = tu_read_file(pa, &na), *b = tu_read_file(pb, &nb);
    if (!a || !b) fail_msg("cannot read %s or %s", pa, pb);
    assert_int_equal(na, nb);
    size_t same = 0;
    for (size_t i = 0; i < na; i++) same += a[i] == b[i];
    if (strstr(files[f], "caffemodel")) assert_memory_equal(a, b, na);
    else assert_true(na - same <= 1); /* learned_net's path: "a/" or "b/" */
    free(a);
    free(b);
  }
  for (int k = 0; k < 2; k++) {
    ct_solver_free(s[k]);
    ct_context_free(&ctx[k]);
  }
}

static const char k_regression_net[] =
    "name: 'reg'\n"
    "layer { name: 'in' type: 'Input' top: 'x' top: 'y'\n"
    "  input_param { shape { dim: 4 dim: 64 } shape { dim: 4 dim: 1 } } }\n"
    "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'p'\n"
    "  inner_product_param { num_output: 1 weight_filler { type: 'gaussian' std: 0.1 } } }\n"
    "layer { name: 'loss' type: 'EuclideanLoss' bottom: 'p' bottom: 'y' top: 'loss' }\n";

/* A NaN target in the middle of a step: the iteration after it is launched
 * before the NaN is seen; neither changes the weights. */
static void test_nan_in_flight(void **state) {
  if (!ct_layer_find("EuclideanLoss")) skip();
  ct_context ctx;
  gpu_context(&ctx, 3);
  ct_solver *s = rn_solver(k_regression_net,
                           "type: 'SGD' base_lr: 0.01 lr_policy: 'fixed' display: 0", &ctx, NULL);
  ct_tensor *x = ct_net_blob(s->net, "x"), *y = ct_net_blob(s->net, "y");
  float hx[256], hy[4] = {1, 0, -1, 2};
  tu_fill_uniform(hx, 256, -1.0f, 1.0f, 4);
  ct_tensor_upload(x, hx);
  ct_tensor_upload(y, hy);
  ct_error err;
  assert_int_equal(ct_solver_step(s, 6, &err), CT_OK);
  assert_true(s->launched_ahead >= 2);
  float *before = rn_flat(s->net, false);
  hy[2] = NAN;
  ct_tensor_upload(y, hy);
  const long ahead = s->launched_ahead;
  assert_int_equal(ct_solver_step(s, 5, &err), CT_ERR_NUMERIC);
  assert_true(s->launched_ahead > ahead); /* iteration 7 was in flight */
  assert_string_equal(err.msg,
                      "iteration 6: the loss is nan; the first non-finite output is from layer "
                      "'in' (Input)");
  float *after = rn_flat(s->net, false);
  assert_memory_equal(before, after, s->net->flat_count * sizeof(float));
  /* a good target trains again from here */
  hy[2] = -1;
  ct_tensor_upload(y, hy);
  assert_int_equal(ct_solver_step(s, 4, &err), CT_OK);
  float *trained = rn_flat(s->net, false);
  assert_true(memcmp(before, trained, s->net->flat_count * sizeof(float)) != 0);
  free(before);
  free(after);
  free(trained);
  ct_solver_free(s);
  ct_context_free(&ctx);
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  tu_require_gpu();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_training),
      cmocka_unit_test(test_display_snapshot_stop),
      cmocka_unit_test(test_nan_in_flight),
  };
  return cmocka_run_group_tests(tests, rn_setup, NULL);
}
