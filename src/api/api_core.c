/* cortado.h: versions, errors, logging, what the build has, contexts. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_internal.h"
#include "core/clock.h"
#include "core/log.h"
#include "gpu/gpu.h"
#include "layers/layer.h"
#include "parallel/comm_mpi.h"

_Static_assert((int)CORTADO_ERR_INVALID == (int)CT_ERR_INVALID &&
                   (int)CORTADO_ERR_PARSE == (int)CT_ERR_PARSE &&
                   (int)CORTADO_ERR_IO == (int)CT_ERR_IO &&
                   (int)CORTADO_ERR_NOMEM == (int)CT_ERR_NOMEM &&
                   (int)CORTADO_ERR_UNSUPPORTED == (int)CT_ERR_UNSUPPORTED &&
                   (int)CORTADO_ERR_DEVICE == (int)CT_ERR_DEVICE &&
                   (int)CORTADO_ERR_COMM == (int)CT_ERR_COMM &&
                   (int)CORTADO_ERR_NOTFOUND == (int)CT_ERR_NOTFOUND &&
                   (int)CORTADO_ERR_NUMERIC == (int)CT_ERR_NUMERIC &&
                   (int)CORTADO_ERR_INTERRUPTED == (int)CT_ERR_INTERRUPTED,
               "cortado_status mirrors ct_status");
_Static_assert((int)CORTADO_TRAIN == (int)CT_PHASE_TRAIN && (int)CORTADO_TEST == (int)CT_PHASE_TEST,
               "cortado_phase mirrors ct_phase");
_Static_assert(CORTADO_MAX_AXES == CT_MAX_AXES, "axes");
_Static_assert(CORTADO_MAX_LAYER_PARAMS == CT_LAYER_MAX_PARAMS, "layer params");
_Static_assert(CORTADO_CPU == CT_DEVICE_CPU, "the CPU's device number");

static _Thread_local char t_last_error[CT_ERROR_MSG_MAX];

const char *cortado_version(void) { return CORTADO_VERSION; }
int cortado_api_version(void) { return CORTADO_API_VERSION; }
const char *cortado_status_name(cortado_status status) { return ct_status_name((ct_status)status); }
const char *cortado_last_error(void) { return t_last_error; }

cortado_status cortado_set_error(cortado_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t_last_error, sizeof t_last_error, fmt, ap);
  va_end(ap);
  return status;
}

cortado_status api_fail(const ct_error *err) {
  snprintf(t_last_error, sizeof t_last_error, "%s", err->msg);
  return (cortado_status)err->code;
}

cortado_status api_result(ct_status st, const ct_error *err) {
  if (st == CT_OK) return CORTADO_OK;
  snprintf(t_last_error, sizeof t_last_error, "%s", err->msg);
  return (cortado_status)st;
}

void api_last_error(ct_status code, ct_error *err) {
  if (!err) return;
  err->code = code;
  snprintf(err->msg, sizeof err->msg, "%s", t_last_error[0] ? t_last_error : ct_status_name(code));
}

void cortado_set_log_level(int level) {
  if (level < CT_LOG_INFO) level = CT_LOG_INFO;
  if (level > CT_LOG_FATAL) level = CT_LOG_FATAL;
  ct_log_set_level((ct_log_level)level);
}

int cortado_log_level(void) { return (int)ct_log_get_level(); }

void cortado_log(int level, const char *message) {
  if (level < CT_LOG_INFO) level = CT_LOG_INFO;
  if (level > CT_LOG_ERROR) level = CT_LOG_ERROR;
  ct_log_write((ct_log_level)level, "python", 0, "%s", message);
}

bool cortado_has_cuda(void) {
#ifdef CORTADO_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

/* NCCL comes with every CUDA build (cmake/CortadoDeps.cmake requires it). */
bool cortado_has_nccl(void) { return cortado_has_cuda(); }

bool cortado_has_mpi(void) {
#ifdef CORTADO_HAVE_MPI
  return true;
#else
  return false;
#endif
}

bool cortado_has_gloo(void) {
#ifdef CORTADO_HAVE_GLOO
  return true;
#else
  return false;
#endif
}

int cortado_gpu_count(void) {
#ifdef CORTADO_HAVE_CUDA
  int n = ct_gpu_device_count();
  return n > 0 ? n : 0;
#else
  return 0;
#endif
}

bool cortado_mpi_launched(void) { return ct_mpi_launched(); }

const char *const *cortado_layer_types(int *count) { return ct_layer_types(count); }

double cortado_seconds(void) { return ct_monotonic_s(); }

/* ------------------------------------------------------------------ contexts */

cortado_status cortado_context_create(int device, uint64_t seed, cortado_context **out) {
  *out = NULL;
  ct_error err;
  if (device != CORTADO_CPU && !cortado_has_cuda())
    return cortado_set_error(CORTADO_ERR_UNSUPPORTED,
                             "GPU %d: this build of Cortado has no CUDA backend", device);
  if (device < CORTADO_CPU)
    return cortado_set_error(CORTADO_ERR_INVALID, "device %d: give a GPU ordinal or CORTADO_CPU",
                             device);
  static pthread_once_t log_once = PTHREAD_ONCE_INIT;
  pthread_once(&log_once, ct_log_init_from_env); /* GLOG_minloglevel, once: a level set later wins */
  cortado_context *c = ct_xcalloc(1, sizeof *c);
  if (ct_context_init(&c->ctx, device, seed, &err) != CT_OK) {
    free(c);
    return api_fail(&err);
  }
  c->refs = 1;
  *out = c;
  return CORTADO_OK;
}

void api_context_retain(cortado_context *c) { __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED); }

void cortado_context_free(cortado_context *c) {
  if (!c) return;
  if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
  ct_context_free(&c->ctx);
  free(c);
}

int cortado_context_device(const cortado_context *c) { return c->ctx.device; }

void cortado_context_set_tf32(cortado_context *c, bool tf32) { ct_context_set_tf32(&c->ctx, tf32); }

void *cortado_context_stream(const cortado_context *c) { return c->ctx.stream; }

void cortado_context_set_worker(cortado_context *c, int rank, int world) {
  CT_ASSERTF(world >= 1 && rank >= 0 && rank < world, "worker %d of %d", rank, world);
  c->ctx.rank = rank;
  c->ctx.world = world;
}
