/* Trace recording and the JSON writer (see trace.h). */
#include "core/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/fileio.h"
#include "core/log.h"
#include "core/strutil.h"

int ct_trace_recording_;
int ct_trace_enabled_;

/* Events one thread keeps (about 100 MB); later ones are counted as
 * dropped. */
#define MAX_EVENTS_PER_THREAD ((size_t)1 << 21)
/* Interned names: a direct-mapped cache from a name's address to its copy. */
#define NAME_CACHE 256

typedef struct event {
  double ts, dur;         /* microseconds since the origin */
  const char *cat;        /* static */
  uint32_t name, type;    /* offsets into the thread's strings (type 0: none) */
  const char *index_name; /* static, or NULL */
  long long index;
  uint64_t bytes;
  uint16_t tid;
} event;

typedef struct thread_buf {
  struct thread_buf *next;
  int pid;
  int data_tid;           /* this thread's tid on a data track (0: none yet) */
  uint64_t tids_used;     /* bit t: an event on tid t < 64 */
  event *ev;
  size_t n, cap;
  size_t dropped;
  char *str;              /* interned names, '\0'-separated; offset 0 is "" */
  size_t str_len, str_cap;
  const char *cache_ptr[NAME_CACHE];
  uint32_t cache_off[NAME_CACHE];
} thread_buf;

static struct {
  pthread_mutex_t mu;
  unsigned gen;           /* bumped at each start: thread pointers of older traces are stale */
  thread_buf *bufs;
  long long first, last;
  int rank, world;
  int next_data_tid;
  double origin_abs;      /* the monotonic clock at start, microseconds */
  double shift;           /* added to times on output: rank 0's timeline */
  bool closed;            /* the events were taken: no window opens again */
  bool handed;            /* the events went to rank 0 */
  char **foreign;         /* other processes' JSON */
  size_t *foreign_len;
  int nforeign;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local thread_buf *t_buf;
static _Thread_local unsigned t_gen;
static _Thread_local int t_rank = -1; /* ct_trace_set_thread_rank, or -1: the process's */

static double clock_abs(void) { return 1e6 * ct_monotonic_s(); }

static void free_bufs(void) {
  for (thread_buf *b = g.bufs, *next; b; b = next) {
    next = b->next;
    free(b->ev);
    free(b->str);
    free(b);
  }
  g.bufs = NULL;
  for (int i = 0; i < g.nforeign; i++) free(g.foreign[i]);
  free(g.foreign);
  free(g.foreign_len);
  g.foreign = NULL;
  g.foreign_len = NULL;
  g.nforeign = 0;
}

void ct_trace_start(long long first, long long last, int rank) {
  pthread_mutex_lock(&g.mu);
  free_bufs();
  g.gen++;
  g.first = first;
  g.last = last < 0 ? -1 : last;
  g.rank = rank;
  g.world = 1;
  g.next_data_tid = CT_TRACE_DATA;
  g.origin_abs = clock_abs();
  g.shift = 0;
  g.closed = g.handed = false;
  pthread_mutex_unlock(&g.mu);
  __atomic_store_n(&ct_trace_recording_, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&ct_trace_enabled_, 1, __ATOMIC_RELEASE);
}

void ct_trace_free(void) {
  __atomic_store_n(&ct_trace_recording_, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&ct_trace_enabled_, 0, __ATOMIC_RELEASE);
  pthread_mutex_lock(&g.mu);
  free_bufs();
  g.gen++;
  pthread_mutex_unlock(&g.mu);
}

double ct_trace_now(void) { return clock_abs() - g.origin_abs; }
double ct_trace_clock_abs(void) { return clock_abs(); }
double ct_trace_origin_abs(void) { return g.origin_abs; }

static thread_buf *my_buf(void) {
  const unsigned gen = __atomic_load_n(&g.gen, __ATOMIC_ACQUIRE);
  if (t_buf && t_gen == gen) return t_buf;
  thread_buf *b = ct_xcalloc(1, sizeof *b);
  b->str_cap = 256;
  b->str = ct_xcalloc(b->str_cap, 1);
  b->str_len = 1; /* offset 0: "" */
  pthread_mutex_lock(&g.mu);
  b->pid = t_rank >= 0 ? t_rank : g.rank;
  b->next = g.bufs;
  g.bufs = b;
  t_gen = g.gen;
  pthread_mutex_unlock(&g.mu);
  t_buf = b;
  return b;
}

void ct_trace_set_thread_rank(int rank) {
  t_rank = rank;
  if (ct_trace_enabled()) my_buf()->pid = rank;
}

static uint32_t intern(thread_buf *b, const char *s) {
  if (!s || !*s) return 0;
  const size_t h = ((uintptr_t)s >> 3) % NAME_CACHE;
  if (b->cache_ptr[h] == s && strcmp(b->str + b->cache_off[h], s) == 0) return b->cache_off[h];
  const size_t len = strlen(s) + 1;
  if (b->str_len + len > b->str_cap) {
    while (b->str_len + len > b->str_cap) b->str_cap *= 2;
    b->str = ct_xrealloc(b->str, b->str_cap);
  }
  const uint32_t off = (uint32_t)b->str_len;
  memcpy(b->str + off, s, len);
  b->str_len += len;
  b->cache_ptr[h] = s;
  b->cache_off[h] = off;
  return off;
}

void ct_trace_complete(ct_trace_track track, const char *cat, const char *name, double t0,
                       double t1, const ct_trace_args *args) {
  thread_buf *b = my_buf();
  if (b->n == b->cap) {
    if (b->cap == MAX_EVENTS_PER_THREAD) {
      b->dropped++;
      return;
    }
    b->cap = b->cap ? 2 * b->cap : 1024;
    b->ev = ct_xrealloc(b->ev, b->cap * sizeof *b->ev);
  }
  int tid = (int)track;
  if (track == CT_TRACE_DATA) {
    if (!b->data_tid) {
      pthread_mutex_lock(&g.mu);
      b->data_tid = g.next_data_tid < CT_TRACE_TIDS - 1 ? g.next_data_tid++ : CT_TRACE_TIDS - 1;
      pthread_mutex_unlock(&g.mu);
    }
    tid = b->data_tid;
  }
  event *e = &b->ev[b->n++];
  e->ts = t0;
  e->dur = t1 > t0 ? t1 - t0 : 0;
  e->cat = cat;
  e->name = intern(b, name);
  e->type = args ? intern(b, args->type) : 0;
  e->index_name = args ? args->index_name : NULL;
  e->index = args ? args->index : 0;
  e->bytes = args ? args->bytes : 0;
  e->tid = (uint16_t)tid;
  b->tids_used |= 1ull << tid;
}

static bool in_window(long long iter) {
  return iter >= g.first && (g.last < 0 || iter <= g.last);
}

bool ct_trace_wants(long long iter) { return ct_trace_enabled() && !g.closed && in_window(iter); }

double ct_trace_iteration_begin(long long iter) {
  __atomic_store_n(&ct_trace_recording_, in_window(iter) && !g.closed, __ATOMIC_RELAXED);
  return ct_trace_now();
}

void ct_trace_iteration_end(long long iter, double t0) {
  /* by the window, not by the recording flag: the next iteration may have
   * been launched ahead of this one's end, opening or closing it */
  if (!ct_trace_enabled() || g.closed || !in_window(iter)) return;
  char name[48];
  snprintf(name, sizeof name, "iteration %lld", iter);
  const ct_trace_args a = {.index_name = "iter", .index = iter};
  ct_trace_complete(CT_TRACE_COMPUTE, "iteration", name, t0, ct_trace_now(), &a);
  if (g.last >= 0 && iter >= g.last) __atomic_store_n(&ct_trace_recording_, 0, __ATOMIC_RELAXED);
}

void ct_trace_set_alignment(double shift_us, int world) {
  pthread_mutex_lock(&g.mu);
  g.shift = shift_us;
  g.world = world > 0 ? world : 1;
  pthread_mutex_unlock(&g.mu);
}

/* ------------------------------------------------------------------ JSON */

/* s as a JSON string, quotes included. */
static void sb_json_string(ct_text *sb, const char *s) {
  ct_text_append(sb, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') ct_text_printf(sb, "\\%c", *p);
    else if (*p < 0x20) ct_text_printf(sb, "\\u%04x", *p);
    else ct_text_append(sb, (const char *)p, 1);
  }
  ct_text_append(sb, "\"", 1);
}

static void sep(ct_text *sb) {
  if (sb->len) ct_text_printf(sb, ",\n");
}

static const char *track_name(int tid, char *buf, size_t size) {
  switch (tid) {
    case CT_TRACE_COMPUTE: return "compute";
    case CT_TRACE_COMM: return "communication";
    case CT_TRACE_HOST: return "host";
    case CT_TRACE_GPU_COMPUTE: return "GPU compute stream";
    case CT_TRACE_GPU_GRADIENTS: return "GPU gradient stream";
    case CT_TRACE_GPU_COMM: return "GPU communication stream";
    default: break;
  }
  snprintf(buf, size, "data %d", tid - CT_TRACE_DATA);
  return buf;
}

static void write_event(ct_text *sb, const thread_buf *b, const event *e) {
  sep(sb);
  ct_text_printf(sb, "{\"ph\":\"X\",\"name\":");
  sb_json_string(sb, b->str + e->name);
  ct_text_printf(sb, ",\"cat\":\"%s\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d", e->cat,
            e->ts + g.shift, e->dur, b->pid, e->tid);
  if (!e->type && !e->index_name && !e->bytes) {
    ct_text_printf(sb, "}");
    return;
  }
  const char *comma = "";
  ct_text_printf(sb, ",\"args\":{");
  if (e->type) {
    ct_text_printf(sb, "\"type\":");
    sb_json_string(sb, b->str + e->type);
    comma = ",";
  }
  if (e->index_name) {
    ct_text_printf(sb, "%s\"%s\":%lld", comma, e->index_name, e->index);
    comma = ",";
  }
  if (e->bytes) {
    ct_text_printf(sb, "%s\"bytes\":%llu", comma, (unsigned long long)e->bytes);
    if (e->dur > 0) {
      /* bytes per microsecond = MB/s; algbw as NCCL's tests report it, and
       * busbw, what a ring all-reduce moves over each link */
      const double algbw = (double)e->bytes / e->dur / 1e3;
      const double busbw = algbw * 2.0 * (g.world - 1) / g.world;
      ct_text_printf(sb, ",\"algbw_GBps\":%.4f,\"busbw_GBps\":%.4f", algbw, busbw);
    }
  }
  ct_text_printf(sb, "}}");
}

/* Process and thread names of every (pid, tid) the buffers used. */
static void write_metadata(ct_text *sb) {
  int pids[256], npids = 0;
  for (const thread_buf *b = g.bufs; b; b = b->next) {
    bool seen = false;
    for (int i = 0; i < npids; i++) seen |= pids[i] == b->pid;
    if (seen || npids == 256) continue;
    pids[npids++] = b->pid;
    sep(sb);
    ct_text_printf(sb,
              "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"rank "
              "%d\"}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
              "\"args\":{\"sort_index\":%d}}",
              b->pid, b->pid, b->pid, b->pid);
    uint64_t tids = 0;
    for (const thread_buf *o = g.bufs; o; o = o->next)
      if (o->pid == b->pid) tids |= o->tids_used;
    for (int t = 0; t < 64; t++) {
      if (!(tids >> t & 1)) continue;
      char buf[32];
      sep(sb);
      ct_text_printf(sb,
                "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":"
                "\"%s\"}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"sort_index\":%d}}",
                b->pid, t, track_name(t, buf, sizeof buf), b->pid, t, t);
    }
  }
}

char *ct_trace_take_json(size_t *len) {
  __atomic_store_n(&ct_trace_recording_, 0, __ATOMIC_RELAXED);
  pthread_mutex_lock(&g.mu);
  g.closed = true;
  ct_text sb = {0};
  write_metadata(&sb);
  for (const thread_buf *b = g.bufs; b; b = b->next)
    for (size_t i = 0; i < b->n; i++) write_event(&sb, b, &b->ev[i]);
  pthread_mutex_unlock(&g.mu);
  if (!sb.s) ct_text_append(&sb, "", 0);
  *len = sb.len;
  return sb.s;
}

void ct_trace_add_json(const char *text, size_t len) {
  pthread_mutex_lock(&g.mu);
  g.foreign = ct_xrealloc(g.foreign, (size_t)(g.nforeign + 1) * sizeof *g.foreign);
  g.foreign_len = ct_xrealloc(g.foreign_len, (size_t)(g.nforeign + 1) * sizeof *g.foreign_len);
  char *copy = ct_xcalloc(len + 1, 1);
  memcpy(copy, text, len);
  g.foreign[g.nforeign] = copy;
  g.foreign_len[g.nforeign++] = len;
  pthread_mutex_unlock(&g.mu);
}

void ct_trace_mark_sent(void) {
  pthread_mutex_lock(&g.mu);
  g.handed = true;
  pthread_mutex_unlock(&g.mu);
}

ct_status ct_trace_write(const char *path, ct_error *err) {
  pthread_mutex_lock(&g.mu);
  const bool sent = g.handed || g.rank != 0; /* rank 0's process writes */
  size_t events = 0, dropped = 0;
  for (const thread_buf *b = g.bufs; b; b = b->next) {
    events += b->n;
    dropped += b->dropped;
  }
  pthread_mutex_unlock(&g.mu);
  if (sent) return CT_OK;
  size_t own_len;
  char *own = ct_trace_take_json(&own_len);
  ct_text sb = {0};
  ct_text_printf(&sb, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"cortado\"},\"traceEvents\":[\n");
  ct_text_append(&sb, own, own_len);
  pthread_mutex_lock(&g.mu);
  for (int i = 0; i < g.nforeign; i++) {
    if (g.foreign_len[i] == 0) continue;
    if (sb.s[sb.len - 1] != '\n') ct_text_printf(&sb, ",\n");
    ct_text_append(&sb, g.foreign[i], g.foreign_len[i]);
  }
  const int ranks = 1 + g.nforeign;
  pthread_mutex_unlock(&g.mu);
  ct_text_printf(&sb, "\n]}\n");
  free(own);
  ct_status st = ct_file_write_atomic(path, sb.s, sb.len, err);
  free(sb.s);
  if (st != CT_OK) return st;
  LOG_INFO("Trace of %d rank%s written to %s (%zu events of rank 0; open it in ui.perfetto.dev "
           "or chrome://tracing)",
           ranks, ranks == 1 ? "" : "s", path, events);
  if (dropped)
    LOG_WARNING("Trace: %zu events dropped (a thread keeps at most %zu): narrow --trace_iters",
                dropped, MAX_EVENTS_PER_THREAD);
  return CT_OK;
}
