// A Store view whose values carry an HMAC-SHA256 under the job secret (job_secret.hpp), so that
// a stranger who can reach the store cannot forge what launchers tell each other (node records,
// heartbeats, round state, outcomes): the agent and the rendezvous use it in place of the job's
// PrefixStore when a secret is configured.
//
// Wire form of a value: "ddps1:<64 hex digits>:<value>", the MAC taken over
// "<context>/<key>\0<value>", where the context is the view's key prefix: the MAC covers the full
// key, so a record copied to another key, round or job fails the check, and two views of one key
// (a namespace view and a job view under it) agree. A value that fails the check (a stranger's write,
// or a launcher with another secret) is ignored: reads behave as if the key held nothing valid
// yet, and the key is reported once (log warning) per process.
//
// Counters (add) cannot be signed, since the server does their arithmetic; they pass through,
// and callers never let a counter alone decide anything: it is always confirmed by signed
// records. check() and wait() see whether a key exists, not whether its value is genuine; a get
// after them does the check.
//
// Thread-safe as far as the wrapped store is. Blocks and throws as the wrapped store, plus:
// get() keeps waiting past a forged value until a genuine one or the deadline (TimeoutError);
// compare_set() treats a forged value as none (with expected "" it replaces it), and throws Error when the key is
// overwritten with forged values 8 times in a row.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::launcher {

class SignedStore final : public rendezvous::Store {
 public:
  // `secret` non-empty; `context` is the prefix under which `store` puts its keys.
  SignedStore(std::shared_ptr<rendezvous::Store> store, std::string secret, std::string context);

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override { return store_->add(key, delta); }
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override { return store_->check(keys); }
  void wait(const std::vector<std::string>& keys, Duration timeout) override { store_->wait(keys, timeout); }
  bool delete_key(const std::string& key) override { return store_->delete_key(key); }
  std::int64_t num_keys() override { return store_->num_keys(); }
  void interrupt() override { store_->interrupt(); }
  std::string local_address() override { return store_->local_address(); }

  // The stored form of `value` under `key`. Pure.
  std::string seal(const std::string& key, const std::string& value) const;
  // The value inside `stored` when its MAC is right for `key`, else nullopt. Pure.
  std::optional<std::string> open(const std::string& key, const std::string& stored) const;
  // How many values failed the check so far.
  std::size_t forged_count() const;

 private:
  // Hex HMAC-SHA256 of the full key and the value.
  std::string mac(const std::string& key, const std::string& value) const;
  // Logs the first forged value seen under `key` in this process; counts every one.
  void report(const std::string& key);

  std::shared_ptr<rendezvous::Store> store_;
  std::string secret_;
  std::string context_;
  mutable std::mutex mutex_;
  std::size_t forged_ = 0;
};

}  // namespace ddp::launcher
