/* The host CPUs as this process may use them, and the floating-point mode of
 * the threads that compute on them.
 *
 * Subnormal floats (below 1.2e-38) are handled by microcode on most x86 and
 * many ARM cores, at 10-100 times the cost of a normal operation; a net whose
 * gradients decay into that range (a loss near 0) then trains several times
 * slower.  Cortado computes with subnormals flushed to zero, as TensorFlow
 * does: FTZ (results) and DAZ (inputs) on x86, FPCR.FZ on AArch64.  Threads
 * inherit the mode of the thread that creates them (pthread_create copies the
 * floating-point environment), so setting it in the main thread before any
 * pool starts covers the libraries' workers too; the `cortado` command does
 * that before the libraries' constructors run (src/cli/early.c). */
#ifndef CT_CORE_CPU_H
#define CT_CORE_CPU_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The CPUs this process may run on: its affinity mask (taskset, cpusets),
 * capped by the CPU quota of its cgroup (cgroup v2 cpu.max, v1
 * cpu.cfs_quota_us / cpu.cfs_period_us, rounded up), at least 1.  A
 * container given 2 CPUs of a 64-core host counts 2, where sysconf counts
 * 64. */
int ct_cpu_count(void);

/* Flushes subnormal results and inputs to zero in the calling thread (and in
 * the threads it creates from now on).  A no-op on other architectures. */
void ct_cpu_flush_subnormals(void);

/* Whether the calling thread flushes subnormals (false where there is no
 * such mode). */
bool ct_cpu_subnormals_flushed(void);

/* Whether the CPU computes bfloat16 products in hardware (x86: AVX512_BF16
 * or AMX-BF16, as oneDNN's bf16 kernels need), and its name for them in
 * messages ("AMX-BF16, AVX512_BF16"). */
bool ct_cpu_has_bf16(void);
const char *ct_cpu_bf16_isa(void);

#ifdef __cplusplus
}
#endif

#endif
