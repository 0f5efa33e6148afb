// The one small key-value store interface that the launcher and the runtime program against.
//
// Implementations: MemoryStore (in-process), PrefixStore (a namespace over another store) and
// TcpStoreClient (PyTorch's TCPStore protocol). Barriers, rank assignment and heartbeats are
// free functions built on this interface, not extra virtuals.
//
// Values are arbitrary bytes held in std::string. All implementations are thread-safe: calls
// from several threads are serialised (a blocking wait holds up other calls on the same TCP
// connection, as in PyTorch; open a second client for concurrent waits).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ddp::rendezvous {

// The deadline `timeout` from now, saturated at a century so that Duration::max() ("wait for
// ever") cannot overflow the clock arithmetic.
inline std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  constexpr std::chrono::milliseconds kCentury = std::chrono::hours(24 * 365 * 100);
  return std::chrono::steady_clock::now() + std::clamp(timeout, std::chrono::milliseconds(0), kCentury);
}

class Store {
 public:
  using Duration = std::chrono::milliseconds;

  virtual ~Store() = default;

  // Stores `value` under `key`, replacing what was there; wakes every waiter on `key`.
  virtual void set(const std::string& key, const std::string& value) = 0;

  // Blocks until `key` exists, then returns its value. Throws TimeoutError after `timeout`.
  virtual std::string get(const std::string& key, Duration timeout) = 0;

  // Adds `delta` to the decimal counter under `key` (0 when missing) and returns the new value.
  // `add(key, 0)` reads a counter. Does not block.
  virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;

  // Atomic compare-and-set with PyTorch's semantics (see KeyValueMap::compare_set): returns the
  // value now stored, or `expected` when the key is missing and `expected` is non-empty.
  virtual std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) = 0;

  // True when every key exists. Does not block.
  virtual bool check(const std::vector<std::string>& keys) = 0;

  // Blocks until every key exists. Throws TimeoutError after `timeout`; the store stays usable.
  virtual void wait(const std::vector<std::string>& keys, Duration timeout) = 0;

  // Removes `key`; returns whether it existed. Waiters are not woken.
  virtual bool delete_key(const std::string& key) = 0;

  // Number of keys in the whole store (not only this view of it, for a PrefixStore).
  virtual std::int64_t num_keys() = 0;

  // Makes calls blocked on this store in other threads fail promptly (with an Error), e.g. a
  // WAIT parked on a connection that a cut link left silent; the store may be unusable after.
  // Thread-safe and non-blocking: the one method meant to be called concurrently with others.
  // In-process stores have no connection to break, and their waits end with their timeout or
  // the key: for them this does nothing.
  virtual void interrupt() {}

  // The address this client reaches the store from (a TCP connection's local IP, no port), so
  // the store's host can tell the nodes' addresses from a stranger's; "" for in-process stores.
  virtual std::string local_address() { return ""; }
};

}  // namespace ddp::rendezvous
