#include "testutil.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef CORTADO_HAVE_CUDA
#include "gpu/gpu.h"
#endif

static char g_paths[8][4096];
static int g_next;

static char *next_slot(void) {
  char *p = g_paths[g_next];
  g_next = (g_next + 1) % 8;
  return p;
}

static const char *env_or_fail(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) {
    fprintf(stderr, "test environment: %s is not set (run through ctest)\n", name);
    exit(1);
  }
  return v;
}

const char *tu_fixture(const char *name) {
  const char *dir = env_or_fail("CORTADO_FIXTURES");
  struct stat st;
  if (stat(dir, &st) != 0) {
    fprintf(stderr, "fixtures folder %s is missing (set CORTADO_FIXTURES_DIR)\n", dir);
    exit(1);
  }
  char *p = next_slot();
  snprintf(p, 4096, "%s/%s", dir, name);
  return p;
}

const char *tu_src(const char *rel) {
  char *p = next_slot();
  snprintf(p, 4096, "%s/%s", env_or_fail("CORTADO_SRC"), rel);
  return p;
}

const char *tu_tmpdir(const char *test_name) {
  char *p = next_slot();
  snprintf(p, 4096, "%s/%s", env_or_fail("CORTADO_TMP"), test_name);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", p, p);
  if (system(cmd) != 0) {
    fprintf(stderr, "cannot make %s\n", p);
    exit(1);
  }
  return p;
}

const char *tu_cortado_bin(void) { return env_or_fail("CORTADO_BIN"); }

int tu_run(const char *cmd, char **out) {
  char full[8192];
  snprintf(full, sizeof full, "%s 2>&1", cmd);
  FILE *f = popen(full, "r");
  if (!f) return -1;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len < 2) buf = realloc(buf, cap *= 2);
  }
  buf[len] = '\0';
  int st = pclose(f);
  if (out) *out = buf; else free(buf);
  if (st == -1) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

char *tu_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(buf);
    return NULL;
  }
  fclose(f);
  buf[n] = '\0';
  if (len) *len = (size_t)n;
  return buf;
}

void tu_write_file(const char *path, const char *data, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

void tu_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    double u = (double)(s >> 11) / 9007199254740992.0;
    x[i] = (float)(lo + (hi - lo) * u);
  }
}

double tu_max_rel_err(const float *a, const float *b, size_t n, double floor) {
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)b[i]);
    double s = fabs((double)b[i]);
    if (s < floor) s = floor;
    double r = d / s;
    if (isnan(a[i]) != isnan(b[i])) r = INFINITY;
    if (r > worst) worst = r;
  }
  return worst;
}

bool tu_have_gpu(void) {
#ifdef CORTADO_HAVE_CUDA
  return ct_gpu_device_count() > 0;
#else
  return false;
#endif
}

void tu_require_gpu(void) {
  if (!tu_have_gpu()) {
    printf("no CUDA device: skipped\n");
    exit(77);
  }
}
