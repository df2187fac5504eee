/* The iteration clock and slots (see slots.h): the host half and the CPU. */
#include "runtime/slots.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

#define SLOT_MAX_BYTES 256

static bool on_gpu(const ct_context *ctx) { return ctx->device != CT_DEVICE_CPU; }

void ct_iter_clock_init(ct_iter_clock *c, ct_context *ctx) {
  memset(c, 0, sizeof *c);
  c->ctx = ctx;
  if (on_gpu(ctx)) ct_iter_clock_gpu_init(c);
}

void ct_iter_clock_free(ct_iter_clock *c) {
  if (c->ctx && on_gpu(c->ctx)) ct_iter_clock_gpu_free(c);
  memset(c, 0, sizeof *c);
}

void ct_iter_clock_advance_async(ct_iter_clock *c) {
  if (c->dev) ct_iter_clock_gpu_advance(c);
}

void ct_iter_clock_record_end(ct_iter_clock *c) {
  if (c->dev) ct_iter_clock_gpu_record_end(c);
}

void *ct_iter_clock_end_event(const ct_iter_clock *c, unsigned seq) {
  CT_ASSERT(seq == c->launched || seq + 1 == c->launched);
  return c->dev ? c->end[seq & 1u] : NULL;
}

void ct_iter_clock_wait(const ct_iter_clock *c, unsigned seq) {
  void *event = ct_iter_clock_end_event(c, seq);
  if (event) ct_iter_clock_gpu_wait(event);
}

void *ct_slots_new(const ct_context *ctx, size_t slot_bytes) {
  CT_ASSERT(slot_bytes > 0 && slot_bytes % 4 == 0 && slot_bytes <= SLOT_MAX_BYTES);
  return on_gpu(ctx) ? ct_slots_gpu_new(slot_bytes) : ct_xcalloc(2, slot_bytes);
}

void ct_slots_free(const ct_context *ctx, void *slots) {
  if (!slots) return;
  if (on_gpu(ctx)) ct_slots_gpu_free(slots);
  else free(slots);
}

static void copy(const ct_iter_clock *c, void *stream, void *slots, void *mem, size_t slot_bytes,
                 int load) {
  CT_ASSERT(slot_bytes > 0 && slot_bytes % 4 == 0 && slot_bytes <= SLOT_MAX_BYTES);
  if (c->dev) {
    ct_slots_gpu_copy(c, stream, slots, mem, slot_bytes, load);
    return;
  }
  void *slot = ct_slot(slots, slot_bytes, c->launched);
  if (load) memcpy(mem, slot, slot_bytes);
  else memcpy(slot, mem, slot_bytes);
}

void ct_slots_load_async(const ct_iter_clock *c, void *stream, void *dst, const void *slots,
                         size_t slot_bytes) {
  copy(c, stream, (void *)slots, dst, slot_bytes, 1);
}

void ct_slots_store_async(const ct_iter_clock *c, void *stream, void *slots, const void *src,
                          size_t slot_bytes) {
  copy(c, stream, slots, (void *)src, slot_bytes, 0);
}

#ifndef CORTADO_HAVE_CUDA
/* CPU-only builds: no context is ever on a GPU. */
void ct_iter_clock_gpu_init(ct_iter_clock *c) { ct_abort(__FILE__, __LINE__, "GPU clock in a CPU-only build"); }
void ct_iter_clock_gpu_free(ct_iter_clock *c) {}
void ct_iter_clock_gpu_advance(ct_iter_clock *c) {}
void ct_iter_clock_gpu_record_end(ct_iter_clock *c) {}
void ct_iter_clock_gpu_wait(void *event) {}
void *ct_slots_gpu_new(size_t slot_bytes) {
  ct_abort(__FILE__, __LINE__, "GPU slots in a CPU-only build");
}
void ct_slots_gpu_free(void *slots) {}
void ct_slots_gpu_store_loss(const ct_iter_clock *c, void *slots, const double *loss,
                             const unsigned *check) {}
void ct_slots_gpu_copy(const ct_iter_clock *c, void *stream, void *slots, void *dev,
                       size_t slot_bytes, int load) {}
#endif
