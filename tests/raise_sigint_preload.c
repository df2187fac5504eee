/* Preloaded by sh_memory_pressure.sh: a library whose constructor raises
 * SIGINT, as OpenBLAS's does when it cannot start its threads (under a
 * tight ulimit -v), before the program's main runs. */
#include <signal.h>

__attribute__((constructor)) static void raise_at_load(void) { raise(SIGINT); }
