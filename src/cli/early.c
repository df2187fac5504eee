/* What the cortado command sets up before the libraries start their thread
 * pools.
 *
 * Subnormals: an entry of the executable's .preinit_array runs before the
 * initializers of every shared library, OpenBLAS's (which starts its worker
 * threads) included.  It flushes subnormals to zero in the main thread
 * (core/cpu.h), and every thread created afterwards inherits the mode:
 * OpenBLAS's and OpenMP's workers and the data threads.
 *
 * Threads: libgomp reads OMP_WAIT_POLICY and OMP_NUM_THREADS once, in its
 * constructor, and OpenBLAS reads OPENBLAS_NUM_THREADS in its own; no API
 * changes them later, and the environment cannot be changed before those
 * constructors run (the C library installs the original environment after
 * the .preinit_array).  So a command that computes on the CPU, started
 * without a wait policy in its environment, sets
 *   OMP_WAIT_POLICY=PASSIVE  idle OpenMP workers sleep at once instead of
 *                            spinning for milliseconds after every parallel
 *                            region: spinning gains little on a machine of
 *                            one's own, and on a shared one a spinning worker
 *                            takes the core from the thread it waits for
 *                            (LeNet trained 5 times slower beside two busy
 *                            processes on 2 cores);
 *   OMP_NUM_THREADS, OPENBLAS_NUM_THREADS  the CPUs this process may use
 *                            (affinity mask and cgroup quota), not the
 *                            host's core count;
 * and executes itself again (the same process, pid and arguments).  Values
 * the user set are kept; a wait policy of the user's (OMP_WAIT_POLICY or
 * GOMP_SPINCOUNT) means no re-execution at all. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/run_common.h"
#include "core/cpu.h"

/* A failing exit ends the process at once, after flushing stdio, without
 * the shared libraries' destructors: out of memory, libgomp's exit() when it
 * cannot start a thread left OpenBLAS's destructor joining a worker that
 * retried its buffer's mmap for ever (a hang under ulimit -v, found by
 * sh_memory_pressure).  Sanitizer builds keep the full exit, whose leak
 * check runs in it. */
#if !defined(__SANITIZE_ADDRESS__)
static void exit_fast_on_failure(int status, void *arg) {
  (void)arg;
  if (status == 0) return;
  fflush(NULL);
  _exit(status);
}
#endif

void ct_cli_install_fast_failure_exit(void) {
#if !defined(__SANITIZE_ADDRESS__)
  on_exit(exit_fast_on_failure, NULL);
#endif
}

static void cortado_early(int argc, char **argv, char **envp) {
  (void)argc, (void)argv, (void)envp;
  ct_cpu_flush_subnormals();
}

__attribute__((section(".preinit_array"), used)) static void (*const g_early)(int, char **,
                                                                              char **) = cortado_early;

void ct_cli_setup_threads(char **argv) {
  if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
  const bool set_threads = !getenv("OMP_NUM_THREADS");
  char count[16];
  snprintf(count, sizeof count, "%d", ct_cpu_count());
  if (set_threads) setenv("OMP_NUM_THREADS", count, 1);
  /* OpenBLAS falls back on OMP_NUM_THREADS: the same pool size for both */
  const bool set_blas = !getenv("OPENBLAS_NUM_THREADS") && !getenv("GOTO_NUM_THREADS");
  if (set_blas) setenv("OPENBLAS_NUM_THREADS", getenv("OMP_NUM_THREADS"), 1);
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);
  /* not re-executed: the pools keep what they started with, and the log says so */
  unsetenv("OMP_WAIT_POLICY");
  if (set_threads) unsetenv("OMP_NUM_THREADS");
  if (set_blas) unsetenv("OPENBLAS_NUM_THREADS");
}
