// In-process store; waits block on a condition variable notified by every write.
#include "ddplaunch/rendezvous/memory_store.hpp"

#include <algorithm>

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::rendezvous {

void MemoryStore::set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kv_.set(key, value);
  }
  changed_.notify_all();
}

std::string MemoryStore::get(const std::string& key, Duration timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_locked(lock, {key}, timeout);
  return *kv_.find(key);
}

std::int64_t MemoryStore::add(const std::string& key, std::int64_t delta) {
  std::int64_t result = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result = kv_.add(key, delta);
  }
  changed_.notify_all();
  return result;
}

std::string MemoryStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  bool changed = false;
  std::string result;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    result = kv_.compare_set(key, expected, desired, changed);
  }
  if (changed) changed_.notify_all();
  return result;
}

bool MemoryStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return kv_.contains(k); });
}

void MemoryStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_locked(lock, keys, timeout);
}

void MemoryStore::wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                              Duration timeout) {
  const auto all_present = [&] {
    return std::all_of(keys.begin(), keys.end(), [&](const auto& k) { return kv_.contains(k); });
  };
  if (!changed_.wait_until(lock, deadline_after(timeout), all_present)) {
    std::string missing;
    for (const auto& k : keys) {
      if (!kv_.contains(k)) missing += (missing.empty() ? "'" : ", '") + k + "'";
    }
    throw TimeoutError("timed out after " + std::to_string(timeout.count()) + " ms waiting for keys " + missing +
                       " in the in-memory store");
  }
}

bool MemoryStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return kv_.erase(key);
}

std::int64_t MemoryStore::num_keys() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<std::int64_t>(kv_.size());
}

}  // namespace ddp::rendezvous
