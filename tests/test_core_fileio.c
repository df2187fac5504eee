/* The shared file reader refuses what is not a regular file before reading
 * it (a FIFO would block forever, /dev/zero would be read up to the size
 * limit), and the temporaries of writers that died are removed while those
 * of live or locked writers stay. */
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/log.h"
#include "proto/io.h"
#include "proto/textformat.h"
#include "testutil.h"

#include "caffe.pb-c.h"

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test_core_fileio: a read blocked (a FIFO was opened and read)\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static int setup(void **state) {
  (void)state;
  ct_log_set_level(CT_LOG_WARNING);
  signal(SIGALRM, on_alarm);
  return 0;
}

/* Every reader of models, states and prototxts refuses a FIFO at once (a
 * blocked read fails the test through the alarm). */
static void test_fifo_refused_without_blocking(void **state) {
  (void)state;
  const char *dir = tu_tmpdir("fileio_fifo");
  char path[4200], want[4400];
  snprintf(path, sizeof path, "%s/weights.caffemodel", dir);
  assert_int_equal(mkfifo(path, 0644), 0);
  snprintf(want, sizeof want, "%s: not a regular file (it is a FIFO (named pipe)); refused before reading",
           path);
  alarm(20);
  char *data = (char *)1;
  size_t len = 7;
  ct_error err;
  assert_int_equal(ct_file_read_all(path, &data, &len, 1 << 20, &err), CT_ERR_IO);
  assert_null(data);
  assert_int_equal(len, 0);
  assert_string_equal(err.msg, want);

  ProtobufCMessage *m = NULL;
  assert_int_equal(ct_proto_read_binary(&caffe__net_parameter__descriptor, path, &m, &err), CT_ERR_IO);
  assert_string_equal(err.msg, want);
  assert_int_equal(ct_proto_read_binary(&caffe__solver_state__descriptor, path, &m, &err), CT_ERR_IO);
  assert_string_equal(err.msg, want);
  assert_int_equal(ct_text_parse_file(&caffe__net_parameter__descriptor, path, &m, &err), CT_ERR_IO);
  assert_string_equal(err.msg, want);
  alarm(0);
}

/* /dev/zero would be read up to the limit (2 GiB for a model) before
 * "file too large"; /dev/null would parse as an empty file. */
static void test_devices_refused(void **state) {
  (void)state;
  char *data = NULL;
  size_t len = 0;
  ct_error err;
  alarm(20);
  assert_int_equal(ct_file_read_all("/dev/zero", &data, &len, (size_t)1 << 31, &err), CT_ERR_IO);
  assert_string_equal(err.msg,
                      "/dev/zero: not a regular file (it is a character device); refused before reading");
  assert_int_equal(ct_file_read_all("/dev/null", &data, &len, 100, &err), CT_ERR_IO);
  assert_string_equal(err.msg,
                      "/dev/null: not a regular file (it is a character device); refused before reading");
  alarm(0);
  /* a regular file still reads */
  const char *dir = tu_tmpdir("fileio_regular");
  char path[4200];
  snprintf(path, sizeof path, "%s/a.txt", dir);
  tu_write_file(path, "abc", 3);
  assert_int_equal(ct_file_read_all(path, &data, &len, 100, &err), CT_OK);
  assert_int_equal(len, 3);
  assert_string_equal(data, "abc");
  free(data);
}

/* The id of a process that has ended (reaped). */
static pid_t dead_pid(void) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(0);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return pid;
}

static bool exists(const char *dir, const char *name) {
  char path[8400];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  struct stat st;
  return lstat(path, &st) == 0;
}

static void touch(const char *dir, const char *name) {
  char path[16800];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  tu_write_file(path, "x", 1);
}

static void test_stale_temps_removed(void **state) {
  (void)state;
  const char *dir = tu_tmpdir("fileio_stale");
  const pid_t dead = dead_pid();
  pid_t alive = fork();
  assert_true(alive >= 0);
  if (alive == 0) {
    pause();
    _exit(0);
  }
  char dead_model[256], dead_state[256], dead_db[256], alive_model[256], locked[256], own[256];
  char other[256], odd[256];
  snprintf(dead_model, sizeof dead_model, "run_iter_500.caffemodel.tmp.%d.0", (int)dead);
  snprintf(dead_state, sizeof dead_state, "run_iter_500.solverstate.tmp.%d.1", (int)dead);
  snprintf(dead_db, sizeof dead_db, "run_iter_db.tmp.%d.0", (int)dead);
  snprintf(alive_model, sizeof alive_model, "run_iter_600.caffemodel.tmp.%d.0", (int)alive);
  snprintf(locked, sizeof locked, "run_iter_700.caffemodel.tmp.%d.3", (int)dead);
  snprintf(own, sizeof own, "run_iter_800.caffemodel.tmp.%d.0", (int)getpid());
  snprintf(other, sizeof other, "other_iter_500.caffemodel.tmp.%d.0", (int)dead);
  snprintf(odd, sizeof odd, "run_iter_500.caffemodel.tmp.%d.x", (int)dead);
  const char *files[] = {dead_model, dead_state, alive_model, locked, own, other, odd};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) touch(dir, files[i]);
  /* a database folder of a dead tool, with files in it */
  char db[8400];
  snprintf(db, sizeof db, "%s/%s", dir, dead_db);
  assert_int_equal(mkdir(db, 0755), 0);
  touch(db, "data.mdb");
  /* a writer on another machine: the pid means nothing here, its lock does */
  char lpath[8400];
  snprintf(lpath, sizeof lpath, "%s/%s", dir, locked);
  int lfd = open(lpath, O_RDONLY);
  assert_true(lfd >= 0);
  assert_int_equal(flock(lfd, LOCK_EX), 0);
  /* flock locks belong to the open file: the check's own open must see it
   * held, as it would be by another process */
  char prefix[4300];
  snprintf(prefix, sizeof prefix, "%s/run_iter_", dir);
  assert_int_equal(ct_file_remove_stale_temps(prefix), 3);
  assert_false(exists(dir, dead_model));
  assert_false(exists(dir, dead_state));
  assert_false(exists(dir, dead_db));
  assert_true(exists(dir, alive_model));
  assert_true(exists(dir, locked));
  assert_true(exists(dir, own));
  assert_true(exists(dir, other));
  assert_true(exists(dir, odd));
  close(lfd);
  /* unlocked now: removed */
  assert_int_equal(ct_file_remove_stale_temps(prefix), 1);
  assert_false(exists(dir, locked));
  kill(alive, SIGKILL);
  waitpid(alive, NULL, 0);
  assert_int_equal(ct_file_remove_stale_temps(prefix), 1);
  assert_false(exists(dir, alive_model));
  assert_true(exists(dir, own));
}

/* An atomic write of a path removes that path's dead temporaries. */
static void test_atomic_write_cleans_its_path(void **state) {
  (void)state;
  const char *dir = tu_tmpdir("fileio_write_clean");
  const pid_t dead = dead_pid();
  char torn[256], path[4300];
  snprintf(torn, sizeof torn, "mean.binaryproto.tmp.%d.0", (int)dead);
  touch(dir, torn);
  snprintf(path, sizeof path, "%s/mean.binaryproto", dir);
  ct_error err;
  assert_int_equal(ct_file_write_atomic(path, "abc", 3, &err), CT_OK);
  assert_false(exists(dir, torn));
  assert_true(exists(dir, "mean.binaryproto"));
}

int main(int argc, char **argv) {
  tu_filter_tests(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fifo_refused_without_blocking),
      cmocka_unit_test(test_devices_refused),
      cmocka_unit_test(test_stale_temps_removed),
      cmocka_unit_test(test_atomic_write_cleans_its_path),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
