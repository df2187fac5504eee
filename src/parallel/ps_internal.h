/* The parameter server's messages (ps.h), shared by its worker and server
 * sides; not a public API. */
#ifndef CT_PARALLEL_PS_INTERNAL_H
#define CT_PARALLEL_PS_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "parallel/ps.h"

/* Requests, the first integer of a worker's header. */
enum {
  PS_INIT = 1, /* {clock base, history slots}: weights, then each history slot */
  PS_PUSH,     /* {clock}: the gradient of that clock */
  PS_PULL,     /* {clock wanted, last, wish}: no payload; answered with the weights */
  PS_BLOCK,    /* {clock at the block's end, last, wish}: the worker's weights; answered with the
                  filtered */
  PS_FETCH,    /* {clock}: answered with the weights and (not bmuf) the history slots */
  PS_DONE      /* {clock, stopped early} */
};

/* The first integer of a reply's header; the third is, for the root, the
 * wishes relayed to it. */
enum { PS_REPLY_OK = 0, PS_REPLY_STOP = 1 };

/* A message: CT_PS_HEADER integers stored bit for bit in the first floats,
 * then the payload. */
static inline void ps_header_put(float *msg, int a, int b, int c, int d) {
  const int32_t h[CT_PS_HEADER] = {a, b, c, d};
  memcpy(msg, h, sizeof h);
}

static inline void ps_header_get(const float *msg, int32_t h[CT_PS_HEADER]) {
  memcpy(h, msg, CT_PS_HEADER * sizeof *h);
}

#endif
