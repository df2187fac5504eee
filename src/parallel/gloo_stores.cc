// The rendezvous stores of gloo_shim (see gloo_stores.hh).
#include "parallel/gloo_stores.hh"

#include <sys/time.h>

#include <thread>

#include <gloo/common/error.h>
#include <hiredis/hiredis.h>

namespace cortado {

namespace {

using Clock = std::chrono::steady_clock;

std::string join_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) s += (s.empty() ? "'" : ", '") + k + "'";
  return s;
}

struct timeval to_timeval(double seconds) {
  struct timeval tv;
  tv.tv_sec = (time_t)seconds;
  tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
  return tv;
}

// Polls ready() every 10 ms until it holds or timeout has passed (checked
// once even for a zero timeout); throws gloo::IoException on timeout.
template <typename Ready>
void poll_until(Ready ready, const std::vector<std::string>& keys,
                const std::chrono::milliseconds& timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!ready()) {
    if (Clock::now() >= deadline)
      throw gloo::IoException("wait timeout for key(s) " + join_keys(keys));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

// ------------------------------------------------------------------ folder

void FolderStore::set(const std::string& key, const std::vector<char>& data) {
  if (check({key})) throw KeyExists(key);
  try {
    FileStore::set(key, data);
  } catch (const gloo::Exception& e) {
    throw StoreError(CT_ERR_IO, e.what());
  }
}

void FolderStore::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  poll_until([&] { return check(keys); }, keys, timeout);
}

// ------------------------------------------------------------------ redis

RedisAuthStore::RedisAuthStore(const std::string& host, int port, const std::string& password,
                               int expire_s, double timeout_s)
    : name_("redis " + host + ":" + std::to_string(port)), expire_s_(expire_s) {
  c_ = redisConnectWithTimeout(host.c_str(), port, to_timeval(timeout_s));
  if (!c_) throw StoreError(CT_ERR_NOMEM, name_ + ": cannot allocate a connection");
  if (c_->err) throw StoreError(CT_ERR_COMM, name_ + ": cannot connect: " + c_->errstr);
  if (redisSetTimeout(c_, to_timeval(timeout_s)) != REDIS_OK) fail("cannot set the reply timeout");
  if (!password.empty()) {
    auto* r = static_cast<redisReply*>(
        redisCommand(c_, "AUTH %b", password.data(), (size_t)password.size()));
    if (!r) fail("AUTH");
    if (r->type == REDIS_REPLY_ERROR) {
      std::string msg = name_ + ": authentication failed: " + std::string(r->str, r->len);
      freeReplyObject(r);
      throw StoreError(CT_ERR_COMM, msg);
    }
    freeReplyObject(r);
  }
  auto* r = static_cast<redisReply*>(redisCommand(c_, "PING"));
  if (!r) fail("PING");
  if (r->type == REDIS_REPLY_ERROR) {
    std::string msg = name_ + ": " + std::string(r->str, r->len);
    if (msg.find("NOAUTH") != std::string::npos)
      msg += " (give the password with --redis_password or REDIS_PASSWORD)";
    freeReplyObject(r);
    throw StoreError(CT_ERR_COMM, msg);
  }
  freeReplyObject(r);
}

RedisAuthStore::~RedisAuthStore() {
  if (c_) redisFree(c_);
}

void RedisAuthStore::fail(const std::string& what) {
  std::string cause = c_ && c_->err ? c_->errstr : "no reply";
  if (c_ && c_->err == REDIS_ERR_IO && cause.find("temporarily unavailable") != std::string::npos)
    cause = "no reply in time (" + cause + ")";
  throw StoreError(CT_ERR_COMM, name_ + ": " + what + " failed: " + cause);
}

void RedisAuthStore::set(const std::string& key, const std::vector<char>& data) {
  auto* r = static_cast<redisReply*>(redisCommand(c_, "SET %b %b NX EX %d", key.data(),
                                                  (size_t)key.size(), data.data(),
                                                  (size_t)data.size(), expire_s_));
  if (!r) fail("SET of '" + key + "'");
  const int type = r->type;
  std::string text = r->str ? std::string(r->str, r->len) : std::string();
  freeReplyObject(r);
  if (type == REDIS_REPLY_NIL) throw KeyExists(key);
  if (type == REDIS_REPLY_ERROR) throw StoreError(CT_ERR_COMM, name_ + ": SET of '" + key + "': " + text);
}

bool RedisAuthStore::exists(const std::string& key) {
  auto* r = static_cast<redisReply*>(redisCommand(c_, "EXISTS %b", key.data(), (size_t)key.size()));
  if (!r) fail("EXISTS of '" + key + "'");
  if (r->type == REDIS_REPLY_ERROR) {
    std::string msg = name_ + ": EXISTS of '" + key + "': " + std::string(r->str, r->len);
    freeReplyObject(r);
    throw StoreError(CT_ERR_COMM, msg);
  }
  const bool present = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
  freeReplyObject(r);
  return present;
}

std::vector<char> RedisAuthStore::get(const std::string& key) {
  wait({key});
  auto* r = static_cast<redisReply*>(redisCommand(c_, "GET %b", key.data(), (size_t)key.size()));
  if (!r) fail("GET of '" + key + "'");
  if (r->type != REDIS_REPLY_STRING) {
    std::string msg = name_ + ": GET of '" + key + "': " +
                      (r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : "no value (expired?)");
    freeReplyObject(r);
    throw StoreError(CT_ERR_COMM, msg);
  }
  std::vector<char> value(r->str, r->str + r->len);
  freeReplyObject(r);
  return value;
}

void RedisAuthStore::wait(const std::vector<std::string>& keys,
                          const std::chrono::milliseconds& timeout) {
  poll_until(
      [&] {
        for (const auto& k : keys)
          if (!exists(k)) return false;
        return true;
      },
      keys, timeout);
}

}  // namespace cortado
