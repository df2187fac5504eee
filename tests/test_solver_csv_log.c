/* The Caffe2-style CSV training log: file naming, the first line and the
 * header, rows with times from a fixed clock, and the solver observer (row
 * per display, exact counts, accuracy from the nets' outputs, -1 without a
 * test net). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "parallel/dp.h"
#include "proto/textformat.h"
#include "solvers/csv_log.h"
#include "testutil.h"

static double g_now;
static double fake_clock(void) { return g_now; }

/* 2026-11-22 10:15:00 UTC */
static const time_t k_start = 1795342500;

static void use_utc(void) {
  setenv("TZ", "UTC", 1);
  tzset();
}

static void test_name_from_params_and_time(void **state) {
  use_utc();
  char buf[128];
  ct_csv_log_name("resnet50_gpu2_b256_L1000_lr0.10", k_start, buf, sizeof buf);
  assert_string_equal(buf, "resnet50_gpu2_b256_L1000_lr0.10_20261122_101500.csv");
}

static void test_rows_in_directory(void **state) {
  use_utc();
  const char *dir = tu_tmpdir("csv_rows");
  char path[1024];
  snprintf(path, sizeof path, "%s/", dir);
  ct_csv_log_opts o = {.path = path, .expname = "run_gpu0", .params = "Namespace(batch_size=4)",
                       .epoch_size = 10, .start_time = k_start, .clock = fake_clock};
  ct_csv_log *log;
  ct_error err;
  g_now = 100.0;
  assert_int_equal(ct_csv_log_open(&log, &o, &err), CT_OK);
  char want_path[1100];
  snprintf(want_path, sizeof want_path, "%s/run_gpu0_20261122_101500.csv", dir);
  assert_string_equal(ct_csv_log_path(log), want_path);
  g_now = 102.0;
  ct_csv_log_row r1 = {.cumulative_input_count = 8, .cumulative_batch_count = 2, .accuracy = 0.5,
                       .epoch = 0, .learning_rate = 0.1, .loss = 2.25, .test_accuracy = -1};
  assert_int_equal(ct_csv_log_write(log, &r1, &err), CT_OK);
  g_now = 106.0;
  ct_csv_log_row r2 = {.cumulative_input_count = 24, .cumulative_batch_count = 6, .accuracy = -1,
                       .epoch = 2, .learning_rate = 0.01, .loss = 1.5, .test_accuracy = 0.75};
  assert_int_equal(ct_csv_log_write(log, &r2, &err), CT_OK);
  ct_csv_log_close(log);
  char *text = tu_read_file(want_path, NULL);
  assert_string_equal(text,
                      "# Namespace(batch_size=4)\n" CT_CSV_LOG_HEADER "\n"
                      "2.000000,2.000000,8,8,2,4.000,0.5,0,0.1,2.25,-1\n"
                      "4.000000,6.000000,16,24,6,4.000,-1,2,0.01,1.5,0.75\n");
  free(text);
}

static void test_exact_file_and_errors(void **state) {
  const char *dir = tu_tmpdir("csv_exact");
  char path[1024];
  snprintf(path, sizeof path, "%s/mine.csv", dir);
  ct_csv_log_opts o = {.path = path, .expname = "ignored", .clock = fake_clock};
  ct_csv_log *log;
  ct_error err;
  assert_int_equal(ct_csv_log_open(&log, &o, &err), CT_OK);
  assert_string_equal(ct_csv_log_path(log), path);
  ct_csv_log_close(log);
  char *text = tu_read_file(path, NULL);
  assert_string_equal(text, "# \n" CT_CSV_LOG_HEADER "\n");
  free(text);

  snprintf(path, sizeof path, "%s/no/such/dir/x.csv", dir);
  assert_int_equal(ct_csv_log_open(&log, &o, &err), CT_ERR_IO);
  assert_non_null(strstr(err.msg, "no/such/dir/x.csv: cannot create the file"));
  o.path = "";
  assert_int_equal(ct_csv_log_open(&log, &o, &err), CT_ERR_INVALID);
  o.path = dir;
  o.expname = NULL;
  assert_int_equal(ct_csv_log_open(&log, &o, &err), CT_ERR_INVALID);
  assert_non_null(strstr(err.msg, "a run name is needed"));
}

/* Softmax over 3 classes of 4 records; all weights start at zero so that
 * every class ties and Caffe's Accuracy counts the label as right (1). */
static const char *k_net =
    "name: 'tiny'\n"
    "layer { name: 'data' type: 'DummyData' top: 'x' top: 'label'\n"
    "  dummy_data_param { shape { dim: 4 dim: 5 } shape { dim: 4 }\n"
    "    data_filler { type: 'gaussian' std: 1 } data_filler { type: 'constant' value: 1 } } }\n"
    "layer { name: 'ip' type: 'InnerProduct' bottom: 'x' top: 'ip'\n"
    "  inner_product_param { num_output: 3 weight_filler { type: 'constant' value: 0 } } }\n"
    "layer { name: 'loss' type: 'SoftmaxWithLoss' bottom: 'ip' bottom: 'label' top: 'loss' }\n"
    "layer { name: 'acc' type: 'Accuracy' bottom: 'ip' bottom: 'label' top: '%s'\n"
    "  include { phase: %s } }\n";

/* Trains the tiny net for 6 iterations with display 2 into a CSV file and
 * returns the file's text. */
static char *train_tiny_on(const char *name, const char *acc_top, const char *acc_phase, bool with_test,
                           int workers) {
  char net[2048], text[4096];
  snprintf(net, sizeof net, k_net, acc_top, acc_phase);
  snprintf(text, sizeof text,
           "net_param { %s }\n%s"
           "base_lr: 0.1 lr_policy: 'step' stepsize: 4 gamma: 0.5 max_iter: 6 display: 2 "
           "momentum: 0.9 random_seed: 3 average_loss: 1 snapshot_after_train: false\n",
           net, with_test ? "test_iter: 1 test_interval: 4 test_initialization: false\n" : "");
  ProtobufCMessage *m;
  ct_error err;
  if (ct_text_parse(&caffe__solver_parameter__descriptor, text, strlen(text), "solver", &m, &err) != CT_OK)
    fail_msg("%s", err.msg);
  const char *dir = tu_tmpdir(name);
  char path[1024];
  snprintf(path, sizeof path, "%s/log.csv", dir);
  ct_csv_log_opts lo = {.path = path, .params = "p", .epoch_size = 10};
  ct_csv_log *log;
  assert_int_equal(ct_csv_log_open(&log, &lo, &err), CT_OK);
  ct_solver_opts so = {.quiet_nets = true, .on_display = ct_csv_log_on_display, .display_user = log};
  if (workers > 1) {
    /* CPU workers as threads: the options reach every worker, the root writes */
    ct_dp_job job = {.solver_param = (Caffe__SolverParameter *)m, .solver_opts = so};
    if (ct_dp_train_threads(&job, NULL, workers, &err) != CT_OK) fail_msg("%s", err.msg);
  } else {
    ct_context ctx;
    assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, &err), CT_OK);
    ct_solver *s;
    if (ct_solver_init(&s, (Caffe__SolverParameter *)m, &so, &ctx, &err) != CT_OK) fail_msg("%s", err.msg);
    if (ct_solver_solve(s, NULL, &err) != CT_OK) fail_msg("%s", err.msg);
    ct_solver_free(s);
    ct_context_free(&ctx);
  }
  ct_csv_log_close(log);
  protobuf_c_message_free_unpacked(m, NULL);
  return tu_read_file(path, NULL);
}

static char *train_tiny(const char *name, const char *acc_top, const char *acc_phase, bool with_test) {
  return train_tiny_on(name, acc_top, acc_phase, with_test, 1);
}

typedef struct {
  long long input_count, cum_inputs, batches, epoch;
  double accuracy, lr, loss, test_accuracy;
} parsed_row;

/* Parses the rows after the two first lines; returns how many. */
static int parse_rows(const char *text, parsed_row *rows, int max) {
  const char *p = strchr(text, '\n');
  assert_non_null(p);
  p = strchr(p + 1, '\n');
  assert_non_null(p);
  int n = 0;
  for (p++; *p && n < max; n++) {
    double t, ct, ips;
    parsed_row *r = &rows[n];
    int got = sscanf(p, "%lf,%lf,%lld,%lld,%lld,%lf,%lf,%lld,%lf,%lf,%lf", &t, &ct, &r->input_count,
                     &r->cum_inputs, &r->batches, &ips, &r->accuracy, &r->epoch, &r->lr, &r->loss,
                     &r->test_accuracy);
    assert_int_equal(got, 11);
    assert_true(t >= 0 && ct >= t && ips >= 0);
    p = strchr(p, '\n');
    assert_non_null(p);
    p++;
  }
  return n;
}

static void test_solver_rows_without_test(void **state) {
  ct_log_set_level(CT_LOG_WARNING);
  char *text = train_tiny("csv_solver_train", "accuracy", "TRAIN", false);
  assert_true(strncmp(text, "# p\n" CT_CSV_LOG_HEADER "\n", strlen("# p\n" CT_CSV_LOG_HEADER "\n")) == 0);
  parsed_row r[8];
  /* displays at 0 (no row: nothing trained yet), 2, 4 and the final 6 */
  assert_int_equal(parse_rows(text, r, 8), 3);
  const long long batches[3] = {2, 4, 6}, epochs[3] = {0, 1, 2};
  /* the rate of the latest update: iterations 1 and 3 use 0.1, iteration 5 0.05 */
  const double lrs[3] = {0.1, 0.1, 0.05};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(r[i].batches, batches[i]);
    assert_int_equal(r[i].cum_inputs, batches[i] * 4);
    assert_int_equal(r[i].input_count, 8);
    assert_int_equal(r[i].epoch, epochs[i]);
    assert_true(r[i].lr == lrs[i]);
    assert_true(r[i].accuracy >= 0 && r[i].accuracy <= 1);
    assert_true(r[i].loss > 0 && r[i].loss < 1.2);
    assert_true(r[i].test_accuracy == -1);
  }
  free(text);
}

static void test_solver_rows_with_test(void **state) {
  ct_log_set_level(CT_LOG_WARNING);
  /* the accuracy layer only in TEST: the train rows say -1 */
  char *text = train_tiny("csv_solver_test", "accuracy_top1", "TEST", true);
  parsed_row r[8];
  assert_int_equal(parse_rows(text, r, 8), 3);
  assert_true(r[0].accuracy == -1 && r[1].accuracy == -1 && r[2].accuracy == -1);
  /* no test before iteration 4; the one at 4 is the latest at 4 and 6 */
  assert_true(r[0].test_accuracy == -1);
  assert_true(r[1].test_accuracy >= 0 && r[1].test_accuracy <= 1);
  assert_true(r[2].test_accuracy == r[1].test_accuracy);
  free(text);
}

/* Two workers of batch 4: one row per display (only the root writes), the
 * inputs counted over both. */
static void test_solver_rows_data_parallel(void **state) {
  ct_log_set_level(CT_LOG_WARNING);
  char *text = train_tiny_on("csv_solver_dp", "accuracy", "TEST", true, 2);
  parsed_row r[8];
  assert_int_equal(parse_rows(text, r, 8), 3);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(r[i].batches, 2 * (i + 1));
    assert_int_equal(r[i].cum_inputs, 8 * 2 * (i + 1));
    assert_int_equal(r[i].input_count, 16);
    assert_int_equal(r[i].epoch, (8 * 2 * (i + 1) - 1) / 10);
  }
  assert_true(r[0].test_accuracy == -1 && r[1].test_accuracy >= 0);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_name_from_params_and_time),
      cmocka_unit_test(test_rows_in_directory),
      cmocka_unit_test(test_exact_file_and_errors),
      cmocka_unit_test(test_solver_rows_without_test),
      cmocka_unit_test(test_solver_rows_with_test),
      cmocka_unit_test(test_solver_rows_data_parallel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
