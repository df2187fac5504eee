#include "core/cpu.h"

#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

/* MXCSR bits: flush-to-zero (results) and denormals-are-zero (inputs). */
#define MXCSR_FTZ 0x8000u
#define MXCSR_DAZ 0x0040u
/* AArch64 FPCR.FZ: both directions. */
#define FPCR_FZ ((uint64_t)1 << 24)

void ct_cpu_flush_subnormals(void) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr(_mm_getcsr() | MXCSR_FTZ | MXCSR_DAZ);
#elif defined(__aarch64__)
  uint64_t fpcr;
  __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
  __asm__ volatile("msr fpcr, %0" : : "r"(fpcr | FPCR_FZ));
#endif
}

bool ct_cpu_subnormals_flushed(void) {
#if defined(__x86_64__) || defined(__i386__)
  return (_mm_getcsr() & (MXCSR_FTZ | MXCSR_DAZ)) == (MXCSR_FTZ | MXCSR_DAZ);
#elif defined(__aarch64__)
  uint64_t fpcr;
  __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
  return (fpcr & FPCR_FZ) != 0;
#else
  return false;
#endif
}

/* ------------------------------------------------------------ CPU count */

/* The first two whitespace-separated words of the file at path into a and
 * b (b empty when there is one); false when it cannot be read. */
static bool read_words(const char *path, char *a, char *b, size_t size) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  char fmt[32];
  snprintf(fmt, sizeof fmt, "%%%zus %%%zus", size - 1, size - 1);
  a[0] = b[0] = '\0';
  int n = fscanf(f, fmt, a, b);
  fclose(f);
  return n >= 1;
}

/* CPUs the quota of cgroup folder `dir` allows, or 0 for no limit. */
static double dir_quota(const char *dir, bool v2) {
  char path[4096 + 32], a[64], b[64];
  if (v2) {
    snprintf(path, sizeof path, "%s/cpu.max", dir);
    if (!read_words(path, a, b, sizeof a) || strcmp(a, "max") == 0) return 0;
    double quota = atof(a), period = b[0] ? atof(b) : 100000.0;
    return quota > 0 && period > 0 ? quota / period : 0;
  }
  snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
  if (!read_words(path, a, b, sizeof a)) return 0;
  double quota = atof(a);
  snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
  if (quota <= 0 || !read_words(path, a, b, sizeof a)) return 0;
  double period = atof(a);
  return period > 0 ? quota / period : 0;
}

/* The smallest quota from the cgroup at mount + rel up to the mount point. */
static double walk_quota(const char *mount, const char *rel, bool v2) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s%s", mount, strcmp(rel, "/") == 0 ? "" : rel);
  size_t root = strlen(mount);
  double best = 0;
  for (;;) {
    double q = dir_quota(dir, v2);
    if (q > 0 && (best == 0 || q < best)) best = q;
    char *slash = strrchr(dir, '/');
    if (!slash || (size_t)(slash - dir) < root) break;
    *slash = '\0';
  }
  return best;
}

/* Whether the comma-separated controller list names "cpu". */
static bool names_cpu(const char *list) {
  for (const char *p = list; *p;) {
    size_t n = strcspn(p, ",");
    if (n == 3 && strncmp(p, "cpu", 3) == 0) return true;
    p += n + (p[n] == ',');
  }
  return false;
}

/* CPUs the process's cgroups allow, or 0 for no limit. */
static double cgroup_cpus(void) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return 0;
  char line[4096];
  double best = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char *c1 = strchr(line, ':');
    char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c1 = *c2 = '\0';
    const char *controllers = c1 + 1, *rel = c2 + 1;
    double q = 0;
    if (strcmp(line, "0") == 0 && !*controllers) {
      q = walk_quota("/sys/fs/cgroup", rel, true);
    } else if (names_cpu(controllers)) {
      q = walk_quota("/sys/fs/cgroup/cpu", rel, false);
      if (q == 0) q = walk_quota("/sys/fs/cgroup/cpu,cpuacct", rel, false);
    }
    if (q > 0 && (best == 0 || q < best)) best = q;
  }
  fclose(f);
  return best;
}

int ct_cpu_count(void) {
  cpu_set_t set;
  int n = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n < 1) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    n = online > 0 ? (int)online : 1;
  }
  double quota = cgroup_cpus();
  if (quota > 0 && ceil(quota) < n) n = (int)ceil(quota);
  return n < 1 ? 1 : n;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static void bf16_features(bool *avx512, bool *amx) {
  unsigned a, b, c, d;
  *avx512 = *amx = false;
  if (__get_cpuid_max(0, NULL) < 7) return;
  __cpuid_count(7, 0, a, b, c, d);
  *amx = (d >> 22) & 1u; /* AMX-BF16 */
  __cpuid_count(7, 1, a, b, c, d);
  *avx512 = (a >> 5) & 1u; /* AVX512_BF16 */
}
#else
static void bf16_features(bool *avx512, bool *amx) { *avx512 = *amx = false; }
#endif

bool ct_cpu_has_bf16(void) {
  bool avx512, amx;
  bf16_features(&avx512, &amx);
  return avx512 || amx;
}

const char *ct_cpu_bf16_isa(void) {
  bool avx512, amx;
  bf16_features(&avx512, &amx);
  if (avx512 && amx) return "AMX-BF16, AVX512_BF16";
  if (amx) return "AMX-BF16";
  if (avx512) return "AVX512_BF16";
  return "none";
}
