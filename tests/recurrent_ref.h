/* Naive double-precision references of Caffe's LSTM and RNN layers for the
 * recurrent tests, written from the equations (Caffe's lstm_layer.cpp,
 * rnn_layer.cpp, lstm_unit_layer.cpp) with plain loops and textbook
 * backpropagation through time, independently of src/layers.
 *
 * Shapes (T steps, N streams, I inputs, S static inputs, H = num_output,
 * G = 4H for LSTM and H for RNN), all arrays row-major:
 *   x (T, N, I), cont (T, N), xs (N, S), h0 (N, H), c0 (N, H)
 *   Wx (G, I), b (G), Ws (G, S), Wh (G, H)     (LSTM gates in order i, f, o, g)
 *   RNN only: Wo (H, H), bo (H)
 * Forward gives y (T, N, H) (LSTM: h; RNN: o) and the final hT, cT (N, H).
 * Backward takes dy (T, N, H), dhT, dcT (NULL: 0) and accumulates into
 * zeroed gradient arrays of the same shapes as the inputs. */
#ifndef CT_TESTS_RECURRENT_REF_H
#define CT_TESTS_RECURRENT_REF_H

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct rec_ref {
  bool lstm;
  int T, N, I, S, H;
  const double *x, *cont, *xs, *h0, *c0;
  const double *Wx, *b, *Ws, *Wh, *Wo, *bo;
  /* forward results */
  double *y, *hT, *cT;
  /* backward inputs */
  const double *dy, *dhT, *dcT;
  /* gradients */
  double *dx, *dxs, *dh0, *dc0, *dWx, *db, *dWs, *dWh, *dWo, *dbo;
  /* saved by forward: a (T, N, G) pre-activations, h and c (T+1, N, H) */
  double *a, *hs, *cs;
} rec_ref;

static inline double rr_sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

static inline int rr_gates(const rec_ref *r) { return r->lstm ? 4 * r->H : r->H; }

/* Allocates the forward outputs and saved values, zeroed. */
static inline void rr_alloc(rec_ref *r) {
  const int T = r->T, N = r->N, H = r->H, G = rr_gates(r);
  r->y = calloc((size_t)T * N * H, sizeof(double));
  r->hT = calloc((size_t)N * H, sizeof(double));
  r->cT = calloc((size_t)N * H, sizeof(double));
  r->a = calloc((size_t)T * N * G, sizeof(double));
  r->hs = calloc((size_t)(T + 1) * N * H, sizeof(double));
  r->cs = calloc((size_t)(T + 1) * N * H, sizeof(double));
  r->dx = calloc((size_t)T * N * r->I, sizeof(double));
  r->dxs = calloc((size_t)N * (r->S ? r->S : 1), sizeof(double));
  r->dh0 = calloc((size_t)N * H, sizeof(double));
  r->dc0 = calloc((size_t)N * H, sizeof(double));
  r->dWx = calloc((size_t)G * r->I, sizeof(double));
  r->db = calloc((size_t)G, sizeof(double));
  r->dWs = calloc((size_t)G * (r->S ? r->S : 1), sizeof(double));
  r->dWh = calloc((size_t)G * H, sizeof(double));
  r->dWo = calloc((size_t)H * H, sizeof(double));
  r->dbo = calloc((size_t)H, sizeof(double));
}

static inline void rr_free(rec_ref *r) {
  double *p[] = {r->y, r->hT, r->cT, r->a, r->hs, r->cs, r->dx, r->dxs, r->dh0,
                 r->dc0, r->dWx, r->db, r->dWs, r->dWh, r->dWo, r->dbo};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
}

static inline void rr_forward(rec_ref *r) {
  const int T = r->T, N = r->N, I = r->I, S = r->S, H = r->H, G = rr_gates(r);
  for (int n = 0; n < N; n++)
    for (int k = 0; k < H; k++) {
      r->hs[n * H + k] = r->h0 ? r->h0[n * H + k] : 0.0;
      r->cs[n * H + k] = r->c0 ? r->c0[n * H + k] : 0.0;
    }
  for (int t = 0; t < T; t++)
    for (int n = 0; n < N; n++) {
      const double cont = r->cont[t * N + n];
      const double *hp = r->hs + ((size_t)t * N + n) * H, *cp = r->cs + ((size_t)t * N + n) * H;
      double *a = r->a + ((size_t)t * N + n) * G;
      for (int j = 0; j < G; j++) {
        double v = r->b[j];
        for (int i = 0; i < I; i++) v += r->Wx[j * I + i] * r->x[((size_t)t * N + n) * I + i];
        for (int s = 0; s < S; s++) v += r->Ws[j * S + s] * r->xs[n * S + s];
        for (int k = 0; k < H; k++) v += r->Wh[j * H + k] * cont * hp[k];
        a[j] = v;
      }
      double *hn = r->hs + ((size_t)(t + 1) * N + n) * H, *cn = r->cs + ((size_t)(t + 1) * N + n) * H;
      double *y = r->y + ((size_t)t * N + n) * H;
      for (int k = 0; k < H; k++) {
        if (r->lstm) {
          const double ig = rr_sigmoid(a[k]), fg = rr_sigmoid(a[H + k]);
          const double og = rr_sigmoid(a[2 * H + k]), gg = tanh(a[3 * H + k]);
          cn[k] = cont * fg * cp[k] + ig * gg;
          hn[k] = og * tanh(cn[k]);
          y[k] = hn[k];
        } else {
          hn[k] = tanh(a[k]);
        }
      }
      if (!r->lstm)
        for (int k = 0; k < H; k++) {
          double v = r->bo[k];
          for (int m = 0; m < H; m++) v += r->Wo[k * H + m] * hn[m];
          y[k] = tanh(v);
        }
    }
  memcpy(r->hT, r->hs + (size_t)T * N * H, (size_t)N * H * sizeof(double));
  memcpy(r->cT, r->cs + (size_t)T * N * H, (size_t)N * H * sizeof(double));
}

static inline void rr_backward(rec_ref *r) {
  const int T = r->T, N = r->N, I = r->I, S = r->S, H = r->H, G = rr_gates(r);
  double *dh = calloc((size_t)N * H, sizeof(double)), *dc = calloc((size_t)N * H, sizeof(double));
  double *da = calloc((size_t)G, sizeof(double)), *dhn = calloc((size_t)H, sizeof(double));
  for (int i = 0; i < N * H; i++) {
    dh[i] = r->dhT ? r->dhT[i] : 0.0;
    dc[i] = r->dcT ? r->dcT[i] : 0.0;
  }
  for (int t = T - 1; t >= 0; t--)
    for (int n = 0; n < N; n++) {
      const double cont = r->cont[t * N + n];
      const double *a = r->a + ((size_t)t * N + n) * G;
      const double *hp = r->hs + ((size_t)t * N + n) * H, *cp = r->cs + ((size_t)t * N + n) * H;
      const double *hn = r->hs + ((size_t)(t + 1) * N + n) * H;
      const double *cn = r->cs + ((size_t)(t + 1) * N + n) * H;
      const double *dy = r->dy + ((size_t)t * N + n) * H;
      double *dhv = dh + (size_t)n * H, *dcv = dc + (size_t)n * H;
      /* the gradient reaching h_{t+1}: from the top and from the future */
      for (int k = 0; k < H; k++) dhn[k] = dhv[k];
      if (r->lstm) {
        for (int k = 0; k < H; k++) dhn[k] += dy[k];
      } else {
        /* o = tanh(Wo h + bo) */
        const double *y = r->y + ((size_t)t * N + n) * H;
        for (int k = 0; k < H; k++) {
          const double dv = dy[k] * (1.0 - y[k] * y[k]);
          r->dbo[k] += dv;
          for (int m = 0; m < H; m++) {
            r->dWo[k * H + m] += dv * hn[m];
            dhn[m] += dv * r->Wo[k * H + m];
          }
        }
      }
      for (int k = 0; k < H; k++) {
        if (r->lstm) {
          const double ig = rr_sigmoid(a[k]), fg = rr_sigmoid(a[H + k]);
          const double og = rr_sigmoid(a[2 * H + k]), gg = tanh(a[3 * H + k]);
          const double tc = tanh(cn[k]);
          const double dcell = dcv[k] + dhn[k] * og * (1.0 - tc * tc);
          da[k] = dcell * gg * ig * (1.0 - ig);
          da[H + k] = dcell * cont * cp[k] * fg * (1.0 - fg);
          da[2 * H + k] = dhn[k] * tc * og * (1.0 - og);
          da[3 * H + k] = dcell * ig * (1.0 - gg * gg);
          dcv[k] = dcell * cont * fg; /* now the gradient of c_t */
        } else {
          da[k] = dhn[k] * (1.0 - hn[k] * hn[k]);
        }
      }
      for (int k = 0; k < H; k++) dhv[k] = 0.0; /* now the gradient of h_t */
      for (int j = 0; j < G; j++) {
        r->db[j] += da[j];
        for (int i = 0; i < I; i++) {
          const size_t xi = ((size_t)t * N + n) * I + i;
          r->dWx[j * I + i] += da[j] * r->x[xi];
          r->dx[xi] += da[j] * r->Wx[j * I + i];
        }
        for (int s = 0; s < S; s++) {
          r->dWs[j * S + s] += da[j] * r->xs[n * S + s];
          r->dxs[n * S + s] += da[j] * r->Ws[j * S + s];
        }
        for (int k = 0; k < H; k++) {
          r->dWh[j * H + k] += da[j] * cont * hp[k];
          dhv[k] += da[j] * r->Wh[j * H + k] * cont;
        }
      }
    }
  memcpy(r->dh0, dh, (size_t)N * H * sizeof(double));
  memcpy(r->dc0, dc, (size_t)N * H * sizeof(double));
  free(dh);
  free(dc);
  free(da);
  free(dhn);
}

#endif
