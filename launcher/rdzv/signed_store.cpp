// See signed_store.hpp.
#include "launcher/rdzv/signed_store.hpp"

#include <algorithm>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "common/log.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "launcher/rdzv/job_secret.hpp"
#include "launcher/rdzv/outcome.hpp"

namespace ddp::launcher {
namespace {
constexpr std::string_view kTag = "ddps1:";
constexpr std::size_t kHexMac = 64;
}  // namespace

SignedStore::SignedStore(std::shared_ptr<rendezvous::Store> store, std::string secret, std::string context)
    : store_(std::move(store)), secret_(std::move(secret)), context_(std::move(context)) {
  DDP_ASSERT(!secret_.empty(), "SignedStore without a secret");
}

std::string SignedStore::mac(const std::string& key, const std::string& value) const {
  return to_hex(hmac_sha256(secret_, context_ + '/' + key + '\0' + value));
}

std::string SignedStore::seal(const std::string& key, const std::string& value) const {
  return std::string(kTag) + mac(key, value) + ":" + value;
}

std::optional<std::string> SignedStore::open(const std::string& key, const std::string& stored) const {
  const std::size_t head = kTag.size() + kHexMac + 1;
  if (stored.size() < head || stored.compare(0, kTag.size(), kTag) != 0 || stored[head - 1] != ':') {
    return std::nullopt;
  }
  std::string value = stored.substr(head);
  if (!same_bytes(mac(key, value), std::string_view(stored).substr(kTag.size(), kHexMac))) return std::nullopt;
  return value;
}

void SignedStore::report(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++forged_;
  }
  // Once per key and process: a launcher holds several connections (views) to the store.
  static std::mutex reported_mutex;
  static std::set<std::string> reported;
  std::lock_guard<std::mutex> lock(reported_mutex);
  if (!reported.insert(context_ + "/" + key).second) return;
  log::warning(
      "ignored a value of store key '{}' that fails the job-secret check (written by a program without the job's "
      "secret, or a launcher with another one); further ones are ignored silently",
      printable(key));
}

std::size_t SignedStore::forged_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return forged_;
}

void SignedStore::set(const std::string& key, const std::string& value) {
  store_->set(key, seal(key, value));
}

std::string SignedStore::get(const std::string& key, Duration timeout) {
  const auto deadline = rendezvous::deadline_after(timeout);
  for (;;) {
    const auto left = std::chrono::duration_cast<Duration>(deadline - std::chrono::steady_clock::now());
    const std::string stored = store_->get(key, std::max(left, Duration(0)));
    if (auto value = open(key, stored)) return *value;
    report(key);
    // Only under attack: the forged value hides the write that will replace it (the store has
    // no event for "a value changed"), so look again once a second until the deadline.
    if (left <= Duration(0)) {
      throw rendezvous::TimeoutError(fmt::format("timed out waiting for a genuine value of store key '{}'", key));
    }
    std::this_thread::sleep_for(std::min(left, Duration(1000)));
  }
}

std::string SignedStore::compare_set(const std::string& key, const std::string& expected, const std::string& desired) {
  const std::string sealed = seal(key, desired);
  std::string compare_with = expected.empty() ? "" : seal(key, expected);
  for (int attempt = 0; attempt < 8; ++attempt) {
    const std::string now = store_->compare_set(key, compare_with, sealed);
    if (now == sealed) return desired;
    if (auto value = open(key, now)) return *value;
    // A forged value counts as no value. With expected "" (the first writer wins), it does not
    // count as a writer: replace it atomically. Otherwise it is a missing key: nothing is set.
    report(key);
    if (!expected.empty()) return expected;
    compare_with = now;
  }
  throw Error(
      fmt::format("store key '{}' keeps being overwritten with values that fail the job-secret check; a "
                  "program without the job's secret is writing ddplaunch's keys",
                  printable(key)));
}

}  // namespace ddp::launcher
