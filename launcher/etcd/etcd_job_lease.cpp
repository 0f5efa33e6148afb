// See etcd_job_lease.hpp.
#include "launcher/etcd/etcd_job_lease.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "launcher/etcd/etcd_lease_rules.hpp"

namespace ddp::launcher {

EtcdJobLease::EtcdJobLease(const EtcdClientOptions& client, std::string prefix, std::chrono::seconds ttl)
    : key_(std::move(prefix) + "lease"), ttl_(ttl), client_(client), revoke_client_(client) {}

std::int64_t EtcdJobLease::id() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (id_ == 0) {
    id_ = create_or_adopt();
    thread_ = std::thread([this] { keep_alive_loop(); });
  }
  return id_;
}

std::int64_t EtcdJobLease::create_or_adopt() {
  for (;;) {
    const std::int64_t mine = client_.grant_lease(ttl_);
    std::optional<EtcdKeyValue> holder;
    if (client_.create(key_, std::to_string(mine), mine, &holder)) return mine;
    client_.revoke(mine);
    // The holder's lease may have run out since (its key then vanished too): try again.
    if (!holder) continue;
    const std::int64_t theirs = parse_etcd_int(fmt::format("key '{}'", key_), holder->value);
    if (client_.keep_alive(theirs) > 0) return theirs;
  }
}

EtcdJobLease::~EtcdJobLease() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EtcdJobLease::keep_alive_loop() {
  // A lease is kept alive by refreshing it before it runs out: inherently periodic.
  const auto interval = etcd_lease_rules::job_lease_refresh(ttl_);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!cv_.wait_for(lock, interval, [this] { return stopped_; })) {
    lock.unlock();
    try {
      if (client_.keep_alive(id_) == 0 && !stopped()) {
        log::error("etcd: the job's lease {:x} expired (etcd did not hear from any launcher of the job for {})", id_,
                   format_whole_seconds(ttl_));
        return;
      }
    } catch (const Error& e) {
      log::warning("etcd: could not keep the job's lease alive: {}", e.what());
    }
    lock.lock();
  }
}

bool EtcdJobLease::stopped() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stopped_;
}

void EtcdJobLease::revoke() {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;  // the keep-alive thread ends quietly rather than report the lease gone
    cv_.notify_all();
    if (id_ != 0) revoke_client_.revoke(id_);
  } catch (const Error& e) {
    log::warning("etcd: could not remove the job's keys: {}", e.what());
  }
}

}  // namespace ddp::launcher
