/* The parameter server's messages (ps.h), shared by its worker and server
 * sides; not a public API. */
#ifndef CT_PARALLEL_PS_INTERNAL_H
#define CT_PARALLEL_PS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
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
 * wishes relayed to it; the fourth the workers that have died. */
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

/* ------------------------------------------------ liveness (ps_link.c)
 * Every worker keeps a TCP connection to every server, watched by a thread
 * of each process: a peer whose connection closes without its goodbye has
 * died (killed, crashed, its machine gone); a slow or stopped peer keeps
 * its connection.  The messages themselves still go through ct_comm. */

/* The tag of the address message a server sends each worker. */
enum { CT_PS_TAG_LINK = 32003 };

/* A peer's state. */
enum { PS_PEER_ALIVE = 0, PS_PEER_LEFT = 1 /* ended normally */, PS_PEER_GONE = 2 /* died */ };

typedef struct ps_link ps_link;

/* Server side: listens on a port of its own, sends its host and port to
 * each of the `workers` ranks 0 .. workers - 1 through comm, and waits up
 * to timeout_s for all of them to connect.  Errors: CT_ERR_IO (sockets),
 * CT_ERR_COMM (the communicator's, or workers that never connected). */
ct_status ps_link_serve(ps_link **out, ct_comm *comm, int workers, double timeout_s, ct_error *err);
/* Worker side: connects to each server (ranks workers .. workers +
 * servers - 1) at the address it sent.  Errors: CT_ERR_COMM. */
ct_status ps_link_connect(ps_link **out, ct_comm *comm, int workers, int servers, ct_error *err);
/* PS_PEER_* of peer i (a worker for a server, a server for a worker). */
int ps_link_state(const ps_link *l, int peer);
/* The flag the link raises when a peer is gone (for ct_comm's cancel: it
 * ends a wait), and its lowering. */
const int *ps_link_wake(const ps_link *l);
/* A word that becomes 1 when peer i is gone (died), for ct_comm's cancel:
 * it ends a wait on that peer's message alone. */
const int *ps_link_dead(const ps_link *l, int peer);
void ps_link_rearm(ps_link *l);
/* Waits up to 2 s for word (a link's ps_link_wake or ps_link_dead) to be
 * raised; true when it is.  For a transport that fails before the link has
 * seen the death behind it (Gloo fails a receive as its peer's connection
 * drops): the failure is then named after the dead peer. */
bool ps_link_await(const int *word);
/* Stops watching and closes every connection, saying goodbye first when
 * `bye` (this process ends normally).  NULL: nothing. */
void ps_link_close(ps_link *l, bool bye);

#endif
