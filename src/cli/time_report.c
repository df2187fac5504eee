/* `cortado time`'s report (see time_report.h). */
#include "cli/time_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/status.h"
#include "net/net_cost.h"

/* Mean and sample standard deviation of n values a stride apart. */
static void mean_std(const double *v, int n, size_t stride, double *mean, double *std) {
  double s = 0, ss = 0;
  for (int k = 0; k < n; k++) s += v[(size_t)k * stride];
  *mean = n ? s / n : 0;
  for (int k = 0; k < n; k++) {
    const double d = v[(size_t)k * stride] - *mean;
    ss += d * d;
  }
  *std = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

/* GFLOP/s of flops in ms milliseconds (0 when either is 0). */
static double gflops(double flops, double ms) { return flops > 0 && ms > 0 ? flops / (ms * 1e6) : 0; }

typedef struct row {
  const char *name, *type;
  int layers;               /* types and the total: how many layers */
  double ms, ms_std;        /* forward + backward per iteration */
  double fwd, fwd_std, bwd, bwd_std;
  bool counted;
  double fwd_flops, bwd_flops;
  double top_mb, param_mb, workspace_mb;
} row;

typedef struct report {
  row *layers, *types, total;
  int ntypes;
} report;

static double mb(size_t bytes) { return (double)bytes / 1048576.0; }

static void build(const ct_time_report *r, report *rep) {
  const ct_net *net = r->net;
  const int nl = net->nlayers, n = r->iters;
  rep->layers = ct_xcalloc((size_t)nl + 1, sizeof *rep->layers);
  rep->types = ct_xcalloc((size_t)nl + 1, sizeof *rep->types);
  rep->ntypes = 0;
  /* per iteration: each type's time, the total's */
  double *type_ms = ct_xcalloc((size_t)n * ((size_t)nl + 1), sizeof *type_ms);
  double *total_ms = ct_xcalloc((size_t)n + 1, sizeof *total_ms);
  int *type_of = ct_xcalloc((size_t)nl + 1, sizeof *type_of);
  memset(&rep->total, 0, sizeof rep->total);
  rep->total.name = rep->total.type = "total";
  rep->total.counted = true;
  for (int i = 0; i < nl; i++) {
    row *L = &rep->layers[i];
    const ct_layer *l = net->layers[i];
    L->name = l->name;
    L->type = l->ops->type;
    L->layers = 1;
    mean_std(r->fwd + i, n, (size_t)nl, &L->fwd, &L->fwd_std);
    mean_std(r->bwd + i, n, (size_t)nl, &L->bwd, &L->bwd_std);
    ct_layer_cost c;
    ct_net_layer_cost(net, i, &c);
    L->counted = c.counted;
    L->fwd_flops = c.forward_flops;
    L->bwd_flops = c.backward_flops;
    L->top_mb = mb(c.top_bytes);
    L->param_mb = mb(c.param_bytes);
    L->workspace_mb = mb(c.workspace_bytes);
    int t = 0;
    while (t < rep->ntypes && strcmp(rep->types[t].type, L->type) != 0) t++;
    row *T = &rep->types[t];
    if (t == rep->ntypes) {
      rep->ntypes++;
      T->name = T->type = L->type;
      T->counted = true;
    }
    type_of[i] = t;
    T->layers++;
    T->counted &= L->counted;
    for (row *agg = T;; agg = &rep->total) {
      agg->fwd += L->fwd;
      agg->bwd += L->bwd;
      agg->fwd_flops += L->fwd_flops;
      agg->bwd_flops += L->bwd_flops;
      agg->top_mb += L->top_mb;
      agg->param_mb += L->param_mb;
      agg->workspace_mb += L->workspace_mb;
      if (agg == &rep->total) break;
    }
    rep->total.layers++;
  }
  for (int k = 0; k < n; k++)
    for (int i = 0; i < nl; i++) {
      const double ms = r->fwd[(size_t)k * nl + i] + r->bwd[(size_t)k * nl + i];
      type_ms[(size_t)k * nl + type_of[i]] += ms;
      total_ms[k] += ms;
    }
  for (int i = 0; i < nl; i++) {
    double *s = ct_xcalloc((size_t)n + 1, sizeof *s);
    for (int k = 0; k < n; k++) s[k] = r->fwd[(size_t)k * nl + i] + r->bwd[(size_t)k * nl + i];
    mean_std(s, n, 1, &rep->layers[i].ms, &rep->layers[i].ms_std);
    free(s);
  }
  for (int t = 0; t < rep->ntypes; t++) mean_std(type_ms + t, n, (size_t)nl, &rep->types[t].ms, &rep->types[t].ms_std);
  mean_std(total_ms, n, 1, &rep->total.ms, &rep->total.ms_std);
  free(type_ms);
  free(total_ms);
  free(type_of);
}

/* ------------------------------------------------------------------ table */

static void table_row(FILE *out, const row *w, double total_ms) {
  char ff[24] = "-", bf[24] = "-", gs[24] = "-";
  if (w->counted) {
    snprintf(ff, sizeof ff, "%.4f", w->fwd_flops / 1e9);
    snprintf(bf, sizeof bf, "%.4f", w->bwd_flops / 1e9);
    snprintf(gs, sizeof gs, "%.2f", gflops(w->fwd_flops + w->bwd_flops, w->ms));
  }
  fprintf(out, "%-16.16s %-18.18s %4d %9.4f %8.4f %6.1f%% %9.4f %9.4f %9s %9s %8s %9.3f %9.3f %9.3f\n",
          w->name, w->type, w->layers, w->ms, w->ms_std, total_ms > 0 ? 100 * w->ms / total_ms : 0,
          w->fwd, w->bwd, ff, bf, gs, w->top_mb, w->param_mb, w->workspace_mb);
}

static void write_table(const ct_time_report *r, const report *rep, FILE *out) {
  fprintf(out, "%s on %s, %d iteration%s; times in ms per iteration (mean, standard deviation), "
          "GFLOP per iteration, memory in MB\n",
          r->net->name ? r->net->name : "net", r->device, r->iters, r->iters == 1 ? "" : "s");
  const char *head = "%-16s %-18s %4s %9s %8s %7s %9s %9s %9s %9s %8s %9s %9s %9s\n";
  fprintf(out, head, "layer", "type", "n", "ms", "std", "share", "fwd ms", "bwd ms", "fwd GFLOP",
          "bwd GFLOP", "GFLOP/s", "top MB", "param MB", "work MB");
  for (int i = 0; i < r->net->nlayers; i++) table_row(out, &rep->layers[i], rep->total.ms);
  fprintf(out, "\nper layer type:\n");
  fprintf(out, head, "type", "", "n", "ms", "std", "share", "fwd ms", "bwd ms", "fwd GFLOP", "bwd GFLOP",
          "GFLOP/s", "top MB", "param MB", "work MB");
  for (int t = 0; t < rep->ntypes; t++) {
    row w = rep->types[t];
    w.type = "";
    table_row(out, &w, rep->total.ms);
  }
  row w = rep->total;
  w.type = "";
  table_row(out, &w, rep->total.ms);
}

/* -------------------------------------------------------------------- CSV */

static void csv_string(FILE *out, const char *s) {
  if (!strpbrk(s, ",\"\n\r")) {
    fputs(s, out);
    return;
  }
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"') fputc('"', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

static void csv_row(FILE *out, const char *kind, const row *w, double total_ms) {
  fprintf(out, "%s,", kind);
  csv_string(out, w->name);
  fputc(',', out);
  csv_string(out, w->type);
  fprintf(out, ",%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,", w->layers, w->ms, w->ms_std,
          total_ms > 0 ? w->ms / total_ms : 0, w->fwd, w->fwd_std, w->bwd, w->bwd_std);
  if (w->counted)
    fprintf(out, "%.0f,%.0f,%.4f", w->fwd_flops, w->bwd_flops, gflops(w->fwd_flops + w->bwd_flops, w->ms));
  else
    fprintf(out, ",,");
  fprintf(out, ",%.6f,%.6f,%.6f\n", w->top_mb, w->param_mb, w->workspace_mb);
}

static void write_csv(const ct_time_report *r, const report *rep, FILE *out) {
  fprintf(out, "kind,name,type,layers,ms,ms_std,share,forward_ms,forward_ms_std,backward_ms,"
               "backward_ms_std,forward_flops,backward_flops,gflops_per_s,top_mb,param_mb,workspace_mb\n");
  for (int i = 0; i < r->net->nlayers; i++) csv_row(out, "layer", &rep->layers[i], rep->total.ms);
  for (int t = 0; t < rep->ntypes; t++) csv_row(out, "type", &rep->types[t], rep->total.ms);
  csv_row(out, "total", &rep->total, rep->total.ms);
}

/* ------------------------------------------------------------------- JSON */

static void json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
    else if (*p < 0x20) fprintf(out, "\\u%04x", *p);
    else fputc(*p, out);
  }
  fputc('"', out);
}

static void json_row(FILE *out, const row *w, double total_ms, bool layer) {
  fprintf(out, "{\"name\":");
  json_string(out, w->name);
  if (layer) {
    fprintf(out, ",\"type\":");
    json_string(out, w->type);
  } else {
    fprintf(out, ",\"layers\":%d", w->layers);
  }
  fprintf(out, ",\"ms\":%.6f,\"ms_std\":%.6f,\"share\":%.6f,\"forward_ms\":%.6f,\"forward_ms_std\":%.6f,"
               "\"backward_ms\":%.6f,\"backward_ms_std\":%.6f,",
          w->ms, w->ms_std, total_ms > 0 ? w->ms / total_ms : 0, w->fwd, w->fwd_std, w->bwd, w->bwd_std);
  if (w->counted)
    fprintf(out, "\"forward_flops\":%.0f,\"backward_flops\":%.0f,\"gflops_per_s\":%.4f", w->fwd_flops,
            w->bwd_flops, gflops(w->fwd_flops + w->bwd_flops, w->ms));
  else
    fprintf(out, "\"forward_flops\":null,\"backward_flops\":null,\"gflops_per_s\":null");
  fprintf(out, ",\"top_mb\":%.6f,\"param_mb\":%.6f,\"workspace_mb\":%.6f}", w->top_mb, w->param_mb,
          w->workspace_mb);
}

static void write_json(const ct_time_report *r, const report *rep, FILE *out) {
  fprintf(out, "{\"net\":");
  json_string(out, r->net->name ? r->net->name : "");
  fprintf(out, ",\"device\":");
  json_string(out, r->device);
  fprintf(out, ",\"iterations\":%d,\n\"layers\":[\n", r->iters);
  for (int i = 0; i < r->net->nlayers; i++) {
    json_row(out, &rep->layers[i], rep->total.ms, true);
    fprintf(out, "%s\n", i + 1 < r->net->nlayers ? "," : "");
  }
  fprintf(out, "],\n\"types\":[\n");
  for (int t = 0; t < rep->ntypes; t++) {
    json_row(out, &rep->types[t], rep->total.ms, false);
    fprintf(out, "%s\n", t + 1 < rep->ntypes ? "," : "");
  }
  fprintf(out, "],\n\"total\":");
  json_row(out, &rep->total, rep->total.ms, false);
  fprintf(out, "}\n");
}

bool ct_time_report_write(const ct_time_report *r, const char *format, FILE *out) {
  report rep;
  build(r, &rep);
  if (strcmp(format, "csv") == 0) write_csv(r, &rep, out);
  else if (strcmp(format, "json") == 0) write_json(r, &rep, out);
  else write_table(r, &rep, out);
  free(rep.layers);
  free(rep.types);
  return fflush(out) == 0 && !ferror(out);
}
