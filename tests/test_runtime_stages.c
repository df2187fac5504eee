/* Pipeline stages without MPI: the plan of a cut net (which blobs cross,
 * which way) and the order of each stage's steps under GPipe and 1F1B,
 * read from the program ct_stages_build makes.  The stages are built over
 * a "threads" communicator of the right size, which building never uses;
 * running them is tests/test_pipeline_mpi.c. */
#include "testutil.h"

#include "runtime_nets.h"
#include "runtime/stages.h"

/* data -> ip1 -> relu (in place) -> ip2 -> loss(label) */
static const char k_net[] =
    "name: 'st'\n"
    "layer { name: 'data' type: 'DummyData' top: 'x' top: 'label'\n"
    "  dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 2 }\n"
    "    data_filler { type: 'constant' value: 0.5 } data_filler { type: 'constant' value: 1 } } }\n"
    "layer { name: 'ip1' type: 'InnerProduct' bottom: 'x' top: 'h'\n"
    "  inner_product_param { num_output: 4 weight_filler { type: 'gaussian' std: 0.1 } } }\n"
    "layer { name: 'relu' type: 'ReLU' bottom: 'h' top: 'h' }\n"
    "layer { name: 'ip2' type: 'InnerProduct' bottom: 'h' top: 'y'\n"
    "  inner_product_param { num_output: 2 weight_filler { type: 'gaussian' std: 0.1 } } }\n"
    "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'y' bottom: 'label' top: 'loss' }\n";

/* The net as stage `stage` of `nstages` (cut after `cuts`) builds it. */
static ct_net *stage_net(int stage, int nstages, const char *const *cuts, ct_context *ctx) {
  Caffe__NetParameter *p = rn_parse_net(k_net);
  ct_stages_cut cut = {.after = cuts, .nafter = nstages - 1, .rank = stage, .ranks = nstages};
  ct_net_opts o = {.phase = CT_PHASE_TRAIN, .quiet = true, .part = {ct_stages_part, &cut}};
  ct_net *net = NULL;
  ct_error err;
  if (ct_net_init(&net, p, &o, ctx, &err) != CT_OK) fail_msg("net init: %s", err.msg);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  return net;
}

/* The steps of stage `stage` of `nstages` (cut after `cuts`) with M
 * micro-batches in `schedule`, one word each: F:layer, B:layer, send:blob,
 * recv:blob, stash, restore, and "join" for the send join; the pass loss
 * and the recomputed loss's drop are left out.  Caller frees. */
static char *stage_steps(int stage, int nstages, const char *const *cuts, int m,
                         ct_stages_opts opts) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_net *net = stage_net(stage, nstages, cuts, &ctx);
  ct_comm_threads_group *g = ct_comm_threads_group_create(nstages);
  ct_comm *comm = ct_comm_threads_create(g, stage);
  ct_stages *st = NULL;
  ct_error err;
  if (ct_stages_create(&st, net, comm, cuts, nstages - 1, m, &opts, &err) != CT_OK)
    fail_msg("%s", err.msg);
  ct_program *p = ct_program_new(&ctx, false);
  ct_stages_build(st, p, NULL, NULL, NULL, NULL);
  int n = 0;
  const ct_program_step *s = ct_program_steps(p, &n);
  char *out = calloc(8192, 1);
  for (int i = 0; i < n; i++) {
    const char *w = s[i].what ? s[i].what : "";
    char word[128] = "";
    switch (s[i].kind) {
      case CT_STEP_FORWARD: snprintf(word, sizeof word, "F:%s", w); break;
      case CT_STEP_BACKWARD: snprintf(word, sizeof word, "B:%s", w); break;
      case CT_STEP_SEND:
        snprintf(word, sizeof word, strcmp(w, "send join") == 0 ? "join" : "send:%s", w);
        break;
      case CT_STEP_RECV: snprintf(word, sizeof word, "recv:%s", w); break;
      case CT_STEP_STASH: snprintf(word, sizeof word, "stash"); break;
      case CT_STEP_RESTORE: snprintf(word, sizeof word, "restore"); break;
      default: break;
    }
    if (*word) {
      if (*out) strcat(out, " ");
      strcat(out, word);
    }
  }
  ct_program_free(p);
  ct_stages_free(st);
  ct_comm_free(comm);
  ct_comm_threads_group_release(g);
  ct_net_free(net);
  ct_context_free(&ctx);
  return out;
}

static const ct_stages_opts GPIPE = {CT_STAGES_GPIPE, false}, F1B1 = {CT_STAGES_1F1B, false};
static const ct_stages_opts GPIPE_KEPT = {CT_STAGES_GPIPE, true}, F1B1_KEPT = {CT_STAGES_1F1B, true};

static void expect_steps(int stage, int nstages, const char *const *cuts, int m,
                         ct_stages_opts opts, const char *want) {
  char *got = stage_steps(stage, nstages, cuts, m, opts);
  if (strcmp(got, want) != 0) fail_msg("stage %d of %d, M %d:\n got  %s\n want %s", stage, nstages, m, got, want);
  free(got);
}

/* Two stages cut after relu: stage 0 sends h and the label, gets h's diff
 * back; stage 1 receives them in the order its layers read them.  One
 * micro-batch: no stash, no recomputation. */
static void test_two_stages_one_micro(void **state) {
  const char *cuts[] = {"relu"};
  expect_steps(0, 2, cuts, 1, GPIPE,
               "F:data F:ip1 F:relu send:h send:label recv:h B:relu B:ip1 join");
  expect_steps(1, 2, cuts, 1, GPIPE,
               "recv:h recv:label F:ip2 F:loss B:loss B:ip2 send:h join");
}

/* GPipe with 2 micro-batches: every forward, then each backward after its
 * micro-batch is restored and recomputed (the data layer is not rerun). */
static void test_gpipe_recomputes(void **state) {
  const char *cuts[] = {"relu"};
  expect_steps(0, 2, cuts, 2, GPIPE,
               "F:data stash stash F:ip1 F:relu send:h send:label "
               "F:data stash stash F:ip1 F:relu send:h send:label "
               "restore F:ip1 F:relu recv:h B:relu B:ip1 "
               "restore F:ip1 F:relu recv:h B:relu B:ip1 join");
}

/* 1F1B with 3 micro-batches: stage 0 of 2 runs one forward ahead; the last
 * stage runs each backward right after its forward: no recomputation, no
 * stash. */
static void test_1f1b_order(void **state) {
  const char *cuts[] = {"relu"};
  expect_steps(0, 2, cuts, 3, F1B1,
               "F:data stash stash F:ip1 F:relu send:h send:label "
               "F:data stash stash F:ip1 F:relu send:h send:label "
               "restore F:ip1 F:relu recv:h B:relu B:ip1 "
               "F:data stash stash F:ip1 F:relu send:h send:label "
               "restore F:ip1 F:relu recv:h B:relu B:ip1 "
               "restore F:ip1 F:relu recv:h B:relu B:ip1 join");
  expect_steps(1, 2, cuts, 3, F1B1,
               "recv:h recv:label F:ip2 F:loss B:loss B:ip2 send:h "
               "recv:h recv:label F:ip2 F:loss B:loss B:ip2 send:h "
               "recv:h recv:label F:ip2 F:loss B:loss B:ip2 send:h join");
}

/* Kept activations (--recompute=false): one stash of the micro-batch's
 * activations after its forward, and a backward that puts them back
 * instead of running the forward again; the last stage under 1F1B keeps
 * nothing (each backward follows its own forward). */
static void test_kept_activations(void **state) {
  const char *cuts[] = {"relu"};
  expect_steps(0, 2, cuts, 2, GPIPE_KEPT,
               "F:data F:ip1 F:relu stash send:h send:label "
               "F:data F:ip1 F:relu stash send:h send:label "
               "restore recv:h B:relu B:ip1 restore recv:h B:relu B:ip1 join");
  expect_steps(0, 2, cuts, 3, F1B1_KEPT,
               "F:data F:ip1 F:relu stash send:h send:label "
               "F:data F:ip1 F:relu stash send:h send:label "
               "restore recv:h B:relu B:ip1 "
               "F:data F:ip1 F:relu stash send:h send:label "
               "restore recv:h B:relu B:ip1 restore recv:h B:relu B:ip1 join");
  expect_steps(1, 2, cuts, 3, F1B1_KEPT,
               "recv:h recv:label F:ip2 F:loss B:loss B:ip2 send:h "
               "recv:h recv:label F:ip2 F:loss B:loss B:ip2 send:h "
               "recv:h recv:label F:ip2 F:loss B:loss B:ip2 send:h join");
}

/* A layer type that does not say what its backward reads of its forward
 * (MVN keeps its statistics) cannot have its micro-batches kept: the
 * stage refuses, naming it. */
static void test_kept_activations_refused(void **state) {
  static const char net_text[] =
      "name: 'st'\n"
      "layer { name: 'data' type: 'DummyData' top: 'x' top: 'label'\n"
      "  dummy_data_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }\n"
      "layer { name: 'sq' type: 'MVN' bottom: 'x' top: 'xn' }\n"
      "layer { name: 'ip1' type: 'InnerProduct' bottom: 'xn' top: 'y'\n"
      "  inner_product_param { num_output: 2 } }\n"
      "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'y' bottom: 'label' top: 'loss' }\n";
  const char *cuts[] = {"sq"};
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  Caffe__NetParameter *p = rn_parse_net(net_text);
  ct_stages_cut cut = {.after = cuts, .nafter = 1, .rank = 0, .ranks = 2};
  ct_net_opts o = {.phase = CT_PHASE_TRAIN, .quiet = true, .part = {ct_stages_part, &cut}};
  ct_net *net = NULL;
  ct_error err;
  if (ct_net_init(&net, p, &o, &ctx, &err) != CT_OK) fail_msg("net init: %s", err.msg);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  ct_comm_threads_group *g = ct_comm_threads_group_create(2);
  ct_comm *comm = ct_comm_threads_create(g, 0);
  ct_stages *st = NULL;
  assert_int_equal(ct_stages_create(&st, net, comm, cuts, 1, 2, &GPIPE_KEPT, &err), CT_ERR_UNSUPPORTED);
  assert_string_equal(err.msg, "--recompute=false: layer 'sq' (MVN) of stage 0 does not say what "
                               "its backward keeps of its forward, so its micro-batches cannot be "
                               "kept; recompute them (--recompute=true)");
  assert_null(st);
  /* recomputed, the same stage builds */
  assert_int_equal(ct_stages_create(&st, net, comm, cuts, 1, 2, &GPIPE, &err), CT_OK);
  ct_stages_free(st);
  ct_comm_free(comm);
  ct_comm_threads_group_release(g);
  ct_net_free(net);
  ct_context_free(&ctx);
}

/* Three stages, the middle one the in-place ReLU alone: it receives h from
 * stage 0 and sends h on; the label goes from stage 0 to stage 2 directly. */
static void test_three_stages_in_place(void **state) {
  const char *cuts[] = {"ip1", "relu"};
  expect_steps(1, 3, cuts, 1, GPIPE, "recv:h F:relu send:h recv:h B:relu send:h join");
  expect_steps(2, 3, cuts, 1, GPIPE,
               "recv:label recv:h F:ip2 F:loss B:loss B:ip2 send:h join");
}

/* Stage 1 of 2 (cut after relu) holds ip2 and the loss: the other layers
 * are released, their parameters and the blobs it does not touch have no
 * storage, the flat buffers hold ip2's parameters only, and what needs
 * backward is what the whole net says (h's diff goes back). */
static void test_stage_holds_its_layers(void **state) {
  const char *cuts[] = {"relu"};
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_net *net = stage_net(1, 2, cuts, &ctx);
  ct_net *whole = rn_net(k_net, &ctx, false);
  assert_int_equal(net->part_first, 3);
  assert_int_equal(net->part_end, 5);
  for (int i = 0; i < net->nlayers; i++) assert_int_equal(net->layers[i]->released, i < 3);
  const ct_layer *ip1 = net->layers[ct_net_layer_index(net, "ip1")];
  assert_null(ip1->params[0]->data);
  assert_int_equal(ip1->params[0]->count, 4 * 3);
  assert_null(ct_net_blob(net, "x")->data);
  assert_non_null(ct_net_blob(net, "h")->data);
  assert_non_null(ct_net_blob(net, "label")->data);
  assert_int_equal(net->nparams, 2);
  assert_int_equal(net->params[0].count + net->params[1].count, 2 * 4 + 2);
  for (int b = 0; b < net->nblobs; b++)
    assert_int_equal(net->blob_need_backward[b], whole->blob_need_backward[b]);
  assert_true(net->blob_need_backward[rn_blob_index(net, "h")]);
  ct_net_free(whole);
  ct_net_free(net);
  ct_context_free(&ctx);
}

/* Two stages over three ranks: not a multiple of the stage count. */
static void test_ranks_not_a_multiple(void **state) {
  Caffe__NetParameter *p = rn_parse_net(k_net);
  const char *cuts[] = {"relu"};
  ct_stages_cut cut = {.after = cuts, .nafter = 1, .rank = 0, .ranks = 3};
  ct_net_opts o = {.phase = CT_PHASE_TRAIN, .quiet = true, .part = {ct_stages_part, &cut}};
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_net *net = NULL;
  ct_error err;
  assert_int_equal(ct_net_init(&net, p, &o, &ctx, &err), CT_ERR_INVALID);
  assert_string_equal(err.msg, "--pipeline: 1 split point makes 2 stages, but 3 ranks were started "
                               "(run mpirun -np 2: one rank per stage, or a multiple of 2 for "
                               "data-parallel replicas of the stages)");
  assert_null(net);
  protobuf_c_message_free_unpacked(&p->base, NULL);
  ct_context_free(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stage_holds_its_layers),
      cmocka_unit_test(test_ranks_not_a_multiple),
      cmocka_unit_test(test_two_stages_one_micro),
      cmocka_unit_test(test_gpipe_recomputes),
      cmocka_unit_test(test_1f1b_order),
      cmocka_unit_test(test_three_stages_in_place),
      cmocka_unit_test(test_kept_activations),
      cmocka_unit_test(test_kept_activations_refused),
  };
  return cmocka_run_group_tests(tests, rn_setup, NULL);
}
