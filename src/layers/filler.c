#include "layers/filler.h"

#include <math.h>
#include <string.h>

#include "core/strutil.h"

static const char *const k_fillers[] = {"constant", "uniform", "gaussian", "positive_unitball",
                                        "xavier", "msra", "bilinear"};

/* Caffe's fan-in and fan-out of a weight blob. */
static void fans(const ct_tensor *t, double *fan_in, double *fan_out) {
  double count = (double)t->count;
  *fan_in = t->ndim > 0 && t->shape[0] ? count / t->shape[0] : count;
  *fan_out = t->ndim > 1 && t->shape[1] ? count / t->shape[1] : count;
}

static double variance_n(const Caffe__FillerParameter *fp, const ct_tensor *t) {
  double fan_in, fan_out;
  fans(t, &fan_in, &fan_out);
  switch (fp->variance_norm) {
    case CAFFE__FILLER_PARAMETER__VARIANCE_NORM__FAN_OUT: return fan_out;
    case CAFFE__FILLER_PARAMETER__VARIANCE_NORM__AVERAGE: return (fan_in + fan_out) / 2.0;
    default: return fan_in;
  }
}

ct_status ct_filler_fill(const Caffe__FillerParameter *fp, ct_tensor *t, ct_rng *rng,
                         ct_error *err) {
  static const Caffe__FillerParameter k_default = CAFFE__FILLER_PARAMETER__INIT;
  if (!fp) fp = &k_default;
  CT_ASSERT(t->device == CT_DEVICE_CPU);
  const char *type = fp->type ? fp->type : "constant";
  float *x = t->data;
  size_t n = t->count;
  if (strcmp(type, "constant") == 0) {
    for (size_t i = 0; i < n; i++) x[i] = fp->value;
  } else if (strcmp(type, "uniform") == 0) {
    ct_rng_fill_uniform(rng, x, n, fp->min, fp->max);
  } else if (strcmp(type, "gaussian") == 0) {
    ct_rng_fill_gaussian(rng, x, n, fp->mean, fp->std);
    if (fp->sparse >= 0) {
      if (t->ndim < 1 || t->shape[0] == 0)
        return ct_error_set(err, CT_ERR_INVALID, "sparse gaussian filler needs a blob with a first axis");
      double p = (double)fp->sparse / t->shape[0];
      for (size_t i = 0; i < n; i++)
        if (!(ct_rng_uniform01(rng) < p)) x[i] = 0.0f;
    }
  } else if (strcmp(type, "positive_unitball") == 0) {
    ct_rng_fill_uniform(rng, x, n, 0.0f, 1.0f);
    size_t num = t->ndim > 0 ? (size_t)t->shape[0] : 1;
    size_t dim = num ? n / num : 0;
    for (size_t i = 0; i < num; i++) {
      double s = 0;
      for (size_t j = 0; j < dim; j++) s += x[i * dim + j];
      for (size_t j = 0; j < dim; j++) x[i * dim + j] = (float)(x[i * dim + j] / s);
    }
  } else if (strcmp(type, "xavier") == 0) {
    double scale = sqrt(3.0 / variance_n(fp, t));
    ct_rng_fill_uniform(rng, x, n, (float)-scale, (float)scale);
  } else if (strcmp(type, "msra") == 0) {
    double stddev = sqrt(2.0 / variance_n(fp, t));
    ct_rng_fill_gaussian(rng, x, n, 0.0f, (float)stddev);
  } else if (strcmp(type, "bilinear") == 0) {
    if (t->ndim != 4 || t->shape[2] != t->shape[3])
      return ct_error_set(err, CT_ERR_INVALID,
                          "bilinear filler needs a 4-axis blob with height == width");
    int k = t->shape[3];
    double f = ceil(k / 2.0);
    double c = (2 * f - 1 - fmod(f, 2.0)) / (2 * f);
    for (size_t i = 0; i < n; i++) {
      double xx = (double)(i % (size_t)k), yy = (double)((i / (size_t)k) % (size_t)k);
      x[i] = (float)((1 - fabs(xx / f - c)) * (1 - fabs(yy / f - c)));
    }
  } else {
    const char *near = ct_suggest(type, k_fillers, sizeof k_fillers / sizeof *k_fillers);
    if (near)
      return ct_error_set(err, CT_ERR_INVALID, "unknown filler type '%s' (did you mean '%s'?)", type, near);
    return ct_error_set(err, CT_ERR_INVALID,
                        "unknown filler type '%s' (known: constant, uniform, gaussian, "
                        "positive_unitball, xavier, msra, bilinear)", type);
  }
  return CT_OK;
}
