// gloo_shim.h over Gloo's C++ API.  Every entry point catches what Gloo
// and the stores throw and turns it into a ct_status.
#include "parallel/gloo_shim.h"

#include <algorithm>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include "parallel/gloo_stores.hh"

struct ct_gloo_store {
  std::unique_ptr<gloo::rendezvous::Store> base;
  std::unique_ptr<gloo::rendezvous::PrefixStore> run;  // base seen under "<run_id>/"
  std::string name;
};

// The receives that a cancel word may cut short, and the thread that
// watches their words (started by the first such receive).
struct cancel_watch {
  struct entry {
    gloo::transport::UnboundBuffer* buf;
    const int* cancel;
    bool aborted;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<entry> waiting;
  std::thread thread;
  bool stop = false;

  void run() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      cv.wait_for(lock, std::chrono::milliseconds(20));
      for (auto& e : waiting)
        if (!e.aborted && __atomic_load_n(e.cancel, __ATOMIC_ACQUIRE)) {
          e.buf->abortWaitRecv();
          e.aborted = true;
        }
    }
  }
  ~cancel_watch() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }
};

struct ct_gloo_context {
  std::shared_ptr<gloo::transport::Device> dev;
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  std::chrono::milliseconds op_timeout;
  std::string address;
  std::vector<int> others;  // every rank but this one (ct_gloo_recv_any)
  cancel_watch watch;
  // Where cancellable receives land (grown, kept for the next), and whether
  // a receive has it now (another one at the same time takes its own).
  std::unique_ptr<char[]> staging;
  size_t staging_cap = 0;
  std::atomic<bool> staging_busy{false};
  // Receives cut short by a cancel word stay posted in ctx: the next
  // message of their slot lands in them.  Each is kept (its buffer and
  // memory live until it completes or ctx is gone) and the next receive of
  // the same slot and length from the same ranks (or fewer: forgotten
  // peers) waits on it instead of posting another, so that no message
  // lands where nobody looks.
  struct aborted_recv {
    uint64_t slot;
    size_t len;
    std::vector<int> from;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
    std::unique_ptr<char[]> bytes;
  };
  std::vector<aborted_recv> aborted;
};

namespace {

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds((long long)(seconds * 1000.0 + 0.5));
}

// Gloo's messages start with "[/path/to/file.cc:123] ": keep what follows.
std::string clean(const char* what) {
  std::string s = what ? what : "unknown error";
  if (!s.empty() && s[0] == '[') {
    size_t end = s.find("] ");
    if (end != std::string::npos && s.find(':') < end) s.erase(0, end + 2);
  }
  return s;
}

// Runs fn, mapping exceptions to a status with "<what>: <message>".
template <typename Fn>
ct_status guarded(ct_error* err, ct_status io_code, const std::string& what, Fn fn) {
  try {
    fn();
    return CT_OK;
  } catch (const cortado::StoreError& e) {
    return ct_error_set(err, e.code, "%s%s%s", what.c_str(), what.empty() ? "" : ": ", e.what());
  } catch (const gloo::IoException& e) {
    return ct_error_set(err, io_code, "%s%s%s", what.c_str(), what.empty() ? "" : ": ",
                        clean(e.what()).c_str());
  } catch (const std::exception& e) {
    return ct_error_set(err, CT_ERR_COMM, "%s%s%s", what.c_str(), what.empty() ? "" : ": ",
                        clean(e.what()).c_str());
  } catch (...) {
    return ct_error_set(err, CT_ERR_COMM, "%s%san exception that is not a std::exception",
                        what.c_str(), what.empty() ? "" : ": ");
  }
}

// Gloo's TCP device runs a network thread of its own; an exception there
// (a peer that sends what this process does not expect) cannot reach any
// caller and would end the process in std::terminate with status 134 and
// the C++ runtime's words.  This handler says what happened instead and
// ends with status 1, as other fatal errors do.
[[noreturn]] void on_terminate() {
  std::string what = "an unknown exception";
  try {
    std::exception_ptr p = std::current_exception();
    if (p) std::rethrow_exception(p);
  } catch (const std::exception& e) {
    what = clean(e.what());
  } catch (...) {
  }
  ct_fatal(__FILE__, __LINE__,
           "Gloo failed outside any call of Cortado (in its network thread): %s (the shards ran "
           "collectives that do not match: another build of Cortado or Gloo on one of them?)",
           what.c_str());
}

void install_terminate_handler() {
  static std::once_flag once;
  std::call_once(once, [] { std::set_terminate(on_terminate); });
}

template <typename T>
ct_status allreduce_sum(ct_gloo_context* c, T* buf, size_t count, ct_error* err) {
  if (count == 0 || c->ctx->size == 1) return CT_OK;
  return guarded(err, CT_ERR_COMM, "", [&] {
    gloo::AllreduceOptions opts(c->ctx);
    opts.setOutput(buf, count);
    opts.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
    opts.setTimeout(c->op_timeout);
    gloo::allreduce(opts);
  });
}

// "127.0.0.1 (lo)" from the device's "tcp, pci=, iface=lo, speed=-1, addr=[127.0.0.1]".
std::string describe_device(const std::string& s) {
  auto field = [&](const char* name) {
    size_t at = s.find(name);
    if (at == std::string::npos) return std::string();
    at += strlen(name);
    size_t end = s.find(',', at);
    return s.substr(at, end == std::string::npos ? std::string::npos : end - at);
  };
  std::string addr = field("addr="), iface = field("iface=");
  if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
  if (addr.empty()) return s;
  return iface.empty() ? addr : addr + " (" + iface + ")";
}

}  // namespace

extern "C" {

ct_status ct_gloo_store_open_file(ct_gloo_store** out, const char* dir, const char* run_id,
                                  ct_error* err) {
  *out = nullptr;
  std::unique_ptr<ct_gloo_store> s;
  try {
    s = std::make_unique<ct_gloo_store>();
    auto folder = std::make_unique<cortado::FolderStore>(dir);
    s->name = "file store " + folder->path();
    s->base = std::move(folder);
  } catch (const std::exception& e) {
    return ct_error_set(err, CT_ERR_IO, "file store %s: %s", dir, clean(e.what()).c_str());
  } catch (...) {
    return ct_error_set(err, CT_ERR_IO, "file store %s: an unknown exception", dir);
  }
  CT_TRY(guarded(err, CT_ERR_COMM, s->name, [&] {
    s->run = std::make_unique<gloo::rendezvous::PrefixStore>(run_id, *s->base);
  }));
  *out = s.release();
  return CT_OK;
}

ct_status ct_gloo_store_open_redis(ct_gloo_store** out, const char* host, int port,
                                   const char* password, const char* run_id, int expire_s,
                                   double timeout_s, ct_error* err) {
  *out = nullptr;
  std::unique_ptr<ct_gloo_store> s;
  CT_TRY(guarded(err, CT_ERR_COMM, "", [&] {
    s = std::make_unique<ct_gloo_store>();
    auto redis = std::make_unique<cortado::RedisAuthStore>(host, port, password ? password : "",
                                                           expire_s, timeout_s);
    s->name = redis->name();
    s->base = std::move(redis);
    s->run = std::make_unique<gloo::rendezvous::PrefixStore>(run_id, *s->base);
  }));
  *out = s.release();
  return CT_OK;
}

void ct_gloo_store_free(ct_gloo_store* s) { delete s; }

const char* ct_gloo_store_name(const ct_gloo_store* s) { return s->name.c_str(); }

ct_status ct_gloo_store_set(ct_gloo_store* s, const char* key, const void* data, size_t len,
                            ct_error* err) {
  return guarded(err, CT_ERR_COMM, s->name, [&] {
    const char* p = static_cast<const char*>(data);
    s->run->set(key, std::vector<char>(p, p + len));
  });
}

ct_status ct_gloo_store_has(ct_gloo_store* s, const char* key, bool* present, ct_error* err) {
  *present = false;
  return guarded(err, CT_ERR_COMM, s->name, [&] {
    try {
      s->run->wait({key}, std::chrono::milliseconds(0));
      *present = true;
    } catch (const gloo::IoException&) {
      *present = false;
    }
  });
}

ct_status ct_gloo_store_get(ct_gloo_store* s, const char* key, double timeout_s, void** data,
                            size_t* len, ct_error* err) {
  *data = nullptr;
  *len = 0;
  bool timed_out = false;
  CT_TRY(guarded(err, CT_ERR_COMM, s->name, [&] {
    try {
      s->run->wait({key}, to_ms(timeout_s));
    } catch (const gloo::IoException&) {
      timed_out = true;
    }
  }));
  if (timed_out)
    return ct_error_set(err, CT_ERR_COMM, "%s: key '%s' not set after %g s", s->name.c_str(), key,
                        timeout_s);
  return guarded(err, CT_ERR_COMM, s->name, [&] {
    std::vector<char> value = s->run->get(key);
    char* buf = static_cast<char*>(ct_xcalloc(value.size() + 1, 1));
    memcpy(buf, value.data(), value.size());
    *data = buf;
    *len = value.size();
  });
}

namespace {
// c joins the full mesh of `size` ranks as `rank` through store, on its
// device, waiting up to connect_timeout_s; its operations then time out
// after c->op_timeout.  Throws Gloo's exceptions.
void connect_mesh(ct_gloo_context* c, gloo::rendezvous::Store& store, int rank, int size,
                  double connect_timeout_s) {
  c->ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  c->ctx->setTimeout(to_ms(connect_timeout_s));
  c->ctx->connectFullMesh(store, c->dev);
  c->ctx->setTimeout(c->op_timeout);
  for (int r = 0; r < size; r++)
    if (r != rank) c->others.push_back(r);
}
}  // namespace

ct_status ct_gloo_connect(ct_gloo_context** out, ct_gloo_store* s, int rank, int size,
                          const ct_gloo_bind* bind, double connect_timeout_s, double op_timeout_s,
                          ct_error* err) {
  *out = nullptr;
  install_terminate_handler();
  std::unique_ptr<ct_gloo_context> c;
  CT_TRY(guarded(err, CT_ERR_COMM, "Gloo context", [&] { c = std::make_unique<ct_gloo_context>(); }));
  c->op_timeout = to_ms(op_timeout_s);
  const char* iface = bind && bind->iface && *bind->iface ? bind->iface : nullptr;
  const char* host = bind && bind->host && *bind->host ? bind->host : nullptr;
  ct_status st = guarded(err, CT_ERR_COMM, "Gloo TCP device", [&] {
    gloo::transport::tcp::attr attr;
    if (iface) {
      attr.iface = iface;
      attr.ai_family = AF_INET; /* IPv4 first: an interface often has a link-local IPv6 too */
      try {
        c->dev = gloo::transport::tcp::CreateDevice(attr);
        return;
      } catch (const std::exception&) {
        attr.ai_family = AF_UNSPEC;
      }
    } else if (host) {
      attr.hostname = host;
    }
    c->dev = gloo::transport::tcp::CreateDevice(attr);
  });
  if (st != CT_OK) {
    if (!iface && !host)
      ct_error_prefix(err, "no address for this machine's host name (give --gloo_iface or --gloo_host)");
    return st;
  }
  CT_TRY(guarded(err, CT_ERR_COMM, "Gloo connect of rank " + std::to_string(rank), [&] {
    c->address = describe_device(c->dev->str());
    connect_mesh(c.get(), *s->run, rank, size, connect_timeout_s);
  }));
  *out = c.release();
  return CT_OK;
}

ct_status ct_gloo_connect_group(ct_gloo_context** out, const ct_gloo_context* parent, ct_gloo_store* s,
                                const char* prefix, int rank, int size, double connect_timeout_s,
                                ct_error* err) {
  *out = nullptr;
  std::unique_ptr<ct_gloo_context> c;
  CT_TRY(guarded(err, CT_ERR_COMM, "Gloo context", [&] { c = std::make_unique<ct_gloo_context>(); }));
  c->op_timeout = parent->op_timeout;
  c->dev = parent->dev; /* one TCP device (its listening socket and thread) for both */
  c->address = parent->address;
  CT_TRY(guarded(err, CT_ERR_COMM, std::string("Gloo connect of group '") + prefix + "' rank " + std::to_string(rank), [&] {
    gloo::rendezvous::PrefixStore group(prefix, *s->run);
    connect_mesh(c.get(), group, rank, size, connect_timeout_s);
  }));
  *out = c.release();
  return CT_OK;
}

const char* ct_gloo_context_address(const ct_gloo_context* c) { return c->address.c_str(); }

ct_status ct_gloo_allreduce_sum_f32(ct_gloo_context* c, float* buf, size_t count, ct_error* err) {
  return allreduce_sum(c, buf, count, err);
}

ct_status ct_gloo_allreduce_sum_f64(ct_gloo_context* c, double* buf, size_t count, ct_error* err) {
  return allreduce_sum(c, buf, count, err);
}

ct_status ct_gloo_broadcast_f32(ct_gloo_context* c, float* buf, size_t count, int root,
                                ct_error* err) {
  if (count == 0 || c->ctx->size == 1) return CT_OK;
  return guarded(err, CT_ERR_COMM, "", [&] {
    gloo::BroadcastOptions opts(c->ctx);
    opts.setOutput(buf, count);
    opts.setRoot(root);
    opts.setTimeout(c->op_timeout);
    gloo::broadcast(opts);
  });
}

ct_status ct_gloo_barrier(ct_gloo_context* c, ct_error* err) {
  if (c->ctx->size == 1) return CT_OK;
  return guarded(err, CT_ERR_COMM, "", [&] {
    gloo::BarrierOptions opts(c->ctx);
    opts.setTimeout(c->op_timeout);
    gloo::barrier(opts);
  });
}

struct ct_gloo_send_req {
  std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  int peer;
};

ct_status ct_gloo_isend(ct_gloo_context* c, const void* buf, size_t len, int peer, uint64_t slot,
                        ct_gloo_send_req** req, ct_error* err) {
  *req = nullptr;
  if (len == 0) return CT_OK;
  std::unique_ptr<ct_gloo_send_req> r;
  CT_TRY(guarded(err, CT_ERR_COMM, "send to rank " + std::to_string(peer), [&] {
    r = std::make_unique<ct_gloo_send_req>();
    r->peer = peer;
    r->buf = c->ctx->createUnboundBuffer(const_cast<void*>(buf), len);
    r->buf->send(peer, slot);
  }));
  *req = r.release();
  return CT_OK;
}

ct_status ct_gloo_send_wait(ct_gloo_context* c, ct_gloo_send_req* req, ct_error* err) {
  if (!req) return CT_OK;
  std::unique_ptr<ct_gloo_send_req> r(req);
  return guarded(err, CT_ERR_COMM, "send to rank " + std::to_string(r->peer), [&] {
    if (!r->buf->waitSend(c->op_timeout)) throw gloo::IoException("Timed out");
  });
}

struct ct_gloo_recv_req {
  std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  int peer;
};

ct_status ct_gloo_irecv(ct_gloo_context* c, void* buf, size_t len, int peer, uint64_t slot,
                        ct_gloo_recv_req** req, ct_error* err) {
  *req = nullptr;
  if (len == 0) return CT_OK;
  for (const auto& a : c->aborted) /* a receive cut short still owns the slot's next message */
    if (a.slot == slot) return ct_error_set(err, CT_ERR_INVALID, "receive from rank %d: a cancelled receive of the slot is still posted", peer);
  std::unique_ptr<ct_gloo_recv_req> r;
  CT_TRY(guarded(err, CT_ERR_COMM, "receive from rank " + std::to_string(peer), [&] {
    r = std::make_unique<ct_gloo_recv_req>();
    r->peer = peer;
    r->buf = c->ctx->createUnboundBuffer(buf, len);
    r->buf->recv(peer, slot);
  }));
  *req = r.release();
  return CT_OK;
}

void ct_gloo_recv_free(ct_gloo_recv_req* req) { delete req; }

ct_status ct_gloo_recv_wait(ct_gloo_context* c, ct_gloo_recv_req* req, ct_error* err) {
  if (!req) return CT_OK;
  std::unique_ptr<ct_gloo_recv_req> r(req);
  return guarded(err, CT_ERR_COMM, "receive from rank " + std::to_string(r->peer), [&] {
    int src = -1;
    if (!r->buf->waitRecv(&src, c->op_timeout)) throw gloo::IoException("Timed out");
  });
}

namespace {
ct_status recv_from(ct_gloo_context* c, void* buf, size_t len, const std::vector<int>& from,
                    uint64_t slot, int* peer, const std::string& what, ct_error* err) {
  if (len == 0) return CT_OK;
  return guarded(err, CT_ERR_COMM, what, [&] {
    auto b = c->ctx->createUnboundBuffer(buf, len);
    b->recv(from, slot);
    int src = -1;
    if (!b->waitRecv(&src, c->op_timeout)) throw gloo::IoException("Timed out");
    if (peer) *peer = src;
  });
}
// Whether every rank of `want` is in `posted`.
bool covers(const std::vector<int>& posted, const std::vector<int>& want) {
  for (int r : want)
    if (std::find(posted.begin(), posted.end(), r) == posted.end()) return false;
  return true;
}

// recv_from, ended within ~20 ms by a raised cancel word (CT_ERR_INTERRUPTED,
// "cancelled"): the context's watcher aborts the wait.  The bytes land in
// the context's staging memory and are copied to buf.  An aborted receive
// stays posted in Gloo and takes the next message of its slot: it is kept
// with its memory (ct_gloo_context.aborted), and the next receive of the
// slot, cancellable or not, waits on it instead of posting its own.
ct_status recv_cancellable(ct_gloo_context* c, void* buf, size_t len, const std::vector<int>& from,
                           uint64_t slot, int* peer, const int* cancel, const std::string& what,
                           ct_error* err) {
  if (len == 0) return CT_OK;
  // a receive of this slot cut short earlier is still posted: wait on it
  ct_gloo_context::aborted_recv pending;
  bool resumed = false;
  for (size_t i = 0; i < c->aborted.size() && !resumed; i++) {
    auto& a = c->aborted[i];
    if (a.slot != slot || a.len != len || !covers(a.from, from)) continue;
    pending = std::move(a);
    c->aborted.erase(c->aborted.begin() + (long)i);
    resumed = true;
  }
  if (!resumed && !cancel) return recv_from(c, buf, len, from, slot, peer, what, err);
  // else the context's staging memory (no allocation per message), unless
  // another receive holds it
  const bool shared = !resumed && !c->staging_busy.exchange(true, std::memory_order_acquire);
  std::unique_ptr<char[]> staging;
  size_t cap = len;
  if (resumed) {
    staging = std::move(pending.bytes);
  } else if (shared && c->staging_cap >= len) {
    staging = std::move(c->staging);
    cap = c->staging_cap;
  } else {
    staging.reset(new char[len]);
  }
  std::unique_ptr<gloo::transport::UnboundBuffer> b = std::move(pending.buf);
  bool aborted = false;
  auto& w = c->watch;
  auto unwatch = [&] {
    std::lock_guard<std::mutex> lock(w.mu);
    for (size_t i = 0; i < w.waiting.size(); i++)
      if (w.waiting[i].buf == b.get()) {
        w.waiting.erase(w.waiting.begin() + (long)i);
        break;
      }
  };
  ct_status st = guarded(err, CT_ERR_COMM, what, [&] {
    if (!resumed) {
      b = c->ctx->createUnboundBuffer(staging.get(), len);
      b->recv(from, slot);
    }
    if (cancel) {
      std::lock_guard<std::mutex> lock(w.mu);
      w.waiting.push_back({b.get(), cancel, false});
      if (!w.thread.joinable()) w.thread = std::thread([&w] { w.run(); });
    }
    int src = -1;
    bool done = false;
    try {
      done = b->waitRecv(&src, c->op_timeout);
    } catch (...) {
      unwatch();
      throw;
    }
    unwatch();
    if (!done) {
      aborted = true;
      return;
    }
    if (peer) *peer = src;
    memcpy(buf, staging.get(), len);
  });
  if (aborted) {
    // still posted in the context: the next receive of the slot waits on it
    c->aborted.push_back({slot, len, resumed ? std::move(pending.from) : from, std::move(b),
                          std::move(staging)});
    if (shared && !c->staging) c->staging_cap = 0;
  } else if (shared) {
    c->staging = std::move(staging);  // for the next receive
    c->staging_cap = cap;
  } else if (resumed) {
    b.reset();  // done with its memory: the buffer first
  }
  if (shared) c->staging_busy.store(false, std::memory_order_release);
  if (aborted) return ct_error_set(err, CT_ERR_INTERRUPTED, "%s: cancelled", what.c_str());
  return st;
}
}  // namespace

ct_status ct_gloo_recv(ct_gloo_context* c, void* buf, size_t len, int peer, uint64_t slot,
                       const int* cancel, ct_error* err) {
  return recv_cancellable(c, buf, len, {peer}, slot, nullptr, cancel,
                          "receive from rank " + std::to_string(peer), err);
}

ct_status ct_gloo_recv_any(ct_gloo_context* c, void* buf, size_t len, uint64_t slot, int* peer,
                           const int* cancel, ct_error* err) {
  *peer = -1;
  return recv_cancellable(c, buf, len, c->others, slot, peer, cancel, "receive from any rank", err);
}

void ct_gloo_forget_peer(ct_gloo_context* c, int peer) {
  for (size_t i = 0; i < c->others.size(); i++)
    if (c->others[i] == peer) {
      c->others.erase(c->others.begin() + (long)i);
      return;
    }
}

void ct_gloo_context_free(ct_gloo_context* c) {
  if (!c) return;
  try {
    c->ctx.reset();
    c->dev.reset();
  } catch (...) {
    /* closing a broken connection may throw; the process is done with it */
  }
  c->aborted.clear(); /* nothing can land in them once the connections are gone */
  delete c;
}

const char* ct_gloo_version(void) {
#define CT_STR2(x) #x
#define CT_STR(x) CT_STR2(x)
  return "Gloo " CT_STR(GLOO_VERSION_MAJOR) "." CT_STR(GLOO_VERSION_MINOR) "." CT_STR(GLOO_VERSION_PATCH);
}

}  // extern "C"
