/* Helpers for the tests of the data tools (tests/test_tools_*.c): read a
 * whole database into memory and build Caffe's Datum bytes by hand.
 * Include after testutil.h. */
#ifndef CT_TESTS_TOOLS_DB_HELPERS_H
#define CT_TESTS_TOOLS_DB_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "caffe.pb-c.h"
#include "data/datum.h"
#include "data/db.h"

/* One record of a database read back. */
typedef struct th_record {
  char *key;
  size_t klen;
  uint8_t *val;
  size_t vlen;
} th_record;

typedef struct th_db {
  th_record *rec;
  size_t n;
} th_db;

/* Reads every record of the database at path, in key order; fails the test
 * when the database cannot be read. */
static inline th_db th_db_read(const char *path, ct_db_backend backend) {
  th_db out = {0};
  ct_db *db;
  ct_error err;
  if (ct_db_open(&db, path, backend, CT_DB_READ, &err) != CT_OK) fail_msg("%s", err.msg);
  out.n = ct_db_count(db);
  out.rec = calloc(out.n ? out.n : 1, sizeof *out.rec);
  ct_db_reader *r;
  assert_int_equal(ct_db_reader_open(db, &r, &err), CT_OK);
  for (size_t i = 0; i < out.n; i++) {
    const char *k = ct_db_key(db, i, &out.rec[i].klen);
    out.rec[i].key = calloc(out.rec[i].klen + 1, 1);
    memcpy(out.rec[i].key, k, out.rec[i].klen);
    const void *v;
    if (ct_db_read_index(db, r, i, &v, &out.rec[i].vlen, &err) != CT_OK) fail_msg("%s", err.msg);
    out.rec[i].val = malloc(out.rec[i].vlen ? out.rec[i].vlen : 1);
    memcpy(out.rec[i].val, v, out.rec[i].vlen);
  }
  ct_db_reader_close(r);
  ct_db_close(db);
  return out;
}

static inline void th_db_free(th_db *d) {
  for (size_t i = 0; i < d->n; i++) {
    free(d->rec[i].key);
    free(d->rec[i].val);
  }
  free(d->rec);
  memset(d, 0, sizeof *d);
}

/* Parses record i as a Datum (fails the test when it does not parse). */
static inline Caffe__Datum *th_datum(const th_db *d, size_t i) {
  Caffe__Datum *dt = caffe__datum__unpack(NULL, d->rec[i].vlen, d->rec[i].val);
  assert_non_null(dt);
  return dt;
}

/* Appends a protobuf varint. */
static inline size_t th_varint(uint8_t *out, uint64_t v) {
  size_t n = 0;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    out[n++] = b | (v ? 0x80 : 0);
  } while (v);
  return n;
}

/* The bytes Caffe's C++ protobuf writes for a raw Datum: channels (1),
 * height (2), width (3), data (4), label (5), in field order, nothing else.
 * Returns the length; out must hold c*h*w + 32 bytes. */
static inline size_t th_caffe_raw_datum(uint8_t *out, int c, int h, int w, const uint8_t *data,
                                        int label) {
  size_t n = 0, len = (size_t)c * h * w;
  out[n++] = 0x08;
  n += th_varint(out + n, (uint64_t)c);
  out[n++] = 0x10;
  n += th_varint(out + n, (uint64_t)h);
  out[n++] = 0x18;
  n += th_varint(out + n, (uint64_t)w);
  out[n++] = 0x22;
  n += th_varint(out + n, len);
  memcpy(out + n, data, len);
  n += len;
  out[n++] = 0x28;
  n += th_varint(out + n, (uint64_t)(int64_t)label);
  return n;
}

static inline int th_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

#endif
