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

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_edit_distance),
                                     cmocka_unit_test(test_suggest)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
