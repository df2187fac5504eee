/* Data-parallel loops over the host's cores, for the memory-bound layer code
 * (pooling, layout permutes, im2col, bias).
 *
 * The loops run on OpenMP's thread team when the build has OpenMP: oneDNN
 * (the fast convolution engine) runs on the same team, so the library keeps
 * one set of worker threads instead of two pools fighting over the cores.
 * Without OpenMP every loop runs on the calling thread.  The team size is
 * OpenMP's (OMP_NUM_THREADS, else the core count). */
#ifndef CT_CORE_PARALLEL_H
#define CT_CORE_PARALLEL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Runs fn(t) once on every thread of OpenMP's team of its largest size (the
 * team ct_parallel_for and oneDNN use later), t = 0 being the calling
 * thread: per-thread setup of the workers (floating-point mode, signal
 * mask).  Call it outside a parallel region; without OpenMP, fn(0). */
void ct_parallel_each_thread(void (*fn)(int thread));

/* The body of a loop: handles indices [begin, end). */
typedef void (*ct_range_fn)(void *arg, size_t begin, size_t end);

/* Calls fn(arg, begin, end) on disjoint contiguous ranges that cover [0, n),
 * one range per thread, and returns when all are done.  A range is never
 * shorter than min_range indices (except the only one), so small loops stay
 * on the calling thread; a call from inside a parallel region runs serially.
 * fn must not depend on which thread runs which range. */
void ct_parallel_for(size_t n, size_t min_range, ct_range_fn fn, void *arg);

/* The number of threads ct_parallel_for uses at most (1 without OpenMP). */
int ct_parallel_threads(void);

#ifdef __cplusplus
}
#endif

#endif
