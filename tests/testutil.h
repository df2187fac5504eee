/* Shared helpers for the cmocka tests.
 * Include after <stdarg.h>, <stddef.h>, <stdint.h>, <setjmp.h> and <cmocka.h>
 * (testutil.h includes them itself, in that order). */
#ifndef CT_TESTUTIL_H
#define CT_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Path of a real Caffe file under CORTADO_FIXTURES (static buffer per call
 * slot; valid until the 8th next call).  Fails the test when the folder is
 * missing. */
const char *tu_fixture(const char *name);
/* Path under the repository (CORTADO_SRC). */
const char *tu_src(const char *rel);
/* A fresh, empty scratch folder for this test under CORTADO_TMP. */
const char *tu_tmpdir(const char *test_name);
/* Path of the `cortado` command (CORTADO_BIN). */
const char *tu_cortado_bin(void);
/* Runs a shell command, captures stdout+stderr into *out (malloc'd, caller
 * frees) and returns the exit status (or -1). */
int tu_run(const char *cmd, char **out);
/* Reads a whole file (malloc'd, NUL-terminated); NULL on failure. */
char *tu_read_file(const char *path, size_t *len);
/* Writes a whole file; fails the test on error. */
void tu_write_file(const char *path, const char *data, size_t len);

/* Deterministic uniform floats in [lo, hi). */
void tu_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed);
/* max |a-b| / max(|b|, floor) over n values. */
double tu_max_rel_err(const float *a, const float *b, size_t n, double floor);

/* True when a CUDA device is present; GPU tests call tu_require_gpu() first,
 * which exits 77 (ctest: skipped) when there is none. */
bool tu_have_gpu(void);
void tu_require_gpu(void);

/* argv[1], when given, limits the run to the tests whose names match it (a
 * cmocka pattern: * and ? wildcards), e.g. one test alone under
 * compute-sanitizer (scripts/device/check.sh tests). */
static inline void tu_filter_tests(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
}

#endif
