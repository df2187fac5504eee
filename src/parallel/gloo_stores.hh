// The rendezvous stores behind gloo_shim.h (C++, private to src/parallel):
// a FileStore whose waits honour millisecond timeouts and refuse to
// overwrite a key, and a Redis store over hiredis with AUTH and expiring
// keys.  Errors other than a wait's timeout are StoreError, which carries
// the ct_status the shim returns; a wait that times out throws
// gloo::IoException as Gloo's own stores do, so that Gloo's rendezvous
// reports it the usual way.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/store.h>

#include "core/status.h"

struct redisContext;

namespace cortado {

struct StoreError : std::runtime_error {
  StoreError(ct_status code, const std::string& msg) : std::runtime_error(msg), code(code) {}
  ct_status code;
};

// A key that already holds a value (a run id used twice).
struct KeyExists : StoreError {
  explicit KeyExists(const std::string& key)
      : StoreError(CT_ERR_INVALID, "key '" + key + "' is already set"), key(key) {}
  std::string key;
};

// Gloo's FileStore with waits checked every 10 ms against the exact
// timeout (Gloo's compares whole seconds) and set() refusing existing keys
// with KeyExists.
class FolderStore : public gloo::rendezvous::FileStore {
 public:
  explicit FolderStore(const std::string& path) : FileStore(path) {}
  const std::string& path() const { return basePath_; }  // absolute, links resolved
  void set(const std::string& key, const std::vector<char>& data) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
};

// A Redis-backed store: one connection, used by one thread at a time.
// Keys are set with SET NX EX (never overwritten, expiring after expire_s).
class RedisAuthStore : public gloo::rendezvous::Store {
 public:
  // Connects within timeout_s, then AUTH when password is not empty and a
  // PING, so that a wrong password or an unreachable server fails here.
  RedisAuthStore(const std::string& host, int port, const std::string& password, int expire_s,
                 double timeout_s);
  ~RedisAuthStore() override;
  RedisAuthStore(const RedisAuthStore&) = delete;
  RedisAuthStore& operator=(const RedisAuthStore&) = delete;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  const std::string& name() const { return name_; }

 private:
  bool exists(const std::string& key);
  [[noreturn]] void fail(const std::string& what);

  redisContext* c_ = nullptr;
  std::string name_;  // "redis host:port"
  int expire_s_;
};

}  // namespace cortado
