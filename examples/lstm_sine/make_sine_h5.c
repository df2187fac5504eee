/* make_sine_h5: the data of the LSTM sine-wave example (run_example.sh).
 *
 *   make_sine_h5 OUT.h5 ROWS STREAMS SEED
 *
 * Writes ROWS time steps of STREAMS independent streams as the datasets
 *   data   (ROWS, STREAMS, 1)  y_t
 *   cont   (ROWS, STREAMS)     0 at the first step of a sequence, else 1
 *   target (ROWS, STREAMS, 1)  y_{t+1}, the next value of the same sequence
 * which an HDF5Data layer reads as (T, N, ...) batches of T consecutive
 * rows, the layout Caffe's recurrent layers take.  Each stream is a run of
 * sequences of 40 to 120 steps; a sequence is y_t = 0.8 sin(2 pi t / P + phase)
 * with its own period P in [8, 24] steps and phase.  Row 0 starts a
 * sequence in every stream, so the file can be read round and round.
 *
 * Predicting y_{t+1} needs the sequence's period and direction, which only
 * its past tells: the net must remember.  The program prints the
 * EuclideanLoss of the naive guess y_{t+1} = y_t as a yardstick. */
#include <hdf5.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* splitmix64: uniform in [0, 1) */
static double uniform(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static int write_dataset(hid_t file, const char *name, int rank, const hsize_t *dims,
                         const float *values) {
  hid_t space = H5Screate_simple(rank, dims, NULL);
  hid_t ds = H5Dcreate2(file, name, H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  int ok = ds >= 0 && H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0;
  if (ds >= 0) H5Dclose(ds);
  H5Sclose(space);
  return ok;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: make_sine_h5 OUT.h5 ROWS STREAMS SEED\n");
    return 2;
  }
  const long rows = strtol(argv[2], NULL, 10), streams = strtol(argv[3], NULL, 10);
  uint64_t seed = strtoull(argv[4], NULL, 10);
  if (rows < 2 || rows > 10000000 || streams < 1 || streams > 100000) {
    fprintf(stderr, "make_sine_h5: ROWS must be 2 to 10^7 and STREAMS 1 to 10^5\n");
    return 2;
  }
  const size_t n = (size_t)rows * (size_t)streams;
  float *data = malloc(n * sizeof *data), *cont = malloc(n * sizeof *cont);
  float *target = malloc(n * sizeof *target);
  if (!data || !cont || !target) {
    fprintf(stderr, "make_sine_h5: out of memory\n");
    return 1;
  }
  const double two_pi = 6.283185307179586;
  for (long s = 0; s < streams; s++) {
    long left = 0, t = 0;
    double period = 1, phase = 0;
    for (long r = 0; r < rows; r++) {
      const bool start = left == 0;
      if (start) {
        left = 40 + (long)(uniform(&seed) * 81);
        period = 8 + uniform(&seed) * 16;
        phase = uniform(&seed) * two_pi;
        t = 0;
      }
      const size_t i = (size_t)r * (size_t)streams + (size_t)s;
      data[i] = (float)(0.8 * sin(two_pi * (double)t / period + phase));
      target[i] = (float)(0.8 * sin(two_pi * (double)(t + 1) / period + phase));
      cont[i] = start ? 0.0f : 1.0f;
      t++;
      left--;
    }
  }
  double naive = 0;
  for (size_t i = 0; i < n; i++) naive += (double)(target[i] - data[i]) * (target[i] - data[i]);
  hid_t file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) {
    fprintf(stderr, "make_sine_h5: %s: cannot create the file\n", argv[1]);
    return 1;
  }
  const hsize_t d3[3] = {(hsize_t)rows, (hsize_t)streams, 1}, d2[2] = {(hsize_t)rows, (hsize_t)streams};
  const int ok = write_dataset(file, "data", 3, d3, data) && write_dataset(file, "cont", 2, d2, cont) &&
                 write_dataset(file, "target", 3, d3, target);
  if (H5Fclose(file) < 0 || !ok) {
    fprintf(stderr, "make_sine_h5: %s: writing failed\n", argv[1]);
    return 1;
  }
  /* EuclideanLoss of (T, N, 1) batches: sum of squares / (2 T), i.e. per row */
  printf("%s: %ld steps of %ld streams; naive loss (y_{t+1} = y_t): %.4f\n", argv[1], rows,
         streams, naive / (2.0 * (double)rows));
  free(data);
  free(cont);
  free(target);
  return 0;
}
