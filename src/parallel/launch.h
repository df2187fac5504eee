/* Local worker processes: the launcher behind `cortado train --gpu=0,1,...`
 * (one process per GPU).  The launching process starts a program n times,
 * each copy told its rank through the environment, and waits for them like
 * torchrun does: when one fails it stops the others, and it passes on the
 * signals sent to it alone.
 *
 * A worker finds its rank with ct_launched_worker, which also ties its life
 * to the launcher's (it ends when the launcher dies, even by SIGKILL). */
#ifndef CT_PARALLEL_LAUNCH_H
#define CT_PARALLEL_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The environment variable that tells a worker "RANK,COUNT,LAUNCHER_PID". */
#define CT_LAUNCH_WORKER_ENV "CORTADO_DP_WORKER"

/* The sigqueue value of a signal the launcher passes on (a SIGTERM sent to
 * the run), so that a worker tells it from the SIGTERM the launcher sends
 * of its own when another worker failed (a plain kill). */
#define CT_LAUNCH_FORWARDED 0x43540001

/* How a launch ended when a worker failed. */
typedef struct ct_launch_failure {
  int rank;       /* the first worker that failed (-1: none) */
  char why[160];  /* "exited with status 1", "was ended by signal 6 (Aborted)",
                     "could not be started: ..." */
} ct_launch_failure;

/* Starts n workers (n >= 1): each runs `path` with argv (NULL-terminated,
 * argv[0] included) and this process's environment plus
 * CT_LAUNCH_WORKER_ENV for its rank and, when extra is not NULL, the
 * NAME=VALUE strings of extra (NULL-terminated; they replace variables of
 * the same names).  Waits for all.  While they run, SIGTERM and SIGINT/SIGHUP
 * sent to this process alone (by kill(2); a terminal's signal reaches the
 * whole group already) are passed to every worker, by sigqueue with the
 * value CT_LAUNCH_FORWARDED.  When a worker exits with a status other than
 * 0, or is ended by a signal, the others get SIGTERM (a plain kill), then
 * SIGKILL after grace_s seconds.  Returns true when every
 * worker exited with 0, else false with *failure set.  Only the workers are
 * waited for (by pid), never the caller's other children. */
bool ct_launch_workers(const char *path, char *const *argv, int n, const char *const *extra,
                       double grace_s, ct_launch_failure *failure);

/* In a worker started by ct_launch_workers: true with its rank and the
 * worker count, after arranging to receive SIGTERM when the launcher dies
 * (and ending at once when it already has).  False in any other process. */
bool ct_launched_worker(int *rank, int *count);

#ifdef __cplusplus
}
#endif

#endif
