/* Liveness links of the parameter server (ps_internal.h): one TCP
 * connection between every worker and every server, watched by a thread.
 * The kernel closes a process's sockets when it dies, however it dies
 * (SIGKILL included), so the peer learns of the death at once and on any
 * transport, while a live peer that is merely slow (stopped, swapping, far
 * behind) keeps its connection and is never mistaken for a dead one.  A
 * peer that ends normally says so first (one byte) and then closes. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/mem.h"
#include "parallel/ps_internal.h"

/* The byte a peer sends before it closes its end normally. */
#define PS_LINK_BYE 'B'
/* How long the link thread sleeps in poll between looks at its stop flag. */
#define PS_LINK_POLL_MS 100
/* Host names in the address message. */
#define PS_LINK_HOST 256

struct ps_link {
  int npeers;
  int *fd;         /* (npeers) the connection to each peer; -1 once closed */
  int *state;      /* (npeers) atomic: PS_PEER_* */
  int *dead;       /* (npeers) atomic: 1 once the peer is PS_PEER_GONE (a cancel word) */
  int wake;        /* atomic: raised when a peer is gone */
  int stop;        /* atomic: the thread ends */
  bool running;
  pthread_t thread;
};

/* Reads what peer i sent: a bye, or the end of a connection without one. */
static void look_at(ps_link *l, int i) {
  char b[16];
  ssize_t got = recv(l->fd[i], b, sizeof b, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  const bool bye = got > 0 && memchr(b, PS_LINK_BYE, (size_t)got) != NULL;
  if (got > 0 && !bye) return;
  __atomic_store_n(&l->state[i], bye ? PS_PEER_LEFT : PS_PEER_GONE, __ATOMIC_RELEASE);
  if (!bye) __atomic_store_n(&l->dead[i], 1, __ATOMIC_RELEASE);
  if (!bye) __atomic_store_n(&l->wake, 1, __ATOMIC_RELEASE);
  close(l->fd[i]);
  l->fd[i] = -1;
}

static void *watch(void *arg) {
  ps_link *l = arg;
  struct pollfd *p = ct_xcalloc((size_t)l->npeers + 1, sizeof *p);
  while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
    int n = 0;
    for (int i = 0; i < l->npeers; i++)
      if (l->fd[i] >= 0) p[n++] = (struct pollfd){.fd = l->fd[i], .events = POLLIN};
    if (poll(p, (nfds_t)n, PS_LINK_POLL_MS) <= 0) continue;
    for (int i = 0, j = 0; i < l->npeers; i++) {
      if (l->fd[i] < 0) continue;
      if (p[j++].revents) look_at(l, i);
    }
  }
  free(p);
  return NULL;
}

static ps_link *link_new(int npeers) {
  ps_link *l = ct_xcalloc(1, sizeof *l);
  l->npeers = npeers;
  l->fd = ct_xcalloc((size_t)npeers, sizeof *l->fd);
  l->state = ct_xcalloc((size_t)npeers, sizeof *l->state);
  l->dead = ct_xcalloc((size_t)npeers, sizeof *l->dead);
  for (int i = 0; i < npeers; i++) l->fd[i] = -1;
  return l;
}

static ct_status link_start(ps_link *l, ct_error *err) {
  if (pthread_create(&l->thread, NULL, watch, l) != 0)
    return ct_error_set(err, CT_ERR_IO, "parameter server link: cannot start its thread");
  l->running = true;
  return CT_OK;
}

void ps_link_close(ps_link *l, bool bye) {
  if (!l) return;
  if (l->running) {
    __atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
    pthread_join(l->thread, NULL);
  }
  const char b = PS_LINK_BYE;
  for (int i = 0; i < l->npeers; i++) {
    if (l->fd[i] < 0) continue;
    if (bye) (void)!send(l->fd[i], &b, 1, MSG_NOSIGNAL);
    close(l->fd[i]);
  }
  free(l->fd);
  free(l->state);
  free(l->dead);
  free(l);
}

int ps_link_state(const ps_link *l, int peer) { return __atomic_load_n(&l->state[peer], __ATOMIC_ACQUIRE); }
const int *ps_link_wake(const ps_link *l) { return &l->wake; }
const int *ps_link_dead(const ps_link *l, int peer) { return &l->dead[peer]; }
void ps_link_rearm(ps_link *l) { __atomic_store_n(&l->wake, 0, __ATOMIC_RELEASE); }

bool ps_link_await(const int *word) {
  for (int k = 0; k < 200 && !__atomic_load_n(word, __ATOMIC_ACQUIRE); k++)
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  return __atomic_load_n(word, __ATOMIC_ACQUIRE) != 0;
}

/* An address message: {port, host name bytes}, in floats as every
 * ct_comm message is. */
#define PS_LINK_MSG (1 + PS_LINK_HOST / sizeof(float))

ct_status ps_link_serve(ps_link **out, ct_comm *comm, int workers, double timeout_s, ct_error *err) {
  *out = NULL;
  int lfd = socket(AF_INET6, SOCK_STREAM, 0);
  bool v6 = lfd >= 0;
  if (!v6) lfd = socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) return ct_error_set(err, CT_ERR_IO, "parameter server link: socket: %s", strerror(errno));
  struct sockaddr_storage a;
  memset(&a, 0, sizeof a);
  socklen_t alen;
  if (v6) {
    int off = 0;
    setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    ((struct sockaddr_in6 *)&a)->sin6_family = AF_INET6;
    ((struct sockaddr_in6 *)&a)->sin6_addr = in6addr_any;
    alen = sizeof(struct sockaddr_in6);
  } else {
    ((struct sockaddr_in *)&a)->sin_family = AF_INET;
    ((struct sockaddr_in *)&a)->sin_addr.s_addr = htonl(INADDR_ANY);
    alen = sizeof(struct sockaddr_in);
  }
  if (bind(lfd, (struct sockaddr *)&a, alen) != 0 || listen(lfd, workers) != 0 ||
      getsockname(lfd, (struct sockaddr *)&a, &alen) != 0) {
    ct_status st = ct_error_set(err, CT_ERR_IO, "parameter server link: listen: %s", strerror(errno));
    close(lfd);
    return st;
  }
  const int port = ntohs(v6 ? ((struct sockaddr_in6 *)&a)->sin6_port : ((struct sockaddr_in *)&a)->sin_port);
  float msg[PS_LINK_MSG];
  memset(msg, 0, sizeof msg);
  const int32_t p32 = port;
  memcpy(msg, &p32, sizeof p32);
  if (gethostname((char *)(msg + 1), PS_LINK_HOST - 1) != 0) snprintf((char *)(msg + 1), PS_LINK_HOST, "localhost");
  ps_link *l = link_new(workers);
  ct_status st = CT_OK;
  for (int w = 0; w < workers && st == CT_OK; w++)
    st = ct_comm_send(comm, msg, PS_LINK_MSG, w, CT_PS_TAG_LINK, NULL, err);
  /* every worker connects and names itself */
  const double deadline = ct_monotonic_s() + timeout_s;
  for (int got = 0; st == CT_OK && got < workers;) {
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    const int ms = (int)((deadline - ct_monotonic_s()) * 1000);
    if (ms <= 0 || poll(&p, 1, ms) <= 0) {
      st = ct_error_set(err, CT_ERR_COMM, "parameter server link: %d of %d workers connected within %g s",
                        got, workers, timeout_s);
      break;
    }
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) continue;
    int32_t who = -1;
    p = (struct pollfd){.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 10000) != 1 || recv(fd, &who, sizeof who, MSG_WAITALL) != (ssize_t)sizeof who || who < 0 ||
        who >= workers || l->fd[who] >= 0) {
      close(fd);
      continue;
    }
    l->fd[who] = fd;
    got++;
  }
  close(lfd);
  if (st == CT_OK) st = link_start(l, err);
  if (st != CT_OK) {
    ps_link_close(l, false);
    return st;
  }
  *out = l;
  return CT_OK;
}

/* A connection to host:port, or -1 with err set. */
static int dial(const char *host, int port, ct_error *err) {
  char own[PS_LINK_HOST] = "";
  /* a server on this host: the loopback, whatever the host's name resolves to */
  if (gethostname(own, sizeof own - 1) == 0 && strcmp(own, host) == 0) host = "localhost";
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0) {
    ct_error_set(err, CT_ERR_COMM, "parameter server link: cannot resolve %s: %s", host, gai_strerror(rc));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *r = res; r && fd < 0; r = r->ai_next) {
    fd = socket(r->ai_family, r->ai_socktype, r->ai_protocol);
    if (fd >= 0 && connect(fd, r->ai_addr, r->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) ct_error_set(err, CT_ERR_COMM, "parameter server link: cannot connect to %s:%d", host, port);
  return fd;
}

ct_status ps_link_connect(ps_link **out, ct_comm *comm, int workers, int servers, ct_error *err) {
  *out = NULL;
  ps_link *l = link_new(servers);
  const int32_t me = comm->rank;
  ct_status st = CT_OK;
  for (int k = 0; k < servers && st == CT_OK; k++) {
    float msg[PS_LINK_MSG];
    st = ct_comm_recv(comm, msg, PS_LINK_MSG, workers + k, CT_PS_TAG_LINK, NULL, err);
    if (st != CT_OK) break;
    int32_t port;
    memcpy(&port, msg, sizeof port);
    char *host = (char *)(msg + 1);
    host[PS_LINK_HOST - 1] = '\0';
    l->fd[k] = dial(host, port, err);
    if (l->fd[k] < 0) st = CT_ERR_COMM;
    else if (send(l->fd[k], &me, sizeof me, MSG_NOSIGNAL) != (ssize_t)sizeof me)
      st = ct_error_set(err, CT_ERR_COMM, "parameter server link: cannot greet server %d", k);
  }
  if (st == CT_OK) st = link_start(l, err);
  if (st != CT_OK) {
    ps_link_close(l, false);
    return st;
  }
  *out = l;
  return CT_OK;
}
