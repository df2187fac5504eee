/* Parameter servers on CPU ranks (parallel/ps.h, docs/distributed.md):
 *   - SSP with staleness 0 is bulk synchronous: 3 workers and 1 or 2
 *     servers end with the .caffemodel bytes of `mpirun -np 3` with the
 *     all-reduce, and print the same losses, for SGD with momentum and
 *     weight decay and for Adam with a multistep rate (the servers run the
 *     solver's own update on their shards);
 *   - SSP with staleness 3 and one worker: the bytes of one worker alone;
 *   - SSP with staleness 1 and 2: the clock lines of the first server say
 *     every worker pulled every clock and the gap to the slowest worker
 *     never passed the bound;
 *   - a run resumed from an SSP snapshot (taken from the servers) ends
 *     with the bytes of the run that was not stopped;
 *   - async and BMUF train (their loss goes down); LeNet on Fashion-MNIST
 *     in every mode is tests/sh_ps_lenet_mpi.sh.
 * Under the sanitizers (minutes of mpirun on 2 cores) only the cases that
 * cover the most code run: two servers at staleness 0 and 1, and resume;
 * async and BMUF run there in tests/sh_sigterm_ps_mpi.sh. */
#include <math.h>
#include <sys/stat.h>

#include "testutil.h"

#include "dp_fixture.h"

/* Skips a case the release build covers when the sanitizers run. */
static void release_only(void) {
  const char *v = getenv("CORTADO_SANITIZED");
  if (v && strcmp(v, "1") == 0) skip();
}

static void must_run(int rc, char *out, const char *what) {
  if (rc != 0) fail_msg("%s failed (%d):\n%s", what, rc, out ? out : "");
}

/* Writes base/sub/solver.prototxt over base's LMDB into solver; `rule`,
 * when not NULL, replaces the fixture's line of type, rates and policy. */
static void setup(char *solver, size_t size, const char *base, const char *sub, int max_iter,
                  int snapshot_every, const char *rule) {
  char dir[4300], lmdb[4300];
  snprintf(dir, sizeof dir, "%s/%s", base, sub);
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  mkdir(dir, 0755);
  dpf_write_solver(dir, lmdb, 4, max_iter, snapshot_every, NULL);
  snprintf(solver, size, "%s/solver.prototxt", dir);
  if (!rule) return;
  size_t len = 0;
  char *text = tu_read_file(solver, &len);
  assert_non_null(text);
  char *line = strstr(text, "type: 'SGD'"), *end = line ? strchr(line, '\n') : NULL;
  assert_non_null(end);
  char *edited = calloc(len + strlen(rule) + 2, 1);
  memcpy(edited, text, (size_t)(line - text));
  strcat(edited, rule);
  strcat(edited, end);
  tu_write_file(solver, edited, strlen(edited));
  free(edited);
  free(text);
}

/* The root's loss lines ("Iteration N (...), loss = X" without the
 * timing, and "Train net output" lines), one per line, malloc'd. */
static char *loss_lines(const char *out) {
  size_t cap = strlen(out) + 1, len = 0;
  char *r = calloc(cap, 1);
  for (const char *line = out; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) : strlen(line);
    const char *loss = NULL;
    const char *it = strstr(line, "] Iteration ");
    if (it && it < line + n) loss = strstr(it, "loss = ");
    const char *tn = strstr(line, "Train net output");
    if (tn && tn < line + n) loss = tn;
    if (loss && loss < line + n) {
      const size_t k = (size_t)(line + n - loss);
      memcpy(r + len, loss, k);
      len += k;
      r[len++] = '\n';
    }
    line = end ? end + 1 : NULL;
  }
  return r;
}

static bool same_file(const char *a, const char *b) {
  size_t la = 0, lb = 0;
  char *x = tu_read_file(a, &la), *y = tu_read_file(b, &lb);
  if (!x || !y) fail_msg("cannot read %s or %s", a, b);
  const bool same = la == lb && memcmp(x, y, la) == 0;
  free(x);
  free(y);
  return same;
}

/* `workers` workers with the all-reduce against as many workers and
 * `servers` servers with SSP at `staleness`: the same bytes, the same
 * printed losses (staleness 0; or one worker, which never waits for
 * another and sees every update of its own). */
static void check_ssp_exact(const char *name, const char *extra, int workers, int servers, int staleness) {
  const char *base = tu_tmpdir(name);
  char lmdb[4200], ar[4400], ps[4400], flags[128], a[4500], b[4500];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 60, -1);
  setup(ar, sizeof ar, base, "ar", 8, 0, extra);
  setup(ps, sizeof ps, base, "ps", 8, 0, extra);
  char *out_ar = NULL, *out_ps = NULL;
  must_run(dpf_mpirun(workers, ar, "", &out_ar), out_ar, "the all-reduce");
  snprintf(flags, sizeof flags, "--dp_mode=ssp --staleness=%d --num_servers=%d", staleness, servers);
  must_run(dpf_mpirun(workers + servers, ps, flags, &out_ps), out_ps, "SSP");
  char want[160];
  snprintf(want, sizeof want, "effective batch %d = 4 x %d worker%s", 4 * workers, workers, workers == 1 ? "" : "s");
  if (!strstr(out_ps, want)) fail_msg("no '%s' in:\n%s", want, out_ps);
  snprintf(want, sizeof want, "parameter servers: ssp (staleness %d), %d server%s: rank%s %d-%d", staleness, servers,
           servers == 1 ? "" : "s", servers == 1 ? "" : "s", workers, workers + servers - 1);
  if (!strstr(out_ps, want)) fail_msg("no '%s' in:\n%s", want, out_ps);
  snprintf(a, sizeof a, "%s/ar/snap_iter_8.caffemodel", base);
  snprintf(b, sizeof b, "%s/ps/snap_iter_8.caffemodel", base);
  assert_true(same_file(a, b));
  char *la = loss_lines(out_ar), *lb = loss_lines(out_ps);
  assert_true(strlen(la) > 100);
  assert_string_equal(la, lb);
  free(la);
  free(lb);
  free(out_ar);
  free(out_ps);
}

static void test_bsp_one_server(void **state) {
  release_only();
  check_ssp_exact("ps_bsp_one", NULL, 3, 1, 0);
}

static void test_bsp_two_servers_adam(void **state) {
  check_ssp_exact("ps_bsp_adam",
            "type: 'Adam' momentum: 0.9 momentum2: 0.999 base_lr: 0.02 weight_decay: 0.001 "
            "lr_policy: 'multistep' gamma: 0.5 stepvalue: 3 stepvalue: 6",
            3, 2, 0);
}

/* Staleness without a second worker is no staleness: the ring of clocks,
 * the pull's bound and the pushes past the slowest give the single
 * worker's bytes (stale weights read wrongly would not). */
static void test_ssp_one_worker(void **state) {
  release_only();
  check_ssp_exact("ps_ssp_one_worker", NULL, 1, 2, 3);
}

/* Every "PS clock" line of out: the gap never passes `bound`, and each of
 * `workers` workers pulled clocks 0 .. iters (each once). */
static void check_clock_lines(const char *out, int workers, int iters, int bound) {
  int *seen = calloc((size_t)workers * (size_t)(iters + 1), sizeof *seen);
  int lines = 0, widest = 0;
  for (const char *p = strstr(out, "PS clock: "); p; p = strstr(p + 1, "PS clock: ")) {
    int w, c, m, gap;
    char b[16];
    if (sscanf(p, "PS clock: worker %d at clock %d, slowest at %d, gap %d (bound %15[^)])", &w, &c, &m,
               &gap, b) != 5)
      fail_msg("cannot read the clock line '%.80s'", p);
    assert_int_equal(atoi(b), bound);
    assert_int_equal(gap, c - m);
    if (gap > bound) fail_msg("worker %d at clock %d ran %d clocks ahead of the slowest (bound %d)", w, c, gap, bound);
    if (gap > widest) widest = gap;
    assert_true(w >= 0 && w < workers && c >= 0 && c <= iters);
    seen[w * (iters + 1) + c]++;
    lines++;
  }
  assert_int_equal(lines, workers * (iters + 1));
  for (int i = 0; i < workers * (iters + 1); i++) assert_int_equal(seen[i], 1);
  printf("# %d clock lines, widest gap %d (bound %d)\n", lines, widest, bound);
  free(seen);
}

static void check_ssp_gap(const char *name, int staleness) {
  const char *base = tu_tmpdir(name);
  char lmdb[4200], ps[4400], flags[128];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 60, -1);
  setup(ps, sizeof ps, base, "ps", 16, 0, NULL);
  char *out = NULL;
  snprintf(flags, sizeof flags, "--dp_mode=ssp --staleness=%d --num_servers=2", staleness);
  must_run(dpf_mpirun(5, ps, flags, &out), out, "SSP");
  check_clock_lines(out, 3, 16, staleness);
  free(out);
}

static void test_ssp_gap_one(void **state) { check_ssp_gap("ps_gap_1", 1); }
static void test_ssp_gap_two(void **state) {
  release_only();
  check_ssp_gap("ps_gap_2", 2);
}

/* SSP at staleness 0, 10 iterations, against the same run resumed from
 * its snapshot at iteration 4. */
static void test_resume(void **state) {
  const char *base = tu_tmpdir("ps_resume");
  char lmdb[4200], ps[4400], flags[4600], a[4500], keep[4500], snap[4500];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 60, -1);
  setup(ps, sizeof ps, base, "ps", 10, 4, NULL);
  char *out = NULL;
  must_run(dpf_mpirun(4, ps, "--dp_mode=ssp", &out), out, "SSP");
  free(out);
  snprintf(a, sizeof a, "%s/ps/snap_iter_10.caffemodel", base);
  snprintf(keep, sizeof keep, "%s/whole.caffemodel", base);
  assert_int_equal(rename(a, keep), 0);
  snprintf(snap, sizeof snap, "%s/ps/snap_iter_4.solverstate", base);
  snprintf(flags, sizeof flags, "--dp_mode=ssp --snapshot=%s", snap);
  must_run(dpf_mpirun(4, ps, flags, &out), out, "the resumed SSP run");
  free(out);
  assert_true(same_file(a, keep));
}

/* The first and the last "Iteration N (...), loss = X" of out. */
static void first_last_loss(const char *out, double *first, double *last) {
  char *lines = loss_lines(out);
  *first = *last = NAN;
  for (char *p = strstr(lines, "loss = "); p; p = strstr(p + 1, "loss = ")) {
    if (p != lines && p[-1] != '\n') continue;
    const double v = atof(p + 7);
    if (isnan(*first)) *first = v;
    *last = v;
  }
  free(lines);
}

/* async and bmuf (blocks of 3 iterations, 2 servers) bring the loss (the
 * mean of 5 iterations') below 3/4 of its start (it ends near 0.1 of it).  Momentum 0.5: with the
 * fixture's 0.9, async's unbounded staleness sometimes diverges on this
 * small problem (1 run in 3). */
static void check_trains(const char *name, const char *flags) {
  const char *base = tu_tmpdir(name);
  char lmdb[4200], ps[4400];
  snprintf(lmdb, sizeof lmdb, "%s/db", base);
  dpf_write_lmdb(lmdb, 60, -1);
  setup(ps, sizeof ps, base, "ps", 60, 0,
        "type: 'SGD' base_lr: 0.1 momentum: 0.5 weight_decay: 0.001 lr_policy: 'fixed' average_loss: 5");
  char *out = NULL;
  must_run(dpf_mpirun(5, ps, flags, &out), out, flags);
  double first, last;
  first_last_loss(out, &first, &last);
  printf("# %s: loss %g -> %g\n", flags, first, last);
  assert_true(isfinite(first) && isfinite(last));
  assert_true(last < 0.75 * first);
  free(out);
}

static void test_async_trains(void **state) {
  release_only();
  check_trains("ps_async", "--dp_mode=async --num_servers=2");
}
static void test_bmuf_trains(void **state) {
  release_only();
  check_trains("ps_bmuf", "--dp_mode=bmuf --num_servers=2 --bmuf_sync_period=3");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bsp_one_server),
      cmocka_unit_test(test_bsp_two_servers_adam),
      cmocka_unit_test(test_ssp_one_worker),
      cmocka_unit_test(test_ssp_gap_one),
      cmocka_unit_test(test_ssp_gap_two),
      cmocka_unit_test(test_resume),
      cmocka_unit_test(test_async_trains),
      cmocka_unit_test(test_bmuf_trains),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
