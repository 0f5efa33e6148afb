// See etcd_store.hpp.
#include "launcher/etcd/etcd_store.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::launcher {
namespace {
using Clock = std::chrono::steady_clock;

// A watch is re-armed at least this often, so a member that went silent (a cut link) is left
// for another within this time rather than at the wait's own timeout.
constexpr std::chrono::milliseconds kWatchSlice{std::chrono::seconds(10)};

// A write under the job's lease after the lease ended says so in etcd's words ("requested lease
// not found"); this says what it means.
template <class Write>
auto under_lease(Write write) {
  try {
    return write();
  } catch (const EtcdError& e) {
    if (std::string(e.what()).find("lease not found") == std::string::npos) throw;
    throw EtcdError(
        std::string("the job's keys are gone from etcd (its lease ended: the job is over, or no launcher of "
                    "it reached etcd for the lease's TTL): ") +
        e.what());
  }
}
}  // namespace

EtcdStore::EtcdStore(EtcdStoreOptions options) : options_(std::move(options)), client_(options_.client) {}

void EtcdStore::set(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  under_lease([&] { return client_.put(full(key), value, options_.lease); });
}

std::string EtcdStore::get_locked(const std::string& key, Duration timeout) {
  const auto deadline = rendezvous::deadline_after(timeout);
  for (;;) {
    std::int64_t revision = 0;
    if (const auto kv = client_.get(full(key), &revision)) return kv->value;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      throw rendezvous::TimeoutError(
          fmt::format("timed out after {} ms waiting for key '{}' in etcd", timeout.count(), key));
    }
    // Whatever the watch returns (a write, a delete, nothing), the key is read again.
    client_.watch(full(key), false, revision, std::min(left, kWatchSlice));
  }
}

std::string EtcdStore::get(const std::string& key, Duration timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  return get_locked(key, timeout);
}

std::int64_t EtcdStore::add(const std::string& key, std::int64_t delta) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (;;) {
    const auto kv = client_.get(full(key));
    const std::int64_t value = kv ? parse_etcd_int(fmt::format("key '{}'", key), kv->value) + delta : delta;
    if (delta == 0) return value;
    if (under_lease([&] {
          return client_.compare_and_swap(full(key), kv ? kv->mod_revision : 0, std::to_string(value), options_.lease);
        }))
      return value;
  }
}

std::string EtcdStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (;;) {
    const auto kv = client_.get(full(key));
    // PyTorch's semantics (KeyValueMap::compare_set): a missing key is set only when `expected`
    // is empty; otherwise the answer is `expected`.
    if (!kv && !expected.empty()) return expected;
    if (kv && kv->value != expected) return kv->value;
    if (under_lease(
            [&] { return client_.compare_and_swap(full(key), kv ? kv->mod_revision : 0, desired, options_.lease); }))
      return desired;
  }
}

bool EtcdStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::all_of(keys.begin(), keys.end(),
                     [this](const std::string& k) { return client_.get(full(k)).has_value(); });
}

void EtcdStore::wait(const std::vector<std::string>& keys, Duration timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto deadline = rendezvous::deadline_after(timeout);
  for (const std::string& key : keys) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    get_locked(key, timeout == Duration::max() ? timeout : std::max(left, Duration(0)));
  }
}

bool EtcdStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return client_.remove(full(key));
}

std::int64_t EtcdStore::num_keys() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<std::int64_t>(client_.get_prefix(options_.prefix).size());
}

std::string EtcdStore::local_address() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (client_.local_address().empty()) client_.get(full("run_id"));  // any call connects
  return client_.local_address();
}

}  // namespace ddp::launcher
