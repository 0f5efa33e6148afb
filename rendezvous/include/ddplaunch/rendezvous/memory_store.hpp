// An in-process Store: a KeyValueMap behind a mutex, with a condition variable for waits.
// Used by multi-rank tests that run ranks as threads, and by the launcher's unit tests.
#pragma once

#include <condition_variable>
#include <mutex>

#include "ddplaunch/rendezvous/key_value_map.hpp"
#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::rendezvous {

// Thread-safe; get/wait block on a condition variable (no polling) until the keys exist or the
// timeout passes (then TimeoutError). add throws ProtocolError on a non-numeric value.
// interrupt() is Store's no-op: one MemoryStore is shared by every thread of a test (the "nodes"),
// so there is no one caller's connection to break, and breaking them all would fail the others.
class MemoryStore final : public Store {
 public:
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, Duration timeout) override;
  std::int64_t add(const std::string& key, std::int64_t delta) override;
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Duration timeout) override;
  bool delete_key(const std::string& key) override;
  std::int64_t num_keys() override;

 private:
  // Waits with mutex_ held (through `lock`) until all keys exist.
  void wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys, Duration timeout);

  std::mutex mutex_;
  std::condition_variable changed_;
  KeyValueMap kv_;
};

}  // namespace ddp::rendezvous
