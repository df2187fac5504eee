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

/* The steps of stage `stage` of `nstages` (cut after `cuts`) with M
 * micro-batches in `schedule`, one word each: F:layer, B:layer, send:blob,
 * recv:blob, stash, restore, and "join" for the send join; the pass loss
 * and the recomputed loss's drop are left out.  Caller frees. */
static char *stage_steps(int stage, int nstages, const char *const *cuts, int m,
                         ct_stages_schedule schedule) {
  ct_context ctx;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, NULL), CT_OK);
  ct_net *net = rn_net(k_net, &ctx, false);
  ct_comm_threads_group *g = ct_comm_threads_group_create(nstages);
  ct_comm *comm = ct_comm_threads_create(g, stage);
  ct_stages *st = NULL;
  ct_error err;
  if (ct_stages_create(&st, net, comm, cuts, nstages - 1, m, schedule, &err) != CT_OK)
    fail_msg("%s", err.msg);
  ct_program *p = ct_program_new(&ctx, false);
  ct_stages_build(st, p, NULL);
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

static void expect_steps(int stage, int nstages, const char *const *cuts, int m,
                         ct_stages_schedule schedule, const char *want) {
  char *got = stage_steps(stage, nstages, cuts, m, schedule);
  if (strcmp(got, want) != 0) fail_msg("stage %d of %d, M %d:\n got  %s\n want %s", stage, nstages, m, got, want);
  free(got);
}

/* Two stages cut after relu: stage 0 sends h and the label, gets h's diff
 * back; stage 1 receives them in the order its layers read them.  One
 * micro-batch: no stash, no recomputation. */
static void test_two_stages_one_micro(void **state) {
  const char *cuts[] = {"relu"};
  expect_steps(0, 2, cuts, 1, CT_STAGES_GPIPE,
               "F:data F:ip1 F:relu send:h send:label recv:h B:relu B:ip1 join");
  expect_steps(1, 2, cuts, 1, CT_STAGES_GPIPE,
               "recv:h recv:label F:ip2 F:loss B:loss B:ip2 send:h join");
}

/* GPipe with 2 micro-batches: every forward, then each backward after its
 * micro-batch is restored and recomputed (the data layer is not rerun). */
static void test_gpipe_recomputes(void **state) {
  const char *cuts[] = {"relu"};
  expect_steps(0, 2, cuts, 2, CT_STAGES_GPIPE,
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
  expect_steps(0, 2, cuts, 3, CT_STAGES_1F1B,
               "F:data stash stash F:ip1 F:relu send:h send:label "
               "F:data stash stash F:ip1 F:relu send:h send:label "
               "restore F:ip1 F:relu recv:h B:relu B:ip1 "
               "F:data stash stash F:ip1 F:relu send:h send:label "
               "restore F:ip1 F:relu recv:h B:relu B:ip1 "
               "restore F:ip1 F:relu recv:h B:relu B:ip1 join");
  expect_steps(1, 2, cuts, 3, CT_STAGES_1F1B,
               "recv:h recv:label F:ip2 F:loss B:loss B:ip2 send:h "
               "recv:h recv:label F:ip2 F:loss B:loss B:ip2 send:h "
               "recv:h recv:label F:ip2 F:loss B:loss B:ip2 send:h join");
}

/* Three stages, the middle one the in-place ReLU alone: it receives h from
 * stage 0 and sends h on; the label goes from stage 0 to stage 2 directly. */
static void test_three_stages_in_place(void **state) {
  const char *cuts[] = {"ip1", "relu"};
  expect_steps(1, 3, cuts, 1, CT_STAGES_GPIPE, "recv:h F:relu send:h recv:h B:relu send:h join");
  expect_steps(2, 3, cuts, 1, CT_STAGES_GPIPE,
               "recv:label recv:h F:ip2 F:loss B:loss B:ip2 send:h join");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_stages_one_micro),
      cmocka_unit_test(test_gpipe_recomputes),
      cmocka_unit_test(test_1f1b_order),
      cmocka_unit_test(test_three_stages_in_place),
  };
  return cmocka_run_group_tests(tests, rn_setup, NULL);
}
