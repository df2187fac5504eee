#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

ct_gradcheck_opts ct_gradcheck_defaults(void) {
  ct_gradcheck_opts o;
  memset(&o, 0, sizeof o);
  o.step = 1e-2f;
  o.threshold = 1e-3f;
  o.kink_range = -1.0f;
  o.seed = 1701;
  o.check_bottom = -1;
  o.check_params = true;
  return o;
}

/* Where a forward's randomness starts: the context RNG and draw count. */
typedef struct {
  ct_rng rng;
  uint64_t draws;
} random_state;

static void restore_random(ct_layer *l, const random_state *r) {
  l->ctx->rng = r->rng;
  ct_context_set_draws(l->ctx, r->draws);
}

/* L = sum w . top over every top, computed on the host in double.  Every
 * forward starts from the same randomness (Dropout draws the same mask). */
static double objective(ct_layer *l, ct_tensor **bottom, ct_tensor **top, float **w,
                        const random_state *rng0) {
  ct_error err;
  restore_random(l, rng0);
  ct_status s = ct_layer_forward(l, bottom, top, NULL, &err);
  if (s != CT_OK) {
    fprintf(stderr, "gradcheck: forward failed: %s\n", err.msg);
    abort();
  }
  double L = 0;
  for (int t = 0; t < l->ntop; t++) {
    float *host = malloc(top[t]->count * sizeof(float));
    ct_tensor_download(top[t], host);
    for (size_t i = 0; i < top[t]->count; i++) L += (double)w[t][i] * host[i];
    free(host);
  }
  return L;
}

typedef struct {
  ct_tensor *t;
  const char *what;
  int index;
} checked_input;

bool ct_gradcheck(ct_layer *l, ct_tensor **bottom, ct_tensor **top, const ct_gradcheck_opts *o,
                  char *msg, size_t msg_len, long *nchecked) {
  ct_rng wr;
  ct_rng_seed(&wr, o->seed);
  const random_state rng0 = {l->ctx->rng, ct_context_draws(l->ctx)};
  *nchecked = 0;
  msg[0] = 0;

  /* Top weights: random for plain outputs; for a loss top the loss weight
   * times a random factor keeps the loss-layer convention (diff = weight). */
  float *w[16] = {0};
  CT_ASSERT(l->ntop <= 16);
  for (int t = 0; t < l->ntop; t++) {
    w[t] = malloc(top[t]->count * sizeof(float));
    ct_rng_fill_uniform(&wr, w[t], top[t]->count, -1.0f, 1.0f);
    ct_tensor_need_diff(top[t]);
  }

  /* Analytic gradients. */
  checked_input in[64];
  int nin = 0;
  for (int b = 0; b < l->nbottom; b++) {
    if (o->check_bottom >= 0 && b != o->check_bottom) continue;
    if (b < 8 && o->skip_bottom[b]) continue;
    ct_tensor_need_diff(bottom[b]);
    in[nin++] = (checked_input){bottom[b], "bottom", b};
  }
  if (o->check_params)
    for (int p = 0; p < l->nparams; p++)
      if (l->param_propagate_down[p]) in[nin++] = (checked_input){l->params[p], "param", p};

  objective(l, bottom, top, w, &rng0);
  for (int t = 0; t < l->ntop; t++) ct_tensor_upload_diff(top[t], w[t]);
  for (int p = 0; p < l->nparams; p++) ct_tensor_zero_diff(l->params[p]);
  bool prop[16];
  for (int b = 0; b < l->nbottom && b < 16; b++) {
    prop[b] = false;
    for (int i = 0; i < nin; i++)
      if (in[i].t == bottom[b]) prop[b] = true;
  }
  restore_random(l, &rng0);
  ct_layer_backward(l, top, prop, bottom);

  float **analytic = calloc((size_t)nin, sizeof(float *));
  for (int i = 0; i < nin; i++) {
    analytic[i] = malloc(in[i].t->count * sizeof(float));
    ct_tensor_download_diff(in[i].t, analytic[i]);
  }

  bool ok = true;
  for (int i = 0; i < nin && ok; i++) {
    ct_tensor *t = in[i].t;
    float *x = malloc(t->count * sizeof(float));
    ct_tensor_download(t, x);
    for (size_t k = 0; k < t->count && ok; k++) {
      float x0 = x[k];
      if (o->kink_range >= 0 && fabsf(x0 - o->kink) <= o->kink_range) continue;
      x[k] = x0 + o->step;
      ct_tensor_upload(t, x);
      double lp = objective(l, bottom, top, w, &rng0);
      x[k] = x0 - o->step;
      ct_tensor_upload(t, x);
      double lm = objective(l, bottom, top, w, &rng0);
      x[k] = x0;
      ct_tensor_upload(t, x);
      double numeric = (lp - lm) / (2.0 * o->step);
      double a = analytic[i][k];
      double scale = fmax(fmax(fabs(a), fabs(numeric)), 1.0);
      (*nchecked)++;
      if (!(fabs(a - numeric) <= o->threshold * scale)) {
        snprintf(msg, msg_len,
                 "layer %s (%s): %s %d index %zu (value %g): analytic %.6g, numeric %.6g", l->name,
                 l->ops->type, in[i].what, in[i].index, k, (double)x0, a, numeric);
        ok = false;
      }
    }
    free(x);
  }
  for (int i = 0; i < nin; i++) free(analytic[i]);
  free(analytic);
  for (int t = 0; t < l->ntop; t++) free(w[t]);
  restore_random(l, &rng0);
  return ok;
}
