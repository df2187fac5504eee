/* Data pipeline throughput: writes N JPEG-encoded 256x256 colour records to
 * an LMDB, then runs the Data layer (decode, random 224 crop, mirror, TRAIN)
 * for each thread count and prints images per second.
 *
 *   data_throughput [--records N] [--batch B] [--batches K] [--threads 1,2,4]
 *                   [--dir FOLDER] [--quality Q]
 *
 * The LMDB is made once under FOLDER (default: a folder in /tmp) and reused
 * when it already holds N records. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/context.h"
#include "data/datum.h"
#include "data/db.h"
#include "data/image.h"
#include "layers/layer.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int fail(const ct_error *err) {
  fprintf(stderr, "data_throughput: %s\n", err->msg);
  return 1;
}

/* A photo-like pattern: smooth gradients plus noise, different per record. */
static void make_image(ct_image *img, int k, unsigned *seed) {
  ct_image_alloc(img, 256, 256, 3);
  for (int y = 0; y < 256; y++)
    for (int x = 0; x < 256; x++)
      for (int c = 0; c < 3; c++) {
        double v = 128 + 60 * sin(0.031 * x + 0.7 * k + c) + 40 * cos(0.023 * y * (c + 1) + k);
        v += (rand_r(seed) % 32) - 16;
        img->data[((size_t)y * 256 + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
      }
}

static int make_db(const char *path, int n, int quality) {
  ct_error err;
  ct_db *db;
  if (ct_db_open(&db, path, CT_DB_LMDB, CT_DB_READ, &err) == CT_OK) {
    size_t have = ct_db_count(db);
    ct_db_close(db);
    if (have == (size_t)n) return 0;
    fprintf(stderr, "data_throughput: %s holds %zu records, not %d: remove it first\n", path, have, n);
    return 1;
  }
  if (ct_db_open(&db, path, CT_DB_LMDB, CT_DB_NEW, &err) != CT_OK) return fail(&err);
  unsigned seed = 1;
  size_t bytes = 0;
  for (int k = 0; k < n; k++) {
    ct_image img;
    make_image(&img, k, &seed);
    uint8_t *buf;
    size_t len;
    ct_status s = ct_datum_encode_image(&img, CT_IMAGE_JPEG, quality, k % 1000, &buf, &len, &err);
    ct_image_free(&img);
    if (s != CT_OK) return fail(&err);
    char key[16];
    snprintf(key, sizeof key, "%08d", k);
    s = ct_db_put(db, key, 8, buf, len, &err);
    bytes += len;
    free(buf);
    if (s != CT_OK) return fail(&err);
  }
  if (ct_db_commit(db, &err) != CT_OK) return fail(&err);
  ct_db_close(db);
  printf("wrote %d JPEG records (%.1f KiB each) to %s\n", n, bytes / 1024.0 / n, path);
  return 0;
}

/* Images per second of the Data layer with `threads` workers. */
static int measure(const char *path, int threads, int batch, int batches, double *ips) {
  char env[16];
  snprintf(env, sizeof env, "%d", threads);
  setenv("CORTADO_DATA_THREADS", env, 1);
  ct_context ctx;
  ct_error err;
  if (ct_context_init(&ctx, CT_DEVICE_CPU, 1, &err) != CT_OK) return fail(&err);
  Caffe__LayerParameter lp = CAFFE__LAYER_PARAMETER__INIT;
  Caffe__DataParameter dp = CAFFE__DATA_PARAMETER__INIT;
  Caffe__TransformationParameter tp = CAFFE__TRANSFORMATION_PARAMETER__INIT;
  char *tops[2] = {"data", "label"};
  lp.name = "data";
  lp.type = "Data";
  lp.top = tops;
  lp.n_top = 2;
  lp.data_param = &dp;
  lp.transform_param = &tp;
  dp.source = (char *)path;
  dp.has_batch_size = 1;
  dp.batch_size = (uint32_t)batch;
  dp.has_backend = 1;
  dp.backend = CAFFE__DATA_PARAMETER__DB__LMDB;
  tp.crop_size = 224;
  tp.mirror = 1;
  ct_tensor *top[2] = {ct_tensor_new(CT_DEVICE_CPU, "data"), ct_tensor_new(CT_DEVICE_CPU, "label")};
  ct_layer *l;
  int rc = 0;
  if (ct_layer_create(&lp, CT_PHASE_TRAIN, &ctx, 0, 2, &l, &err) != CT_OK ||
      ct_layer_setup(l, NULL, top, &err) != CT_OK) {
    rc = fail(&err);
  } else {
    for (int i = 0; i < 2 && rc == 0; i++) /* warm up: threads started, caches filled */
      if (ct_layer_forward(l, NULL, top, NULL, &err) != CT_OK) rc = fail(&err);
    double t0 = now_s();
    for (int i = 0; i < batches && rc == 0; i++)
      if (ct_layer_forward(l, NULL, top, NULL, &err) != CT_OK) rc = fail(&err);
    *ips = (double)batches * batch / (now_s() - t0);
  }
  ct_layer_free(l);
  ct_tensor_free(top[0]);
  ct_tensor_free(top[1]);
  ct_context_free(&ctx);
  return rc;
}

int main(int argc, char **argv) {
  int records = 512, batch = 32, batches = 24, quality = 90;
  const char *threads = "1,2", *dir = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "data_throughput: %s needs a value\n", a);
      return 2;
    }
    if (!strcmp(a, "--records")) records = atoi(v);
    else if (!strcmp(a, "--batch")) batch = atoi(v);
    else if (!strcmp(a, "--batches")) batches = atoi(v);
    else if (!strcmp(a, "--threads")) threads = v;
    else if (!strcmp(a, "--dir")) dir = v;
    else if (!strcmp(a, "--quality")) quality = atoi(v);
    else {
      fprintf(stderr, "data_throughput: unknown option %s\n", a);
      return 2;
    }
    i++;
  }
  if (records <= 0 || batch <= 0 || batches <= 0) {
    fprintf(stderr, "data_throughput: --records, --batch and --batches must be positive\n");
    return 2;
  }
  char folder[4096], path[4200];
  snprintf(folder, sizeof folder, "%s", dir ? dir : "/tmp/cortado_data_throughput");
  mkdir(folder, 0775);
  snprintf(path, sizeof path, "%s/jpeg256_%d_q%d_lmdb", folder, records, quality);
  if (make_db(path, records, quality)) return 1;
  printf("Data layer: JPEG 256x256 -> crop 224 + mirror (TRAIN), batch %d, %d timed batches\n", batch,
         batches);
  printf("%8s  %10s  %10s  %8s\n", "threads", "images/s", "ms/batch", "speedup");
  double base = 0;
  for (const char *t = threads; *t;) {
    int n = atoi(t);
    if (n <= 0) {
      fprintf(stderr, "data_throughput: bad thread count in '%s'\n", threads);
      return 2;
    }
    double ips = 0;
    if (measure(path, n, batch, batches, &ips)) return 1;
    if (base == 0) base = ips;
    printf("%8d  %10.1f  %10.2f  %7.2fx\n", n, ips, 1000.0 * batch / ips, ips / base);
    fflush(stdout);
    t = strchr(t, ',');
    if (!t) break;
    t++;
  }
  return 0;
}
