/* The trace recorder and writer (core/trace.h): nothing is recorded while
 * off or outside the iteration window, the window opens at iteration FIRST
 * and closes after LAST, names are escaped in the JSON, events land on the
 * tracks asked for, and the file is one JSON object. */
#include "testutil.h"
#include "core/fileio.h"
#include "core/trace.h"

#include <stdio.h>
#include <unistd.h>

static void test_off(void **state) {
  ct_trace_free();
  assert_false(ct_trace_enabled());
  assert_false(ct_trace_on());
}

static void test_window(void **state) {
  ct_trace_start(2, 3, 0);
  assert_true(ct_trace_enabled());
  for (long long it = 0; it < 6; it++) {
    const double t0 = ct_trace_iteration_begin(it);
    assert_int_equal(ct_trace_on(), it >= 2 && it <= 3);
    if (ct_trace_on()) {
      const ct_trace_args a = {.type = "Convolution"};
      ct_trace_complete(CT_TRACE_COMPUTE, "forward", "conv \"1\"\n", t0, ct_trace_now(), &a);
      const ct_trace_args r = {.bytes = 4096, .index_name = "bucket", .index = 0};
      ct_trace_complete(CT_TRACE_COMM, "reduce", "all-reduce", t0, t0 + 2, &r);
    }
    ct_trace_iteration_end(it, t0);
    assert_false(ct_trace_on() && it >= 3);
  }
  size_t len;
  char *json = ct_trace_take_json(&len);
  assert_int_equal(len, strlen(json));
  assert_null(strstr(json, "\"iteration 1\""));
  assert_non_null(strstr(json, "\"iteration 2\""));
  assert_non_null(strstr(json, "\"iteration 3\""));
  assert_null(strstr(json, "\"iteration 4\""));
  assert_non_null(strstr(json, "\"name\":\"conv \\\"1\\\"\\u000a\""));
  assert_non_null(strstr(json, "\"args\":{\"type\":\"Convolution\"}"));
  /* 4096 bytes in 2 us: 2048 MB/s */
  assert_non_null(strstr(json, "\"tid\":2,\"args\":{\"bucket\":0,\"bytes\":4096,\"algbw_GBps\":2.0480"));
  assert_non_null(strstr(json, "\"name\":\"thread_name\",\"pid\":0,\"tid\":2,\"args\":{\"name\":\"communication\"}"));
  free(json);
  /* taken: no window opens again */
  ct_trace_iteration_begin(2);
  assert_false(ct_trace_on());
  ct_trace_free();
}

/* An iteration launched ahead of the last one before the window: the
 * window opens while the earlier one is still to end, which must not be
 * recorded (a GPU run without CUDA graphs traced iteration 1 of 2:5). */
static void test_window_launched_ahead(void **state) {
  ct_trace_start(2, 5, 0);
  const double t1 = ct_trace_iteration_begin(1);
  const double t2 = ct_trace_iteration_begin(2); /* launched ahead */
  assert_true(ct_trace_on());
  assert_true(ct_trace_wants(2));
  assert_false(ct_trace_wants(1));
  ct_trace_iteration_end(1, t1);
  ct_trace_iteration_end(2, t2);
  /* and the last one, whose successor closed the window before it ended */
  const double t5 = ct_trace_iteration_begin(5);
  ct_trace_iteration_begin(6);
  assert_false(ct_trace_on());
  ct_trace_iteration_end(5, t5);
  size_t len;
  char *json = ct_trace_take_json(&len);
  assert_null(strstr(json, "\"iteration 1\""));
  assert_non_null(strstr(json, "\"iteration 2\""));
  assert_non_null(strstr(json, "\"iteration 5\""));
  assert_null(strstr(json, "\"iteration 6\""));
  free(json);
  assert_false(ct_trace_wants(3)); /* taken */
  ct_trace_free();
}

static void test_write(void **state) {
  char path[512];
  snprintf(path, sizeof path, "%s/trace.json", tu_tmpdir("core_trace_write"));
  ct_trace_start(0, -1, 0);
  const double t0 = ct_trace_iteration_begin(0);
  ct_trace_complete(CT_TRACE_DATA, "data", "load", t0, t0 + 1, NULL);
  ct_trace_iteration_end(0, t0);
  ct_error err;
  assert_int_equal(ct_trace_write(path, &err), CT_OK);
  char *text;
  size_t len;
  assert_int_equal(ct_file_read_all(path, &text, &len, 1 << 20, &err), CT_OK);
  assert_memory_equal(text, "{\"displayTimeUnit\":\"ms\"", 23);
  assert_string_equal(text + len - 4, "\n]}\n");
  assert_non_null(strstr(text, "\"args\":{\"name\":\"data 0\"}"));
  free(text);
  ct_trace_free();
  /* a process that is not rank 0 writes nothing */
  remove(path);
  ct_trace_start(0, -1, 1);
  assert_int_equal(ct_trace_write(path, &err), CT_OK);
  assert_int_equal(access(path, F_OK), -1);
  ct_trace_free();
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_off), cmocka_unit_test(test_window),
                                     cmocka_unit_test(test_window_launched_ahead),
                                     cmocka_unit_test(test_write)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
