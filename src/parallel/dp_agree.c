/* The agreement of a data-parallel run's workers (see dp_agree.h). */
#include "parallel/dp_agree.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strutil.h"
#include "parallel/comm_mpi.h"
#include "proto/reflect.h"
#include "proto/srcpos.h"
#include "proto/textformat.h"

static uint64_t fnv1a(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* A copy of m without the source positions of its fields (which name the
 * file each process read, and so may differ where the contents agree). */
static ProtobufCMessage *clone(const ProtobufCMessage *m) {
  uint8_t *buf = NULL;
  size_t n = ct_srcpos_pack_without(m, &buf);
  if (!buf) ct_fatal(__FILE__, __LINE__, "out of memory copying a %s", m->descriptor->name);
  ProtobufCMessage *c = protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
  free(buf);
  CT_ASSERTF(c, "re-decoding a %s failed", m->descriptor->name);
  return c;
}

/* Clears field `name` of the sub-message `sub` of l when both are there. */
static void clear_in(Caffe__LayerParameter *l, const char *sub, const char *name) {
  const ProtobufCFieldDescriptor *f = ct_pb_field(&caffe__layer_parameter__descriptor, sub);
  if (!ct_pb_present(&l->base, f)) return;
  ProtobufCMessage *m = ct_pb_mutable_message(&l->base, f);
  ct_pb_clear(m, ct_pb_field(m->descriptor, name));
}

/* "<what>: N layers" and a line per layer with its digest; paths that
 * each machine may have its own of are left out. */
static void add_net(ct_text *t, const char *what, const Caffe__NetParameter *np) {
  ct_text_printf(t, "%s: %zu layers\n", what, np->n_layer);
  for (size_t i = 0; i < np->n_layer; i++) {
    Caffe__LayerParameter *l = (Caffe__LayerParameter *)clone(&np->layer[i]->base);
    clear_in(l, "data_param", "source");
    clear_in(l, "image_data_param", "source");
    clear_in(l, "image_data_param", "root_folder");
    clear_in(l, "hdf5_data_param", "source");
    clear_in(l, "window_data_param", "source");
    clear_in(l, "transform_param", "mean_file");
    size_t n = protobuf_c_message_get_packed_size(&l->base);
    uint8_t *buf = ct_xcalloc(n + 1, 1);
    protobuf_c_message_pack(&l->base, buf);
    ct_text_printf(t, "%s layer %zu: '%s' (%s) %016llx\n", what, i, l->name ? l->name : "",
        l->type ? l->type : "", (unsigned long long)fnv1a(buf, n));
    free(buf);
    protobuf_c_message_free_unpacked(&l->base, NULL);
  }
}

/* The solver's fields, one line per top-level field (a message or repeated
 * field's lines joined), from its text form. */
static void add_solver(ct_text *t, Caffe__SolverParameter *sp) {
  static const char *const drop[] = {"net", "net_param", "train_net", "train_net_param", "test_net",
                                     "test_net_param", "snapshot_prefix", "device_id"};
  for (size_t i = 0; i < sizeof drop / sizeof *drop; i++)
    ct_pb_clear(&sp->base, ct_pb_field(&caffe__solver_parameter__descriptor, drop[i]));
  char *printed = ct_text_print(&sp->base);
  CT_ASSERT(printed != NULL);
  char key[128] = "";
  bool open = false;
  for (char *line = strtok(printed, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] != ' ' && line[0] != '}') {
      char k[128];
      snprintf(k, sizeof k, "%.*s", (int)strcspn(line, ": {"), line);
      const char *value = line + strlen(k);
      while (*value == ':' || *value == ' ') value++;
      if (open && strcmp(k, key) == 0) {
        ct_text_printf(t, " | %s", value); /* a repeated field: one line */
        continue;
      }
      if (open) ct_text_printf(t, "\n");
      snprintf(key, sizeof key, "%s", k);
      ct_text_printf(t, "solver %s: %s", key, value);
      open = true;
    } else {
      const char *p = line;
      while (*p == ' ') p++;
      ct_text_printf(t, " %s", p);
    }
  }
  if (open) ct_text_printf(t, "\n");
  free(printed);
}

ct_status ct_dp_agreement(const ct_dp_job *job, char **out, ct_error *err) {
  *out = NULL;
  Caffe__SolverParameter *sp = (Caffe__SolverParameter *)clone(&job->solver_param->base);
  ct_status st = ct_dp_inline_nets(sp, err);
  if (st != CT_OK) {
    protobuf_c_message_free_unpacked(&sp->base, NULL);
    return st;
  }
  ct_text t = {0};
  ct_text_printf(&t, "flag --global_batch: %s\n", job->global_batch ? "true" : "false");
  ct_text_printf(&t, "flag --math: %s\n", job->strict_fp32 ? "fp32" : "tf32");
  ct_text_printf(&t, "flag --precision: %s%s\n", ct_dtype_name(job->precision),
      job->precision_given ? "" : " (unset)");
  ct_text_printf(&t, "flag --bucket_mb: %.17g\n",
      (double)(job->dp.bucket_bytes ? job->dp.bucket_bytes : CT_REDUCE_DEFAULT_BUCKET_BYTES) / 1048576.0);
  ct_text_printf(&t, "flag --dp_timing: %d\n", job->dp.timing_iters);
  ct_text_printf(&t, "flag --snapshot: %s\n", job->resume ? "given (resuming)" : "not given");
  if (sp->net_param) add_net(&t, "net", sp->net_param);
  if (sp->train_net_param) add_net(&t, "train_net", sp->train_net_param);
  for (size_t i = 0; i < sp->n_test_net_param; i++) {
    char what[32];
    snprintf(what, sizeof what, "test_net #%zu", i);
    add_net(&t, what, sp->test_net_param[i]);
  }
  add_solver(&t, sp);
  protobuf_c_message_free_unpacked(&sp->base, NULL);
  if (!t.s) t.s = ct_xstrdup("");
  *out = t.s;
  return CT_OK;
}

/* ------------------------------------------------------------ comparing */

/* The key of a line: up to ": " (the whole line when there is none). */
static size_t key_len(const char *line, size_t n) {
  for (size_t i = 0; i + 1 < n; i++)
    if (line[i] == ':' && line[i + 1] == ' ') return i;
  return n;
}

typedef struct line {
  const char *s;
  size_t n, k; /* length, key length */
} line;

static line *split(const char *s, size_t *count) {
  size_t cap = 16, n = 0;
  line *v = ct_xcalloc(cap, sizeof *v);
  for (const char *p = s; *p;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (n == cap) v = ct_xrealloc(v, (cap *= 2) * sizeof *v);
    v[n++] = (line){p, len, key_len(p, len)};
    p += len + (e ? 1 : 0);
  }
  *count = n;
  return v;
}

static const line *find(const line *v, size_t n, const line *want, size_t hint) {
  if (hint < n && v[hint].k == want->k && memcmp(v[hint].s, want->s, want->k) == 0) return &v[hint];
  for (size_t i = 0; i < n; i++)
    if (v[i].k == want->k && memcmp(v[i].s, want->s, want->k) == 0) return &v[i];
  return NULL;
}

/* Whether a line is a net layer's (its value ends in a 16-digit digest). */
static bool layer_line(const line *l) {
  const char *lay = strstr(l->s, " layer ");
  return lay && lay < l->s + l->k && l->n > l->k + 19 && l->s[l->n - 17] == ' ';
}

/* The value of line l for messages: a net layer's without its digest
 * ("'ip' (InnerProduct)"), "absent" for no line. */
static void describe(const line *l, char *buf, size_t cap) {
  if (!l) {
    snprintf(buf, cap, "absent");
    return;
  }
  const char *v = l->s + l->k + (l->k < l->n ? 2 : 0);
  int n = (int)(l->n - (size_t)(v - l->s));
  if (layer_line(l)) n -= 17;
  if (n > 160) snprintf(buf, cap, "%.157s...", v);
  else snprintf(buf, cap, "%.*s", n, v);
}

static void add_difference(ct_text *t, int *count, const line *key, const line *a, const line *b,
                           const char *me, const char *them) {
  if ((*count)++ >= 3) return;
  char va[200], vb[200];
  describe(a, va, sizeof va);
  describe(b, vb, sizeof vb);
  const char *sep = *count > 1 ? "; " : "";
  if (strcmp(va, vb) == 0) /* a layer of the same name and type, other parameters */
    ct_text_printf(t, "%s%.*s %s has other parameters on %s than on %s", sep, (int)key->k, key->s, va, them, me);
  else
    ct_text_printf(t, "%s%.*s is %s on %s but %s on %s", sep, (int)key->k, key->s, va, me, vb, them);
}

ct_status ct_dp_agreement_compare(const char *mine, const char *me, const char *theirs,
                                  const char *them, ct_error *err) {
  if (strcmp(mine, theirs) == 0) return CT_OK;
  size_t na, nb;
  line *a = split(mine, &na), *b = split(theirs, &nb);
  ct_text t = {0};
  int count = 0;
  for (size_t i = 0; i < na; i++) {
    const line *o = find(b, nb, &a[i], i);
    if (!o || o->n != a[i].n || memcmp(o->s, a[i].s, a[i].n) != 0)
      add_difference(&t, &count, &a[i], &a[i], o, me, them);
  }
  for (size_t i = 0; i < nb; i++)
    if (!find(a, na, &b[i], i)) add_difference(&t, &count, &b[i], NULL, &b[i], me, them);
  if (count > 3) ct_text_printf(&t, "; and %d more", count - 3);
  ct_status st = ct_error_set(err, CT_ERR_INVALID, "%s and %s do not train alike: %s", me, them,
                              t.s ? t.s : "their agreements differ");
  free(t.s);
  free(a);
  free(b);
  return st;
}

/* ------------------------------------------------------------------ MPI */

ct_status ct_dp_agree_mpi(const ct_dp_job *job, bool *alike, ct_error *err) {
  *alike = false;
  ct_comm *comm = NULL;
  CT_TRY(ct_comm_mpi_create(&comm, err));
  /* what parameter servers cannot run fails every rank alike */
  ct_status ps = ct_dp_check_ps(job, comm->size, err);
  if (ps != CT_OK) {
    ct_comm_free(comm);
    *alike = true;
    return ps;
  }
  char *mine = NULL;
  ct_status made = ct_dp_agreement(job, &mine, err);
  if (made != CT_OK) {
    /* the others wait in the broadcast: this rank's job ends the run */
    ct_comm_free(comm);
    return made;
  }
  /* rank 0's text to every rank: its length, then its bytes */
  uint64_t len = comm->rank == 0 ? strlen(mine) : 0;
  ct_status st = ct_mpi_broadcast_bytes(&len, sizeof len, err);
  char *root = NULL;
  if (st == CT_OK) {
    root = ct_xcalloc((size_t)len + 1, 1);
    if (comm->rank == 0) memcpy(root, mine, (size_t)len);
    st = ct_mpi_broadcast_bytes(root, (size_t)len, err);
  }
  /* which ranks differ, and the lowest one's message as doubles (a byte
   * each), so that every rank reports the same */
  const size_t nmsg = CT_ERROR_MSG_MAX;
  double *v = ct_xcalloc((size_t)comm->size + nmsg, sizeof *v);
  ct_error mine_err;
  char me[32], them[] = "rank 0";
  snprintf(me, sizeof me, "rank %d", comm->rank);
  const bool differs = st == CT_OK && ct_dp_agreement_compare(root, them, mine, me, &mine_err) != CT_OK;
  if (differs) v[comm->rank] = 1.0;
  if (st == CT_OK) st = ct_comm_allreduce_host_f64(comm, v, (size_t)comm->size, err);
  int first = -1;
  for (int r = 0; st == CT_OK && r < comm->size && first < 0; r++)
    if (v[r] > 0) first = r;
  if (first >= 0) {
    memset(v, 0, ((size_t)comm->size + nmsg) * sizeof *v);
    if (comm->rank == first)
      for (size_t i = 0; i < nmsg && mine_err.msg[i]; i++) v[comm->size + i] = (unsigned char)mine_err.msg[i];
    st = ct_comm_allreduce_host_f64(comm, v + comm->size, nmsg, err);
    if (st == CT_OK) {
      char msg[CT_ERROR_MSG_MAX];
      size_t i = 0;
      for (; i + 1 < nmsg && v[comm->size + i] > 0; i++) msg[i] = (char)(unsigned char)v[comm->size + i];
      msg[i] = 0;
      st = ct_error_set(err, CT_ERR_INVALID, "%s", msg);
      *alike = true;
    }
  }
  free(v);
  free(root);
  free(mine);
  ct_comm_free(comm);
  return st;
}
