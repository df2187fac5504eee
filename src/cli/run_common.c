#include "cli/run_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cpu.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/parallel.h"
#include "core/trace.h"
#include "net/net_load.h"

void ct_cli_log_cpu(void) {
  const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
  char wait[96];
  if (spin) snprintf(wait, sizeof wait, "GOMP_SPINCOUNT=%.40s", spin);
  else if (policy) snprintf(wait, sizeof wait, "OMP_WAIT_POLICY=%.40s", policy);
  else snprintf(wait, sizeof wait, "OpenMP's default wait policy");
  const int threads = ct_parallel_threads(), cpus = ct_cpu_count();
  LOG_INFO("CPU: %d thread%s (%d CPU%s available), %s, subnormals %s", threads, threads == 1 ? "" : "s",
           cpus, cpus == 1 ? "" : "s", wait, ct_cpu_subnormals_flushed() ? "flushed to zero" : "kept");
}

ct_status ct_cli_wants_cpu(const ct_cli_args *args, bool *cpu, ct_error *err) {
  const bool flag = ct_cli_bool(args, "cpu");
  const ct_gpu_list *g = ct_cli_gpus(args, "gpu");
  const bool gpu_given = ct_cli_is_set(args, "gpu") && (g->all || g->n > 0);
  if (flag && gpu_given)
    return ct_error_set(err, CT_ERR_INVALID, "give --cpu or --gpu=%s, not both", ct_cli_text(args, "gpu"));
  *cpu = flag || (ct_cli_is_set(args, "gpu") && !gpu_given);
  return CT_OK;
}

ct_status ct_cli_gpu_failed(ct_error *err, const char *where, const char *hint) {
  char cause[CT_ERROR_MSG_MAX];
  snprintf(cause, sizeof cause, "%s", err->msg);
  return ct_error_set(err, err->code, "%s: %s; %s", where, cause, hint);
}

ct_status ct_cli_pick_device(const ct_cli_args *args, int *device, ct_error *err) {
  *device = CT_DEVICE_CPU;
  bool cpu;
  CT_TRY(ct_cli_wants_cpu(args, &cpu, err));
  if (cpu || !ct_cli_is_set(args, "gpu")) {
    LOG_INFO("Use CPU.");
    ct_cli_log_cpu();
    return CT_OK;
  }
  ct_gpu_list gpus;
  if (ct_cli_resolve_gpus(ct_cli_gpus(args, "gpu"), &gpus, err) != CT_OK) {
    char where[64];
    snprintf(where, sizeof where, "--gpu=%.40s", ct_cli_text(args, "gpu"));
    return ct_cli_gpu_failed(err, where, "leave out --gpu (or give --cpu) to run on the CPU");
  }
  *device = gpus.ids[0];
  LOG_INFO("Use GPU with device ID %d", *device);
  return CT_OK;
}


ct_status ct_cli_precision(const ct_cli_args *args, bool *tf32, ct_dtype *type, bool *given,
                           ct_error *err) {
  const bool math_set = ct_cli_has_flag(args, "math") && ct_cli_is_set(args, "math");
  const bool math_fp32 = ct_cli_has_flag(args, "math") && strcmp(ct_cli_string(args, "math"), "fp32") == 0;
  *tf32 = !math_fp32;
  *type = CT_F32;
  const char *p = ct_cli_has_flag(args, "precision") ? ct_cli_string(args, "precision") : "auto";
  *given = strcmp(p, "auto") != 0;
  if (!*given) return CT_OK;
  if (strcmp(p, "fp32") == 0) *tf32 = false;
  else if (strcmp(p, "tf32") == 0 && math_set && math_fp32)
    return ct_error_set(err, CT_ERR_INVALID, "--math=fp32 and --precision=tf32 disagree: give one");
  else if (strcmp(p, "bf16") == 0) *type = CT_BF16;
  else if (strcmp(p, "fp16") == 0) *type = CT_F16;
  return CT_OK;
}

ct_status ct_cli_context_init(const ct_cli_args *args, ct_context *ctx, int device, uint64_t seed,
                              ct_error *err) {
  CT_TRY(ct_context_init(ctx, device, seed, err));
  bool tf32, given;
  ct_dtype type;
  ct_status st = ct_cli_precision(args, &tf32, &type, &given, err);
  if (st == CT_OK) st = ct_context_set_precision(ctx, type, given, err);
  if (st != CT_OK) {
    ct_context_free(ctx);
    return st;
  }
  if (ct_cli_has_flag(args, "math")) {
    ct_context_set_tf32(ctx, tf32);
    if (device != CT_DEVICE_CPU) LOG_INFO("GPU math: %s", tf32 ? "TF32 tensor cores" : "strict FP32");
  }
  if (type != CT_F32)
    LOG_INFO("Mixed precision: %s where layers can%s", ct_dtype_name(type),
             device == CT_DEVICE_CPU ? "" : ", float32 master weights");
  return CT_OK;
}

char **ct_cli_stages(const ct_cli_args *args, int *n) {
  *n = 0;
  const char *s = ct_cli_is_set(args, "stage") ? ct_cli_string(args, "stage") : NULL;
  if (!s || !*s) return NULL;
  size_t len = strlen(s);
  int max = 1;
  for (const char *p = s; *p; p++) max += *p == ',';
  char **out = ct_xcalloc(1, (size_t)(max + 1) * sizeof(char *) + len + 1);
  char *buf = (char *)(out + max + 1);
  memcpy(buf, s, len + 1);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) out[(*n)++] = tok;
  return out;
}

ct_status ct_cli_dummy_shape(const ct_cli_args *args, int chw[3], int **pchw, ct_error *err) {
  *pchw = NULL;
  if (!ct_cli_is_set(args, "dummy_shape")) return CT_OK;
  const char *text = ct_cli_string(args, "dummy_shape");
  if (sscanf(text, "%d,%d,%d", &chw[0], &chw[1], &chw[2]) != 3 || chw[0] <= 0 || chw[1] <= 0 ||
      chw[2] <= 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "--dummy_shape=%s: expected three positive integers C,H,W (e.g. 3,224,224)", text);
  *pchw = chw;
  return CT_OK;
}

ct_status ct_cli_load_model_param(const ct_cli_args *args, Caffe__NetParameter **out, ct_error *err) {
  *out = NULL;
  const char *model = ct_cli_is_set(args, "model") ? ct_cli_string(args, "model") : NULL;
  if (!model || !*model) return ct_error_set(err, CT_ERR_INVALID, "--model=FILE is required");
  Caffe__NetParameter *param;
  CT_TRY(ct_net_param_read(model, &param, err));
  ct_status s = CT_OK;
  if (ct_cli_has_flag(args, "dummy_data") && ct_cli_bool(args, "dummy_data")) {
    int chw[3], *pchw;
    s = ct_cli_dummy_shape(args, chw, &pchw, err);
    if (s == CT_OK) s = ct_net_param_replace_data_layers(param, pchw, err);
  }
  if (s != CT_OK) {
    protobuf_c_message_free_unpacked(&param->base, NULL);
    return s;
  }
  *out = param;
  return CT_OK;
}

ct_status ct_cli_build_model(const ct_cli_args *args, ct_phase phase, ct_context *ctx, ct_net **out,
                             ct_error *err) {
  return ct_cli_build_model_part(args, phase, ctx, NULL, out, err);
}

ct_status ct_cli_build_model_part(const ct_cli_args *args, ct_phase phase, ct_context *ctx,
                                  const ct_net_part *part, ct_net **out, ct_error *err) {
  *out = NULL;
  Caffe__NetParameter *param;
  CT_TRY(ct_cli_load_model_param(args, &param, err));
  int nstages;
  char **stages = ct_cli_stages(args, &nstages);
  ct_net_opts o = {.phase = phase,
                   .level = ct_cli_int(args, "level"),
                   .stages = (const char *const *)stages,
                   .nstages = nstages,
                   .source_name = ct_cli_string(args, "model")};
  if (part) o.part = *part;
  ct_status s = ct_net_init(out, param, &o, ctx, err);
  free(stages);
  protobuf_c_message_free_unpacked(&param->base, NULL);
  return s;
}

/* "FIRST:LAST" into *first and *last. */
static bool parse_iters(const char *text, long long *first, long long *last) {
  char *end;
  const char *colon = strchr(text, ':');
  if (!colon || colon == text || text[0] == '-') return false;
  *first = strtoll(text, &end, 10);
  if (end != colon || colon[1] == '\0' || colon[1] == '-') return false;
  *last = strtoll(colon + 1, &end, 10);
  return *end == '\0' && *first >= 0 && *last >= *first;
}

ct_status ct_cli_trace_start(const ct_cli_args *args, int rank, ct_error *err) {
  const bool iters = ct_cli_is_set(args, "trace_iters");
  if (!ct_cli_is_set(args, "trace") || !*ct_cli_string(args, "trace")) {
    if (iters) return ct_error_set(err, CT_ERR_INVALID, "--trace_iters needs --trace=FILE");
    return CT_OK;
  }
  long long first = 0, last = -1;
  if (iters && !parse_iters(ct_cli_string(args, "trace_iters"), &first, &last))
    return ct_error_set(err, CT_ERR_INVALID,
                        "--trace_iters=%.64s: expected FIRST:LAST, two iteration numbers with 0 <= "
                        "FIRST <= LAST (e.g. 100:110)",
                        ct_cli_string(args, "trace_iters"));
  /* the file is written at the end: a folder that is not there fails now */
  const char *path = ct_cli_string(args, "trace"), *slash = strrchr(path, '/');
  char dir[4096];
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + 1 : 1, slash ? path : ".");
  if (access(dir, W_OK | X_OK) != 0)
    return ct_error_set(err, CT_ERR_INVALID, "--trace=%.200s: cannot write into the folder %.200s: %s",
                        path, dir, strerror(errno));
  ct_trace_start(first, last, rank < 0 ? 0 : rank);
  return CT_OK;
}

int ct_cli_trace_finish(const ct_cli_args *args, int rc) {
  if (!ct_trace_enabled()) return rc;
  ct_error err;
  if (ct_trace_write(ct_cli_string(args, "trace"), &err) != CT_OK)
    rc = ct_cli_error(CT_EXIT_FAILURE, "--trace: %s", err.msg);
  ct_trace_free();
  return rc;
}
