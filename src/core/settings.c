/* The settings table (see settings.h). */
#include "core/settings.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/log.h"
#include "core/status.h"
#include "core/strutil.h"

#define B CT_SETTING_BOOL
#define I CT_SETTING_INT
#define N CT_SETTING_NUMBER
#define C CT_SETTING_CHOICE
#define T CT_SETTING_TEXT
#define USER CT_SETTING_USER
#define INTERNAL CT_SETTING_INTERNAL
#define HARNESS CT_SETTING_HARNESS

/* name, type, scope, default, choices, min, max, option, meaning */
static const ct_setting_info k_settings[] = {
    {"CORTADO_DATA_THREADS", I, USER, NULL, NULL, 1, 256, NULL,
     "decode/transform threads per data layer (default: 1 for a net on the CPU, whose compute "
     "threads have the cores; on GPUs, the CPUs this process may use, by affinity and cgroup quota, "
     "shared among this host's data-parallel workers, 1 to 16)"},
    {"CORTADO_CUDA_GRAPHS", B, USER, "1", NULL, 0, 0, NULL,
     "`0`: run GPU iterations as plain launches instead of CUDA graph replays"},
    {"CORTADO_LAUNCH_AHEAD", B, USER, "1", NULL, 0, 0, NULL,
     "`0`: on a GPU, wait for each training iteration before launching the next (by default "
     "iteration n + 1 is launched before the wait for n, except around displays, tests, "
     "snapshots and requests)"},
    {"CORTADO_CUDNN_ALGOS", T, USER, NULL, NULL, 0, 0, NULL,
     "FILE: take cuDNN convolution algorithm choices from FILE and write every new choice back "
     "to it, so that separate runs on the same GPU model run the same kernels "
     "(`bench/scaling.sh` sets it per net)"},
    {"CORTADO_STREAM_PRIORITY", B, USER, "1", NULL, 0, 0, NULL,
     "`0`: every CUDA stream at the default priority (by default the compute stream runs one "
     "step above the gradient stream, so that the weight gradients fill in around the critical "
     "path)"},
    {"CORTADO_OWN_CONV", C, USER, "1", "1|0|force", 0, 0, NULL,
     "small 2-D convolutions (at most 2^31 multiply-adds): `1` times Cortado's implicit-GEMM "
     "kernels against cuDNN's benchmarked choice per direction and runs the faster one; `0` "
     "runs cuDNN's algorithms alone; `force` runs Cortado's kernels wherever they can (tests). "
     "The kernels are strict FP32 FMA ones (single-buffered and cp.async-pipelined, Winograd "
     "F(2x2, 5x5) for the forward and data gradient of 5x5 stride-1 convolutions, whose filter "
     "transforms a net runs beside the layers below them, a direct forward for 5x5 stride-1 "
     "convolutions with at most 4 input channels and rows up to 32 wide, and a direct "
     "correlation for the filter gradient of 5x5 stride-1 convolutions with rows up to 16 "
     "wide) and, where `--math=tf32` allows it, TF32 tensor-core ones (never with "
     "`--math=fp32`); a star in the log's algorithm line marks a TF32 choice. "
     "`bench/conv_bench --model cifar10_quick --igemm` times each direction's configurations "
     "beside cuDNN"},
    {"CORTADO_PS_OVERLAP_PUSHES", B, USER, "1", NULL, 0, 0, NULL,
     "`0`: a GPU worker of parameter servers copies each gradient shard out of the GPU and sends "
     "it where backward finalises it, waiting for the GPU, instead of copying it out on a stream "
     "of its own and sending it while the GPU computes the rest of backward"},
    {"CORTADO_PIPELINE_POST_RECEIVES", B, USER, "1", NULL, 0, 0, NULL,
     "`0`: pipeline stages receive each input and each gradient when they need it instead of "
     "posting the receives of the iteration's next micro-batches ahead (so that they arrive "
     "while the stage computes)"},
    {"CORTADO_DIFF_PLANNING", B, USER, "1", NULL, 0, 0, NULL,
     "`0`: give every blob its own value and gradient buffers instead of the lifetime-planned "
     "pool"},
    {"CORTADO_VALUE_PLANNING", B, USER, "1", NULL, 0, 0, NULL,
     "`0`: every blob keeps its own value buffer for the whole run (gradients still share the "
     "pool): by default a blob's values share the pool from the forward that writes them to the "
     "last step that reads them, forward or backward"},
    {"CORTADO_POOL_POISON", B, USER, "0", NULL, 0, 0, NULL,
     "`1`: fill the pool's memory with NaN where each blob's values or gradients end (a check: "
     "a layer that reads values its backward_reads does not declare then gives NaN)"},
    {"CORTADO_FUSE", B, USER, "1", NULL, 0, 0, NULL,
     "`0`: no net-level fusion: BatchNorm + Scale, and on a GPU Convolution + in-place ReLU "
     "(bias and ReLU in one pass), Pooling + in-place ReLU on either side, and Convolution + "
     "MAX Pooling (the pooling adds the bias, so the convolution's top holds no bias) run as "
     "separate layers"},
    {"CORTADO_GRAD_STREAM", B, USER, "1", NULL, 0, 0, NULL,
     "`0`: on a GPU, compute parameter gradients on the compute stream instead of a second "
     "stream beside the bottom-gradient chain"},
    {"CORTADO_DETERMINISTIC", B, USER, "0", NULL, 0, 0, NULL,
     "`1`: deterministic cuDNN convolution algorithms only: two runs give the same bits (may "
     "be slower)"},
    {"CORTADO_GPU_ALLOC_TRACE", I, USER, NULL, NULL, 0, 16777216, NULL,
     "MB: log every GPU allocation of at least MB megabytes, with what is held then and the "
     "call stack (`addr2line -f -e cortado OFFSET` names the functions), to find what holds "
     "memory"},
    {"CORTADO_CUDNN_WORKSPACE_MB", I, USER, NULL, NULL, 0, 16777216, NULL,
     "cuDNN workspace limit in MiB (default min(2 GiB, a quarter of free memory))"},
    {"CORTADO_COMM_TIMEOUT", N, USER, "300", NULL, 1e-3, 1e9, "--comm_timeout",
     "seconds a collective may wait before the run is stopped"},
    {"CORTADO_LOG_ALL_RANKS", B, USER, "0", NULL, 0, 0, NULL,
     "`1`: data parallel: every rank writes its INFO lines, not rank 0 alone (each with its own "
     "thread id in the glog prefix)"},
    {"CORTADO_STOP_GRACE", N, USER, "20", NULL, 1e-3, 1e9, NULL,
     "seconds the other data-parallel workers get to stop after one failed, before they are "
     "ended"},
    {"CORTADO_DP_WORKER", T, INTERNAL, NULL, NULL, 0, 0, NULL,
     "set by `cortado train --gpu=...` in the worker processes it starts"},
    {"CORTADO_DP_NCCL_ID", T, INTERNAL, NULL, NULL, 0, 0, NULL,
     "the NCCL id that `cortado train --gpu=...` hands its worker processes"},
    {"CORTADO_BIN", T, HARNESS, NULL, NULL, 0, 0, NULL, "tests: the `cortado` command to run"},
    {"CORTADO_SRC", T, HARNESS, NULL, NULL, 0, 0, NULL, "tests: the source tree"},
    {"CORTADO_FIXTURES", T, HARNESS, NULL, NULL, 0, 0, NULL,
     "tests: the folder of real BVLC Caffe files"},
    {"CORTADO_TMP", T, HARNESS, NULL, NULL, 0, 0, NULL, "tests: scratch space"},
    {"CORTADO_SANITIZED", B, HARNESS, "0", NULL, 0, 0, NULL,
     "tests: the build runs under AddressSanitizer"},
    {"CORTADO_DEPS_ROOT", T, HARNESS, NULL, NULL, 0, 0, NULL,
     "GPU machine scripts: where carried packages were unpacked"},
    {"CORTADO_FLAGS", T, HARNESS, NULL, NULL, 0, 0, NULL,
     "`bench/scaling.sh`: extra flags of its multi-GPU runs"},
};

#undef B
#undef I
#undef N
#undef C
#undef T
#undef USER
#undef INTERNAL
#undef HARNESS

#define NSETTINGS ((int)(sizeof k_settings / sizeof k_settings[0]))

/* Names already warned about (bad values, unknown names), so that a value
 * read every iteration warns once. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_warned[64];
static int g_nwarned;

static bool first_warning(const char *key) {
  bool first = true;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < g_nwarned && first; i++)
    if (strcmp(g_warned[i], key) == 0) first = false;
  if (first && g_nwarned < (int)(sizeof g_warned / sizeof g_warned[0]))
    g_warned[g_nwarned++] = ct_xstrdup(key);
  pthread_mutex_unlock(&g_mu);
  return first;
}

const ct_setting_info *ct_settings_table(int *count) {
  *count = NSETTINGS;
  return k_settings;
}

const ct_setting_info *ct_setting_find(const char *name) {
  for (int i = 0; i < NSETTINGS; i++)
    if (strcmp(k_settings[i].name, name) == 0) return &k_settings[i];
  return NULL;
}

static const ct_setting_info *entry(const char *name, ct_setting_type type) {
  const ct_setting_info *s = ct_setting_find(name);
  CT_ASSERTF(s != NULL, "%s is not in the settings table (src/core/settings.c)", name);
  CT_ASSERTF(s->type == type, "%s is read as another type than the table declares", name);
  return s;
}

static void warn_bad(const ct_setting_info *s, const char *v, const char *expected) {
  if (first_warning(s->name))
    LOG_WARNING("%s=%s: expected %s; using the default (%s)", s->name, v, expected,
                s->def ? s->def : "chosen at run time");
}

/* 1 / 0 for a boolean word, -1 for anything else. */
static int parse_bool(const char *v) {
  static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false", "no",
                                                                              "off"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(v, yes[i]) == 0) return 1;
    if (strcasecmp(v, no[i]) == 0) return 0;
  }
  return -1;
}

/* A number in [s->min, s->max] (a whole one when whole). */
static bool parse_number(const ct_setting_info *s, const char *v, bool whole, double *out) {
  char *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end != '\0' || errno != 0 || !isfinite(x) || x < s->min || x > s->max)
    return false;
  if (whole && x != floor(x)) return false;
  *out = x;
  return true;
}

static const char *env_value(const ct_setting_info *s) {
  const char *v = getenv(s->name);
  return v && *v ? v : NULL;
}

bool ct_setting_bool(const char *name) {
  const ct_setting_info *s = entry(name, CT_SETTING_BOOL);
  const char *v = env_value(s);
  int b = v ? parse_bool(v) : -1;
  if (v && b < 0) warn_bad(s, v, "0 or 1");
  return b >= 0 ? b == 1 : parse_bool(s->def) == 1;
}

double ct_setting_number(const char *name) {
  const ct_setting_info *s = entry(name, CT_SETTING_NUMBER);
  CT_ASSERTF(s->def != NULL, "%s has no numeric default", name);
  const char *v = env_value(s);
  double x;
  if (v && parse_number(s, v, false, &x)) return x;
  if (v) {
    char expected[96];
    snprintf(expected, sizeof expected, "a number from %g to %g", s->min, s->max);
    warn_bad(s, v, expected);
  }
  return strtod(s->def, NULL);
}

bool ct_setting_given_int(const char *name, long *out) {
  const ct_setting_info *s = ct_setting_find(name);
  CT_ASSERTF(s && (s->type == CT_SETTING_INT || s->type == CT_SETTING_NUMBER),
             "%s is not a numeric setting of the table", name);
  const char *v = env_value(s);
  if (!v) return false;
  double x;
  if (parse_number(s, v, s->type == CT_SETTING_INT, &x)) {
    *out = (long)x;
    return true;
  }
  char expected[96];
  snprintf(expected, sizeof expected, "a whole number from %.0f to %.0f", s->min, s->max);
  warn_bad(s, v, expected);
  return false;
}

/* Whether v is one of the '|'-separated choices. */
static bool is_choice(const char *choices, const char *v) {
  const size_t n = strlen(v);
  for (const char *c = choices; c && *c;) {
    const char *bar = strchr(c, '|');
    const size_t len = bar ? (size_t)(bar - c) : strlen(c);
    if (len == n && strncmp(c, v, n) == 0) return true;
    c = bar ? bar + 1 : NULL;
  }
  return false;
}

const char *ct_setting_text(const char *name) {
  const ct_setting_info *s = ct_setting_find(name);
  CT_ASSERTF(s && (s->type == CT_SETTING_CHOICE || s->type == CT_SETTING_TEXT),
             "%s is not a text setting of the table", name);
  const char *v = env_value(s);
  if (v && s->type == CT_SETTING_CHOICE && !is_choice(s->choices, v)) {
    warn_bad(s, v, s->choices);
    v = NULL;
  }
  return v ? v : s->def;
}

const char *ct_setting_raw(const char *name) {
  const ct_setting_info *s = ct_setting_find(name);
  CT_ASSERTF(s != NULL, "%s is not in the settings table (src/core/settings.c)", name);
  const char *v = env_value(s);
  if (!v) return s->def;
  double x;
  bool ok = true;
  switch (s->type) {
    case CT_SETTING_BOOL: ok = parse_bool(v) >= 0; break;
    case CT_SETTING_INT: ok = parse_number(s, v, true, &x); break;
    case CT_SETTING_NUMBER: ok = parse_number(s, v, false, &x); break;
    case CT_SETTING_CHOICE: ok = is_choice(s->choices, v); break;
    case CT_SETTING_TEXT: break;
  }
  if (ok) return v;
  warn_bad(s, v, "a valid value");
  return s->def;
}

extern char **environ;

int ct_settings_check_environment(void) {
  const char *names[NSETTINGS];
  for (int i = 0; i < NSETTINGS; i++) names[i] = k_settings[i].name;
  int unknown = 0;
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "CORTADO_", 8) != 0) continue;
    const char *eq = strchr(*e, '=');
    char name[128];
    const size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
    if (len >= sizeof name) continue;
    memcpy(name, *e, len);
    name[len] = '\0';
    if (ct_setting_find(name)) continue;
    unknown++;
    if (!first_warning(name)) continue;
    const char *guess = ct_suggest(name, names, NSETTINGS);
    if (guess)
      LOG_WARNING("unknown environment variable %s ignored (did you mean %s?)", *e, guess);
    else
      LOG_WARNING("unknown environment variable %s ignored (`cortado help environment` lists "
                  "Cortado's)",
                  *e);
  }
  return unknown;
}

void ct_settings_print_markdown(FILE *f, ct_setting_scope scope) {
  for (int i = 0; i < NSETTINGS; i++) {
    const ct_setting_info *s = &k_settings[i];
    if (s->scope != scope) continue;
    fprintf(f, "| `%s` | %s", s->name, s->meaning);
    if (s->type == CT_SETTING_BOOL)
      fprintf(f, " (default `%s`)", s->def);
    else if (s->def && s->option)
      fprintf(f, " (default %s; `%s` given wins)", s->def, s->option);
    else if (s->def && s->type != CT_SETTING_CHOICE)
      fprintf(f, " (default %s)", s->def);
    else if (s->def)
      fprintf(f, " (default `%s`)", s->def);
    fprintf(f, " |\n");
  }
}
