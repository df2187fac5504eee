/* Point to point over the "gloo" communicator (comm_gloo.c): real ranks
 * (threads of this process, TCP over loopback, a file store) send and
 * receive in order, receive from whichever rank sends first through probe
 * (as a parameter server serves its workers), and name what went wrong: a
 * length that differs from the one sent, a peer that never sends. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "parallel/comm_gloo.h"
#include "testutil.h"

#define MAX_RANKS 4

typedef struct rank_run rank_run;
typedef ct_status (*rank_fn)(ct_comm *c, rank_run *r, ct_error *err);

struct rank_run {
  const char *dir, *run_id;
  int rank, size;
  double timeout_s;
  rank_fn fn;
  ct_status st;
  ct_error err;
  int seen[MAX_RANKS]; /* what the rank's body counted */
};

static void *rank_main(void *p) {
  rank_run *r = p;
  ct_gloo_store *s = NULL;
  ct_comm *c = NULL;
  const ct_gloo_bind bind = {.iface = "lo"};
  r->st = ct_gloo_store_open_file(&s, r->dir, r->run_id, &r->err);
  if (r->st == CT_OK)
    r->st = ct_comm_gloo_create(&c, s, r->rank, r->size, &bind, 30, r->timeout_s, &r->err);
  if (r->st == CT_OK) r->st = r->fn(c, r, &r->err);
  ct_comm_free(c);
  ct_gloo_store_free(s);
  return NULL;
}

/* Runs fn as `size` ranks of a run named run_id; r gets each rank's result. */
static void run_ranks(const char *run_id, int size, double timeout_s, rank_fn fn, rank_run *r) {
  const char *dir = tu_tmpdir("comm_p2p_gloo");
  pthread_t t[MAX_RANKS];
  for (int i = 0; i < size; i++) {
    r[i] = (rank_run){dir, run_id, i, size, timeout_s, fn, CT_OK, {0}, {0}};
    assert_int_equal(pthread_create(&t[i], NULL, rank_main, &r[i]), 0);
  }
  for (int i = 0; i < size; i++) pthread_join(t[i], NULL);
}

/* The k-th value of message m from rank `from`. */
static float value(int from, int m, size_t k) { return (float)(from * 1000 + m * 100) + (float)k * 0.5f; }

static void fill(float *buf, size_t n, int from, int m) {
  for (size_t k = 0; k < n; k++) buf[k] = value(from, m, k);
}

static bool holds(const float *buf, size_t n, int from, int m) {
  for (size_t k = 0; k < n; k++)
    if (buf[k] != value(from, m, k)) return false;
  return true;
}

/* ---------------------------------------------------------------- in order */

static const size_t k_sizes[] = {5, 0, 70000, 1};

/* Rank 1 sends four messages of tag 3 (one empty, one of 280 kB), rank 0
 * takes them in order and answers each on tag 4 with isend. */
static ct_status in_order(ct_comm *c, rank_run *r, ct_error *err) {
  float *buf = malloc(70000 * sizeof *buf), *back = malloc(70000 * sizeof *back);
  ct_status st = CT_OK;
  for (int m = 0; m < 4 && st == CT_OK; m++) {
    const size_t n = k_sizes[m];
    if (r->rank == 1) {
      fill(buf, n, 1, m);
      st = ct_comm_send(c, buf, n, 0, 3, NULL, err);
      if (st == CT_OK) st = ct_comm_recv(c, back, n, 0, 4, NULL, err);
      if (st == CT_OK && holds(back, n, 0, m)) r->seen[0]++;
    } else {
      st = ct_comm_recv(c, buf, n, 1, 3, NULL, err);
      if (st == CT_OK && holds(buf, n, 1, m)) r->seen[1]++;
      void *req = NULL;
      fill(back, n, 0, m);
      if (st == CT_OK) st = ct_comm_isend(c, back, n, 1, 4, &req, err);
      if (st == CT_OK) st = ct_comm_send_wait(c, req, err);
    }
  }
  if (st == CT_OK) st = ct_comm_barrier(c, err);
  free(buf);
  free(back);
  return st;
}

static void test_send_recv_in_order(void **state) {
  (void)state;
  rank_run r[2];
  run_ranks("in_order", 2, 30, in_order, r);
  for (int i = 0; i < 2; i++) {
    if (r[i].st != CT_OK) fail_msg("rank %d: %s", i, r[i].err.msg);
  }
  assert_int_equal(r[0].seen[1], 4);
  assert_int_equal(r[1].seen[0], 4);
}

/* ---------------------------------------------------------------- posted ahead */

/* Rank 0 posts the receives of all four messages of tag 5 (one empty, one
 * of 280 kB) before rank 1 sends any (a barrier between), then completes
 * them in order; each holds its own message.  (A count that differs from
 * the one sent is the caller's bug here: the pipeline stages agree on
 * their crossings before they post.) */
static ct_status posted_ahead(ct_comm *c, rank_run *r, ct_error *err) {
  float *buf[4];
  for (int m = 0; m < 4; m++) buf[m] = calloc(70000, sizeof(float));
  void *req[4] = {NULL, NULL, NULL, NULL};
  ct_status st = CT_OK;
  if (r->rank == 0) {
    assert_true(ct_comm_has_irecv(c));
    for (int m = 0; m < 4 && st == CT_OK; m++) st = ct_comm_irecv(c, buf[m], k_sizes[m], 1, 5, &req[m], err);
    if (st == CT_OK) st = ct_comm_barrier(c, err);
    for (int m = 0; m < 4 && st == CT_OK; m++) {
      st = ct_comm_send_wait(c, req[m], err);
      req[m] = NULL;
      if (st == CT_OK && holds(buf[m], k_sizes[m], 1, m)) r->seen[1]++;
    }
  } else {
    st = ct_comm_barrier(c, err);
    for (int m = 0; m < 4 && st == CT_OK; m++) {
      fill(buf[m], k_sizes[m], 1, m);
      st = ct_comm_isend(c, buf[m], k_sizes[m], 0, 5, &req[m], err);
    }
    for (int m = 0; m < 4 && st == CT_OK; m++) {
      st = ct_comm_send_wait(c, req[m], err);
      req[m] = NULL;
    }
  }
  if (st == CT_OK) st = ct_comm_barrier(c, err);
  for (int m = 0; m < 4; m++) free(buf[m]);
  return st;
}

static void test_irecv_posted_ahead(void **state) {
  (void)state;
  rank_run r[2];
  run_ranks("posted_ahead", 2, 30, posted_ahead, r);
  for (int i = 0; i < 2; i++)
    if (r[i].st != CT_OK) fail_msg("rank %d: %s", i, r[i].err.msg);
  assert_int_equal(r[0].seen[1], 4);
}

/* ---------------------------------------------------------------- probe */

/* Ranks 1 to 3 each isend three messages of tag 7 to rank 0, of 10 r + m
 * floats; rank 0 serves whichever comes first: probe (twice: the same
 * message both times), then recv of that rank and length.  Each rank's
 * messages must come in the order it sent them. */
static ct_status probe_any(ct_comm *c, rank_run *r, ct_error *err) {
  ct_status st = CT_OK;
  if (r->rank != 0) {
    float buf[3][40];
    void *req[3] = {NULL, NULL, NULL};
    for (int m = 0; m < 3 && st == CT_OK; m++) {
      fill(buf[m], (size_t)(10 * r->rank + m), r->rank, m);
      st = ct_comm_isend(c, buf[m], (size_t)(10 * r->rank + m), 0, 7, &req[m], err);
    }
    for (int m = 0; m < 3; m++) {
      ct_error e2;
      const ct_status s2 = ct_comm_send_wait(c, req[m], st == CT_OK ? err : &e2);
      if (st == CT_OK) st = s2;
    }
  } else {
    int next[MAX_RANKS] = {0};
    for (int k = 0; k < 9 && st == CT_OK; k++) {
      int peer = -1, again = -1;
      size_t n = 0, n2 = 0;
      st = ct_comm_probe(c, 7, &peer, &n, err);
      if (st == CT_OK) st = ct_comm_probe(c, 7, &again, &n2, err);
      if (st != CT_OK) break;
      if (peer < 1 || peer > 3 || again != peer || n2 != n) {
        return ct_error_set(err, CT_ERR_INVALID, "probe %d: rank %d (%zu floats), then rank %d (%zu)", k,
                            peer, n, again, n2);
      }
      float buf[40];
      const int m = next[peer]++;
      if (n != (size_t)(10 * peer + m))
        return ct_error_set(err, CT_ERR_INVALID, "probe %d: rank %d's message %d has %zu floats", k,
                            peer, m, n);
      st = ct_comm_recv(c, buf, n, peer, 7, NULL, err);
      if (st == CT_OK && holds(buf, n, peer, m)) r->seen[peer]++;
    }
  }
  if (st == CT_OK) st = ct_comm_barrier(c, err);
  return st;
}

static void test_probe_serves_whoever_comes_first(void **state) {
  (void)state;
  rank_run r[4];
  run_ranks("probe_any", 4, 30, probe_any, r);
  for (int i = 0; i < 4; i++) {
    if (r[i].st != CT_OK) fail_msg("rank %d: %s", i, r[i].err.msg);
  }
  for (int i = 1; i < 4; i++) assert_int_equal(r[0].seen[i], 3);
}

/* ---------------------------------------------------------------- cancelled */

static void *raise_later(void *word) {
  struct timespec ts = {0, 200 * 1000000L};
  nanosleep(&ts, NULL);
  __atomic_store_n((int *)word, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* Rank 0's probe is cut short by its cancel word (a parameter server
 * whose link saw a worker die); then rank 1 sends, and rank 0's next probe
 * and receive take the message.  (The cut-short receive once stayed posted
 * in Gloo and took the next message, which no one read: the server waited
 * for a request that had come.) */
static ct_status cancelled_probe(ct_comm *c, rank_run *r, ct_error *err) {
  float buf[6];
  if (r->rank == 1) {
    CT_TRY(ct_comm_barrier(c, err)); /* rank 0's probe was cancelled */
    fill(buf, 6, 1, 0);
    return ct_comm_send(c, buf, 6, 0, 7, NULL, err);
  }
  int cancel = 0, peer = -1;
  size_t n = 0;
  pthread_t t;
  ct_comm_set_watchdog(c, 0, &cancel);
  pthread_create(&t, NULL, raise_later, &cancel);
  ct_status st = ct_comm_probe(c, 7, &peer, &n, err);
  pthread_join(t, NULL);
  if (st != CT_ERR_INTERRUPTED)
    return ct_error_set(err, CT_ERR_INVALID, "the probe was not cut short (status %d)", (int)st);
  __atomic_store_n(&cancel, 0, __ATOMIC_RELEASE);
  CT_TRY(ct_comm_barrier(c, err));
  CT_TRY(ct_comm_probe(c, 7, &peer, &n, err));
  if (peer != 1 || n != 6)
    return ct_error_set(err, CT_ERR_INVALID, "probe: rank %d, %zu floats (want rank 1, 6)", peer, n);
  CT_TRY(ct_comm_recv(c, buf, 6, 1, 7, NULL, err));
  if (holds(buf, 6, 1, 0)) r->seen[1]++;
  ct_comm_set_watchdog(c, 0, NULL);
  return CT_OK;
}

static void test_a_cancelled_probe_loses_nothing(void **state) {
  (void)state;
  rank_run r[2];
  run_ranks("cancelled_probe", 2, 5, cancelled_probe, r);
  for (int i = 0; i < 2; i++)
    if (r[i].st != CT_OK) fail_msg("rank %d: %s", i, r[i].err.msg);
  assert_int_equal(r[0].seen[1], 1);
}

/* ---------------------------------------------------------------- errors */

/* Rank 1 sends 4 floats, rank 0 expects 5. */
static ct_status wrong_count(ct_comm *c, rank_run *r, ct_error *err) {
  float buf[5] = {1, 2, 3, 4, 5};
  if (r->rank == 1) return ct_comm_send(c, buf, 4, 0, 2, NULL, err);
  return ct_comm_recv(c, buf, 5, 1, 2, NULL, err);
}

static void test_a_wrong_length_is_named(void **state) {
  (void)state;
  rank_run r[2];
  run_ranks("wrong_count", 2, 2, wrong_count, r);
  assert_int_equal(r[0].st, CT_ERR_COMM);
  assert_non_null(strstr(r[0].err.msg, "gloo receive on rank 0: rank 1 sent 4 floats with tag 2 "
                                       "where 5 were expected"));
  /* rank 1's floats are never taken: its send may time out; it must return either way */
}

/* Rank 0 waits for a message rank 1 never sends. */
static ct_status never_sent(ct_comm *c, rank_run *r, ct_error *err) {
  float buf[3];
  if (r->rank == 0) return ct_comm_recv(c, buf, 3, 1, 9, NULL, err);
  int peer;
  size_t n;
  return ct_comm_probe(c, 9, &peer, &n, err); /* nobody sends to rank 1 either */
}

static void test_a_silent_peer_times_out(void **state) {
  (void)state;
  rank_run r[2];
  run_ranks("never_sent", 2, 1, never_sent, r);
  assert_int_equal(r[0].st, CT_ERR_COMM);
  assert_non_null(strstr(r[0].err.msg, "gloo receive on rank 0: not finished after 1 s"));
  assert_int_equal(r[1].st, CT_ERR_COMM);
  assert_non_null(strstr(r[1].err.msg, "gloo probe on rank 1: not finished after 1 s"));
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  ct_log_set_level(CT_LOG_WARNING);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_send_recv_in_order),
      cmocka_unit_test(test_irecv_posted_ahead),
      cmocka_unit_test(test_probe_serves_whoever_comes_first),
      cmocka_unit_test(test_a_cancelled_probe_loses_nothing),
      cmocka_unit_test(test_a_wrong_length_is_named),
      cmocka_unit_test(test_a_silent_peer_times_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
