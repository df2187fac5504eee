/* The command-line side of the CSV training log: the run's name and
 * parameter line, and the epoch size of a solver's train data. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train.h"
#include "core/mem.h"
#include "data/db.h"
#include "net/net_load.h"
#include "parallel/comm_mpi.h"

/* A growing string. */
typedef struct {
  char *s;
  size_t len, cap;
} text_buf;

static void append(text_buf *b, const char *s) {
  size_t n = strlen(s);
  if (b->len + n + 1 > b->cap) {
    b->cap = (b->len + n + 1) * 2;
    b->s = ct_xrealloc(b->s, b->cap);
  }
  memcpy(b->s + b->len, s, n + 1);
  b->len += n;
}

static int by_name(const void *a, const void *b) {
  const ct_flag_spec *x = *(const ct_flag_spec *const *)a, *y = *(const ct_flag_spec *const *)b;
  return strcmp(x->name, y->name);
}

/* One value as Python's repr writes it. */
static void append_value(text_buf *b, const ct_cli_args *args, const ct_flag_spec *spec) {
  char num[64];
  switch (spec->type) {
    case CT_FLAG_INT:
    case CT_FLAG_INT64:
      snprintf(num, sizeof num, "%lld", (long long)ct_cli_int64(args, spec->name));
      append(b, num);
      return;
    case CT_FLAG_DOUBLE: {
      double d = ct_cli_double(args, spec->name);
      snprintf(num, sizeof num, "%.17g", d);
      /* the shortest text that reads back the same, as Python prints */
      for (int prec = 1; prec <= 17; prec++) {
        snprintf(num, sizeof num, "%.*g", prec, d);
        if (strtod(num, NULL) == d) break;
      }
      if (isfinite(d) && !strpbrk(num, ".e")) strcat(num, ".0");
      append(b, num);
      return;
    }
    case CT_FLAG_BOOL:
      append(b, ct_cli_bool(args, spec->name) ? "True" : "False");
      return;
    case CT_FLAG_STRING:
    case CT_FLAG_GPU_LIST: {
      const char *t = ct_cli_text(args, spec->name);
      if (!t || (!*t && !ct_cli_is_set(args, spec->name))) {
        append(b, "None");
        return;
      }
      if (spec->secret) t = "***";
      append(b, "'");
      append(b, t);
      append(b, "'");
      return;
    }
  }
}

char *ct_cli_namespace(const ct_cli_args *args) {
  size_t n = args->n_command_specs;
  const ct_flag_spec **sorted = ct_xcalloc(n + 1, sizeof *sorted);
  for (size_t i = 0; i < n; i++) sorted[i] = &args->specs[i];
  qsort(sorted, n, sizeof *sorted, by_name);
  text_buf b = {ct_xcalloc(1, 256), 0, 256};
  append(&b, "Namespace(");
  for (size_t i = 0; i < n; i++) {
    if (i) append(&b, ", ");
    append(&b, sorted[i]->name);
    append(&b, "=");
    append_value(&b, args, sorted[i]);
  }
  append(&b, ")");
  free(sorted);
  return b.s;
}

/* The records of the first Data layer of the train net `net` of sp. */
static long long data_layer_records(const Caffe__SolverParameter *sp, const Caffe__NetParameter *net) {
  Caffe__NetState state;
  ct_solver_train_state(sp, net, &state);
  long long n = 0;
  for (size_t i = 0; i < net->n_layer; i++) {
    const Caffe__LayerParameter *l = net->layer[i];
    if (!l->type || strcmp(l->type, "Data") != 0 || !ct_net_state_includes(&state, l) ||
        !l->data_param || !l->data_param->source)
      continue;
    ct_db_backend backend = l->data_param->backend == CAFFE__DATA_PARAMETER__DB__LMDB ? CT_DB_LMDB : CT_DB_LEVELDB;
    ct_db *db;
    ct_error err;
    if (ct_db_open(&db, l->data_param->source, backend, CT_DB_READ, &err) == CT_OK) {
      n = (long long)ct_db_count(db);
      ct_db_close(db);
    }
    break;
  }
  ct_net_state_clear(&state);
  return n;
}

/* The solver's train net: inline, else read from its file into *owned
 * (free it); NULL when there is none or it cannot be read (the run itself
 * reports that). */
static const Caffe__NetParameter *train_net(const Caffe__SolverParameter *sp,
                                            Caffe__NetParameter **owned) {
  *owned = NULL;
  if (sp->train_net_param) return sp->train_net_param;
  if (sp->net_param) return sp->net_param;
  const char *file = sp->train_net ? sp->train_net : sp->net;
  ct_error err;
  if (!file || ct_net_param_read(file, owned, &err) != CT_OK) return NULL;
  return *owned;
}

long long ct_cli_train_epoch_size(const Caffe__SolverParameter *sp) {
  Caffe__NetParameter *owned;
  const Caffe__NetParameter *net = train_net(sp, &owned);
  long long n = net ? data_layer_records(sp, net) : 0;
  if (owned) protobuf_c_message_free_unpacked(&owned->base, NULL);
  return n;
}

bool ct_cli_loss_scale_columns(const ct_cli_args *args, const Caffe__SolverParameter *sp) {
  if (!ct_cli_has_flag(args, "loss_scale")) return false;
  const char *v = ct_cli_string(args, "loss_scale");
  if (strcmp(v, "off") == 0) return false;
  if (strcmp(v, "auto") != 0) return true;
  if (ct_cli_is_set(args, "precision") && strcmp(ct_cli_string(args, "precision"), "fp16") == 0)
    return true;
  Caffe__NetParameter *owned;
  const Caffe__NetParameter *net = train_net(sp, &owned);
  bool f16 = net && ((net->has_global_grad_scale && net->global_grad_scale != 1.0f) ||
                     net->global_grad_scale_adaptive ||
                     net->default_forward_type == CAFFE__TYPE__FLOAT16 ||
                     net->default_backward_type == CAFFE__TYPE__FLOAT16);
  for (size_t i = 0; net && !f16 && i < net->n_layer; i++)
    f16 = net->layer[i]->forward_type == CAFFE__TYPE__FLOAT16 ||
          net->layer[i]->backward_type == CAFFE__TYPE__FLOAT16;
  if (owned) protobuf_c_message_free_unpacked(&owned->base, NULL);
  return f16;
}

/* "<solver file's base name without extension>_gpu<N>_lr<base_lr>". */
static char *train_expname(const ct_cli_args *args, const Caffe__SolverParameter *sp, int ngpus) {
  const char *file = ct_cli_is_set(args, "solver") ? ct_cli_string(args, "solver") : "train";
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  size_t len = strcspn(base, ".");
  char *name = ct_xcalloc(len + 64, 1);
  snprintf(name, len + 64, "%.*s_gpu%d_lr%.2f", (int)len, base, ngpus, (double)sp->base_lr);
  return name;
}

ct_status ct_cli_csv_open(const ct_cli_args *args, const Caffe__SolverParameter *sp,
                          const ct_cli_csv_info *csv, int ngpus, ct_csv_log **out, ct_error *err) {
  *out = NULL;
  if (!ct_cli_is_set(args, "csv_log")) return CT_OK;
  if (ct_mpi_launched() && ct_mpi_rank_from_env() > 0) return CT_OK; /* rank 0 writes it */
  char *expname = csv && csv->expname ? NULL : train_expname(args, sp, ngpus);
  char *params = csv && csv->params ? NULL : ct_cli_namespace(args);
  ct_csv_log_opts o = {.path = ct_cli_string(args, "csv_log"),
                       .expname = expname ? expname : csv->expname,
                       .params = params ? params : csv->params,
                       .epoch_size = csv && csv->epoch_size > 0 ? csv->epoch_size : ct_cli_train_epoch_size(sp),
                       .loss_scale = ct_cli_loss_scale_columns(args, sp)};
  ct_status st = ct_csv_log_open(out, &o, err);
  free(expname);
  free(params);
  return st;
}
