/* The iteration clock and iteration slots.
 *
 * The clock numbers the training iterations a runtime launched (1, 2, ...).
 * On a GPU the device keeps its own count too, advanced by a node at the
 * start of each iteration's work (ct_iter_clock_advance_async), and an event
 * marks the end of each of the last two iterations.
 *
 * Slots are the few values one iteration's work reads (its learning rate, a
 * stop wish) or writes (its loss, clip norm, agreed requests), kept twice so
 * that the host can launch iteration n + 1 while n still runs and read n's
 * values after it.  Work on the device reads and writes the slot of the
 * device's count, the host the slot of the iteration it fills or reads,
 * (seq & 1).  On a GPU they live in pinned host memory that the device reads
 * and writes in place; on the CPU in plain memory, and the iteration being
 * launched is the one whose slot the work uses (the CPU runs it at once). */
#ifndef CT_RUNTIME_SLOTS_H
#define CT_RUNTIME_SLOTS_H

#include <stddef.h>

#include "core/context.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_iter_clock {
  ct_context *ctx;
  unsigned launched; /* iterations launched so far; the last one's number */
  unsigned *dev;     /* (1) GPU: the device's count; NULL on the CPU */
  void *end[2];      /* GPU: cudaEvent_t, the end of the last iteration with (seq & 1) == 0, 1 */
} ct_iter_clock;

/* A clock at 0 for ctx.  Fatal on a device error. */
void ct_iter_clock_init(ct_iter_clock *c, ct_context *ctx);
void ct_iter_clock_free(ct_iter_clock *c);
/* Enqueues ++count on the device (capturable; nothing on the CPU).  The
 * program runs it first, once per iteration; the host adds 1 to launched
 * itself when it launches the program. */
void ct_iter_clock_advance_async(ct_iter_clock *c);
/* Records the end of iteration c->launched: after all the work enqueued so
 * far (nothing on the CPU).  Called right after the launch. */
void ct_iter_clock_record_end(ct_iter_clock *c);
/* The event of iteration seq's end (a cudaEvent_t; NULL on the CPU): valid
 * for the last two launched iterations. */
void *ct_iter_clock_end_event(const ct_iter_clock *c, unsigned seq);
/* Waits on the host for iteration seq's end (one of the last two launched;
 * at once on the CPU). */
void ct_iter_clock_wait(const ct_iter_clock *c, unsigned seq);

/* Two zeroed slots of slot_bytes (a multiple of 4, at most 256) for ctx's
 * device.  Fatal on exhaustion. */
void *ct_slots_new(const ct_context *ctx, size_t slot_bytes);
void ct_slots_free(const ct_context *ctx, void *slots);
/* The host's view of the slot of iteration seq. */
static inline void *ct_slot(void *slots, size_t slot_bytes, unsigned seq) {
  return (char *)slots + (size_t)(seq & 1u) * slot_bytes;
}
/* On stream (NULL: the compute stream), capturable: copies the slot of the
 * iteration under way into dst (load) or src into that slot (store); on the
 * CPU a plain copy with the slot of c->launched.  dst and src are device
 * memory (host memory on the CPU). */
void ct_slots_load_async(const ct_iter_clock *c, void *stream, void *dst, const void *slots,
                         size_t slot_bytes);
void ct_slots_store_async(const ct_iter_clock *c, void *stream, void *slots, const void *src,
                          size_t slot_bytes);

/* What an iteration leaves for the host at its end: its loss sum and the
 * context's deferred-check word (core/context.h). */
typedef struct ct_loss_slot {
  double loss;
  unsigned check;
  unsigned pad;
} ct_loss_slot;

/* Enqueues (capturable) the copy of *loss and *check (device memory) into
 * the slot of the iteration under way of slots (two ct_loss_slot). */
void ct_slots_gpu_store_loss(const ct_iter_clock *c, void *slots, const double *loss,
                             const unsigned *check);

/* slots.cu (GPU builds) or the stubs of slots.c: the device half. */
void ct_iter_clock_gpu_init(ct_iter_clock *c);
void ct_iter_clock_gpu_free(ct_iter_clock *c);
void ct_iter_clock_gpu_advance(ct_iter_clock *c);
void ct_iter_clock_gpu_record_end(ct_iter_clock *c);
void ct_iter_clock_gpu_wait(void *event);
void *ct_slots_gpu_new(size_t slot_bytes);
void ct_slots_gpu_free(void *slots);
void ct_slots_gpu_copy(const ct_iter_clock *c, void *stream, void *slots, void *dev,
                       size_t slot_bytes, int load);

#ifdef __cplusplus
}
#endif

#endif
