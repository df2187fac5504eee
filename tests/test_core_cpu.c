/* core/cpu.h: the CPU count, and subnormals flushed to zero in every thread
 * that computes: the context's thread, OpenMP's team, threads created
 * afterwards (as OpenBLAS's and the data pipeline's are). */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "core/context.h"
#include "core/cpu.h"
#include "core/parallel.h"
#include "core/mem.h"

static void test_cpu_count(void **state) {
  int n = ct_cpu_count();
  cpu_set_t set;
  assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
  assert_true(n >= 1);
  assert_true(n <= CPU_COUNT(&set)); /* a cgroup quota can only lower it */
  /* one CPU of the mask: one CPU */
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) {
      CPU_SET(c, &one);
      break;
    }
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
  assert_int_equal(ct_cpu_count(), 1);
  assert_int_equal(sched_setaffinity(0, sizeof set, &set), 0);
}

#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
#define CAN_FLUSH 1
#else
#define CAN_FLUSH 0
#endif

/* The product of two normal floats that is subnormal without FTZ. */
static float subnormal_product(void) {
  volatile float a = 1e-30f, b = 1e-10f;
  return a * b;
}

static void record_flushed(void *arg, size_t begin, size_t end) {
  int *ok = arg;
  for (size_t i = begin; i < end; i++) ok[i] = ct_cpu_subnormals_flushed() && subnormal_product() == 0.0f;
}

static void *thread_flushed(void *arg) {
  *(int *)arg = ct_cpu_subnormals_flushed() && subnormal_product() == 0.0f;
  return NULL;
}

static void test_context_flushes_every_thread(void **state) {
  if (!CAN_FLUSH) skip();
  assert_false(ct_cpu_subnormals_flushed()); /* a test program starts with IEEE subnormals */
  assert_true(subnormal_product() != 0.0f);
  ct_context ctx;
  ct_error err;
  assert_int_equal(ct_context_init(&ctx, CT_DEVICE_CPU, 1, &err), CT_OK);
  assert_true(ct_cpu_subnormals_flushed());
  assert_true(subnormal_product() == 0.0f);
  /* the pool: one index per thread (min_range 1) */
  int n = ct_parallel_threads();
  int ok[64] = {0};
  assert_true(n <= 64);
  ct_parallel_for((size_t)n, 1, record_flushed, ok);
  for (int i = 0; i < n; i++) assert_int_equal(ok[i], 1);
  /* a thread started now inherits the mode */
  pthread_t t;
  int inherited = 0;
  assert_int_equal(pthread_create(&t, NULL, thread_flushed, &inherited), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(inherited, 1);
  ct_context_free(&ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_cpu_count),
                                     cmocka_unit_test(test_context_flushes_every_thread)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
