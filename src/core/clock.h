/* Time for timeouts, waits and rates: seconds on the monotonic clock (not
 * the wall clock, which may jump). */
#ifndef CT_CORE_CLOCK_H
#define CT_CORE_CLOCK_H

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds since an arbitrary fixed point, from CLOCK_MONOTONIC. */
double ct_monotonic_s(void);

#ifdef __cplusplus
}
#endif

#endif
