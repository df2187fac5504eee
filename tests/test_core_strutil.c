#include "testutil.h"
#include "core/strutil.h"

static void test_edit_distance(void **state) {
  assert_int_equal(ct_edit_distance("kernel_size", "kernel_size", 10), 0);
  assert_int_equal(ct_edit_distance("kernal_size", "kernel_size", 10), 1);
  assert_int_equal(ct_edit_distance("kenrel_size", "kernel_size", 10), 1); /* swap */
  assert_int_equal(ct_edit_distance("", "abc", 10), 3);
  assert_int_equal(ct_edit_distance("abcdef", "uvwxyz", 3), 3); /* capped */
}

static void test_suggest(void **state) {
  const char *names[] = {"num_output", "kernel_size", "stride", "pad"};
  assert_string_equal(ct_suggest("kernal_size", names, 4), "kernel_size");
  assert_string_equal(ct_suggest("strid", names, 4), "stride");
  assert_null(ct_suggest("weight_filler_xyz", names, 4));
  assert_null(ct_suggest("zz", names, 4));
}

static void test_text(void **state) {
  ct_text t = {0};
  ct_text_append(&t, "", 0);
  assert_non_null(t.s);
  assert_string_equal(t.s, "");
  for (int i = 0; i < 1000; i++) ct_text_printf(&t, "%d,", i);
  ct_text_append(&t, "end", 3);
  assert_int_equal(t.len, strlen(t.s));
  assert_memory_equal(t.s, "0,1,2,", 6);
  assert_string_equal(t.s + t.len - 7, "999,end");
  free(t.s);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_edit_distance),
                                     cmocka_unit_test(test_suggest), cmocka_unit_test(test_text)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
