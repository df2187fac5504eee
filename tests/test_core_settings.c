/* The settings table (core/settings.h): every entry well formed, values
 * parsed by type with the default kept (and a warning) for a bad one, and
 * unknown CORTADO_* names found in the environment. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "core/settings.h"

/* Each entry: a CORTADO_ name, a meaning, a default that is valid for its
 * type, a numeric range for numbers, choices for choices; no name twice. */
static void test_table_is_well_formed(void **state) {
  int n = 0;
  const ct_setting_info *t = ct_settings_table(&n);
  assert_true(n >= 20);
  for (int i = 0; i < n; i++) {
    const ct_setting_info *s = &t[i];
    assert_int_equal(strncmp(s->name, "CORTADO_", 8), 0);
    assert_true(s->meaning && strlen(s->meaning) > 10);
    assert_ptr_equal(ct_setting_find(s->name), s);
    for (int j = 0; j < i; j++) assert_string_not_equal(t[j].name, s->name);
    switch (s->type) {
      case CT_SETTING_BOOL:
        assert_non_null(s->def);
        assert_true(strcmp(s->def, "0") == 0 || strcmp(s->def, "1") == 0);
        break;
      case CT_SETTING_INT:
      case CT_SETTING_NUMBER:
        assert_true(s->min < s->max);
        if (s->def) {
          double d = strtod(s->def, NULL);
          assert_true(d >= s->min && d <= s->max);
        }
        break;
      case CT_SETTING_CHOICE:
        assert_non_null(s->choices);
        assert_non_null(strstr(s->choices, s->def));
        break;
      case CT_SETTING_TEXT: break;
    }
  }
  assert_null(ct_setting_find("CORTADO_NOPE"));
}

static void test_values_by_type(void **state) {
  unsetenv("CORTADO_FUSE");
  assert_true(ct_setting_bool("CORTADO_FUSE"));
  const char *no[] = {"0", "false", "No", "OFF"}, *yes[] = {"1", "true", "YES", "on"};
  for (int i = 0; i < 4; i++) {
    setenv("CORTADO_FUSE", no[i], 1);
    assert_false(ct_setting_bool("CORTADO_FUSE"));
    setenv("CORTADO_FUSE", yes[i], 1);
    assert_true(ct_setting_bool("CORTADO_FUSE"));
  }
  setenv("CORTADO_FUSE", "maybe", 1); /* warned about, the default kept */
  assert_true(ct_setting_bool("CORTADO_FUSE"));
  unsetenv("CORTADO_FUSE");

  setenv("CORTADO_STOP_GRACE", "2.5", 1);
  assert_float_equal(ct_setting_number("CORTADO_STOP_GRACE"), 2.5, 0);
  setenv("CORTADO_STOP_GRACE", "-3", 1); /* out of range */
  assert_float_equal(ct_setting_number("CORTADO_STOP_GRACE"), 20.0, 0);
  unsetenv("CORTADO_STOP_GRACE");
  assert_float_equal(ct_setting_number("CORTADO_STOP_GRACE"), 20.0, 0);

  long v = -1;
  assert_false(ct_setting_given_int("CORTADO_DATA_THREADS", &v));
  setenv("CORTADO_DATA_THREADS", "3", 1);
  assert_true(ct_setting_given_int("CORTADO_DATA_THREADS", &v));
  assert_int_equal(v, 3);
  setenv("CORTADO_DATA_THREADS", "2.5", 1); /* not whole */
  assert_false(ct_setting_given_int("CORTADO_DATA_THREADS", &v));
  setenv("CORTADO_DATA_THREADS", "0", 1); /* below 1 */
  assert_false(ct_setting_given_int("CORTADO_DATA_THREADS", &v));
  unsetenv("CORTADO_DATA_THREADS");

  assert_string_equal(ct_setting_text("CORTADO_OWN_CONV"), "1");
  setenv("CORTADO_OWN_CONV", "force", 1);
  assert_string_equal(ct_setting_text("CORTADO_OWN_CONV"), "force");
  setenv("CORTADO_OWN_CONV", "always", 1); /* not a choice */
  assert_string_equal(ct_setting_text("CORTADO_OWN_CONV"), "1");
  unsetenv("CORTADO_OWN_CONV");
  assert_null(ct_setting_text("CORTADO_CUDNN_ALGOS"));

  /* an option's default: the environment's text when valid */
  setenv("CORTADO_COMM_TIMEOUT", "42", 1);
  assert_string_equal(ct_setting_raw("CORTADO_COMM_TIMEOUT"), "42");
  setenv("CORTADO_COMM_TIMEOUT", "soon", 1);
  assert_string_equal(ct_setting_raw("CORTADO_COMM_TIMEOUT"), "300");
  unsetenv("CORTADO_COMM_TIMEOUT");
}

static void test_unknown_names_are_found(void **state) {
  const int before = ct_settings_check_environment();
  setenv("CORTADO_FUZE", "0", 1);
  setenv("CORTADO_SOMETHING_ELSE", "1", 1);
  assert_int_equal(ct_settings_check_environment(), before + 2);
  unsetenv("CORTADO_FUZE");
  unsetenv("CORTADO_SOMETHING_ELSE");
  assert_int_equal(ct_settings_check_environment(), before);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_table_is_well_formed),
                                     cmocka_unit_test(test_values_by_type),
                                     cmocka_unit_test(test_unknown_names_are_found)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
