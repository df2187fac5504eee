#include "core/parallel.h"

#ifdef _OPENMP
#include <omp.h>
#endif

int ct_parallel_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

void ct_parallel_each_thread(void (*fn)(int thread)) {
#ifdef _OPENMP
  if (!omp_in_parallel()) {
#pragma omp parallel num_threads(omp_get_max_threads())
    fn(omp_get_thread_num());
    return;
  }
#endif
  fn(0);
}

void ct_parallel_for(size_t n, size_t min_range, ct_range_fn fn, void *arg) {
  if (n == 0) return;
  if (min_range == 0) min_range = 1;
  size_t pieces = n / min_range;
#ifdef _OPENMP
  int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  int nt = 1;
#endif
  if ((size_t)nt > pieces) nt = (int)pieces;
  if (nt <= 1) {
    fn(arg, 0, n);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
  {
    const size_t t = (size_t)omp_get_thread_num(), T = (size_t)omp_get_num_threads();
    const size_t begin = n / T * t + (t < n % T ? t : n % T);
    const size_t end = begin + n / T + (t < n % T ? 1 : 0);
    if (begin < end) fn(arg, begin, end);
  }
#endif
}
