#include <string.h>

#include "testutil.h"
#include "core/status.h"

static void test_error_set_and_prefix(void **state) {
  ct_error err;
  ct_error_clear(&err);
  assert_int_equal(err.code, CT_OK);
  assert_int_equal(ct_error_set(&err, CT_ERR_IO, "cannot open %s", "x.bin"), CT_ERR_IO);
  assert_string_equal(err.msg, "cannot open x.bin");
  ct_error_prefix(&err, "%s:%d", "a.prototxt", 3);
  assert_string_equal(err.msg, "a.prototxt:3: cannot open x.bin");
  assert_int_equal(ct_error_set(NULL, CT_ERR_PARSE, "ignored"), CT_ERR_PARSE);
  assert_string_equal(ct_status_name(CT_ERR_NOTFOUND), "not found");
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_error_set_and_prefix)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
