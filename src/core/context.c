#include "core/context.h"
#include "core/cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/parallel.h"
#include "core/settings.h"
#include "core/signals.h"
#include "core/device.h"

/* Every thread of OpenMP's team (ct_parallel_for's and oneDNN's) flushes
 * subnormals (core/cpu.h), for library users whose main thread did not set
 * the mode before the team started; the workers, not the caller, block the
 * asynchronous signals (core/signals.h). */
static void prepare_thread(int thread) {
  ct_cpu_flush_subnormals();
  if (thread != 0) ct_signals_block_async(NULL);
}

ct_status ct_context_init(ct_context *ctx, int device, uint64_t seed, ct_error *err) {
  memset(ctx, 0, sizeof *ctx);
  ctx->device = device;
  ctx->seed = seed;
  ctx->data_seed = seed;
  ctx->world = 1;
  ctx->tf32 = true;
  ctx->deterministic = ct_setting_bool("CORTADO_DETERMINISTIC");
  ctx->next_check_id = 1;
  ct_rng_seed(&ctx->rng, seed);
  if (device == CT_DEVICE_CPU) {
    ct_parallel_each_thread(prepare_thread);
    return CT_OK;
  }
  ct_cpu_flush_subnormals();
  return ct_gpu_context_init(ctx, err);
}

void ct_context_free(ct_context *ctx) {
  if (ctx->device != CT_DEVICE_CPU) {
    ct_gpu_context_free(ctx);
  } else if (ctx->workspace) {
    ct_mem_free(CT_DEVICE_CPU, ctx->workspace);
  }
  ctx->workspace = NULL;
  ctx->workspace_bytes = 0;
  for (int i = 0; i < ctx->ncheck_slots; i++) free(ctx->checks[i].prefix);
  free(ctx->checks);
  ctx->checks = NULL;
  ctx->ncheck_slots = 0;
}

void *ct_context_workspace(ct_context *ctx, size_t bytes) {
  if (bytes > ctx->workspace_bytes) {
    CT_ASSERTF(!ct_context_capturing(ctx),
               "the workspace grew to %zu bytes while the stream's work was being recorded", bytes);
    if (ctx->device != CT_DEVICE_CPU) ct_context_sync(ctx);
    ct_mem_free(ctx->device, ctx->workspace);
    ctx->workspace = ct_mem_alloc(ctx->device, bytes);
    ctx->workspace_bytes = bytes;
  }
  return ctx->workspace;
}

void ct_context_set_tf32(ct_context *ctx, bool tf32) {
  ctx->tf32 = tf32;
  if (ctx->device != CT_DEVICE_CPU) ct_gpu_context_set_math(ctx);
}

ct_status ct_context_set_precision(ct_context *ctx, ct_dtype type, bool given, ct_error *err) {
  if (ctx->device == CT_DEVICE_CPU && type == CT_F16)
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "float16 on the CPU: x86 CPUs have no float16 training path (oneDNN's is "
                        "bfloat16); use --precision=bf16 there");
  if (ctx->device == CT_DEVICE_CPU && type == CT_BF16 && !ct_cpu_has_bf16())
    return ct_error_set(err, CT_ERR_UNSUPPORTED,
                        "bfloat16 on the CPU needs the AVX512_BF16 or AMX-BF16 instructions "
                        "(avx512_bf16 or amx_bf16 in /proc/cpuinfo), which this CPU has not");
  ctx->precision = type;
  ctx->precision_given = given;
  return CT_OK;
}

void ct_context_set_deterministic(ct_context *ctx, bool deterministic) {
  ctx->deterministic = deterministic;
}

void ct_context_sync(ct_context *ctx) {
  if (ctx->device != CT_DEVICE_CPU) ct_gpu_context_sync(ctx);
}

bool ct_context_idle(ct_context *ctx) {
  return ctx->device == CT_DEVICE_CPU || ct_gpu_context_idle(ctx);
}

ct_context *ct_context_grad_begin(ct_context *ctx) {
  return ctx->grads ? ct_gpu_grad_begin(ctx) : ctx;
}

void ct_context_grad_step(ct_context *ctx) {
  if (ctx->grads) ct_gpu_grad_step(ctx);
}

void ct_context_grad_join(ct_context *ctx) {
  if (ctx->grads) ct_gpu_grad_join(ctx);
}

void ct_context_grad_workspace(ct_context *ctx, size_t bytes) {
  if (ctx->grads) ct_gpu_grad_workspace(ctx, bytes);
}

void *ct_context_grad_pending_stream(ct_context *ctx) {
  return ctx->grads ? ct_gpu_grad_pending_stream(ctx) : NULL;
}

bool ct_context_capturing(const ct_context *ctx) { return ctx->capturing; }

/* ------------------------------------------------------------------ checks */

unsigned ct_context_add_check(ct_context *ctx, const char *prefix, ct_check_fn fn, void *user) {
  int slot = -1;
  for (int i = 0; i < ctx->ncheck_slots && slot < 0; i++)
    if (ctx->checks[i].id == 0) slot = i;
  if (slot < 0) {
    int n = ctx->ncheck_slots ? 2 * ctx->ncheck_slots : 8;
    ctx->checks = ct_xrealloc(ctx->checks, (size_t)n * sizeof *ctx->checks);
    memset(ctx->checks + ctx->ncheck_slots, 0, (size_t)(n - ctx->ncheck_slots) * sizeof *ctx->checks);
    slot = ctx->ncheck_slots;
    ctx->ncheck_slots = n;
  }
  if (ctx->next_check_id == 0) ctx->next_check_id = 1; /* a context made without ct_context_init */
  ct_check_entry *e = &ctx->checks[slot];
  e->id = ctx->next_check_id++;
  e->prefix = ct_xstrdup(prefix ? prefix : "");
  e->fn = fn;
  e->user = user;
  return e->id;
}

void ct_context_remove_check(ct_context *ctx, unsigned id) {
  for (int i = 0; i < ctx->ncheck_slots; i++)
    if (ctx->checks[i].id == id && id != 0) {
      free(ctx->checks[i].prefix);
      memset(&ctx->checks[i], 0, sizeof ctx->checks[i]);
    }
}

bool ct_context_has_checks(const ct_context *ctx) {
  for (int i = 0; i < ctx->ncheck_slots; i++)
    if (ctx->checks[i].id) return true;
  return false;
}

ct_status ct_context_report_check(ct_context *ctx, unsigned word, ct_error *err) {
  if (word == 0) return CT_OK;
  for (int i = 0; i < ctx->ncheck_slots; i++) {
    const ct_check_entry *e = &ctx->checks[i];
    if (e->id != word) continue;
    ct_status s = e->fn(e->user, err);
    CT_ASSERTF(s != CT_OK, "deferred check '%s' failed on the device but reports no error",
               e->prefix);
    return e->prefix[0] ? ct_error_prefix(err, "%s", e->prefix) : s;
  }
  return ct_error_set(err, CT_ERR_INVALID,
                      "a device check (id %u) failed, but its layer no longer exists", word);
}

ct_status ct_context_take_checks(ct_context *ctx, ct_error *err) {
  if (ctx->device == CT_DEVICE_CPU || !ct_context_has_checks(ctx)) return CT_OK;
  unsigned word = ct_gpu_context_read_check(ctx);
  if (word == 0) return CT_OK;
  ct_context_clear_checks_async(ctx);
  return ct_context_report_check(ctx, word, err);
}

void ct_context_clear_checks_async(ct_context *ctx) {
  if (ctx->device != CT_DEVICE_CPU) ct_gpu_context_clear_check(ctx);
}

/* ------------------------------------------------------------------ draws */

uint64_t ct_context_next_draw(ct_context *ctx) {
  CT_ASSERT(ctx->device == CT_DEVICE_CPU);
  return ct_draw_seed(ctx->seed, ++ctx->draws);
}

void ct_context_next_draw_gpu(ct_context *ctx, uint64_t *seed_dev) {
  CT_ASSERT(ctx->device != CT_DEVICE_CPU);
  ct_gpu_context_next_draw(ctx, seed_dev);
}

uint64_t ct_context_draws(ct_context *ctx) {
  if (ctx->device == CT_DEVICE_CPU) return ctx->draws;
  return ct_gpu_context_get_draws(ctx);
}

void ct_context_set_draws(ct_context *ctx, uint64_t n) {
  if (ctx->device == CT_DEVICE_CPU) ctx->draws = n;
  else ct_gpu_context_set_draws(ctx, n);
}
