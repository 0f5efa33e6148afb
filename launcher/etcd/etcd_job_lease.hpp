// The lease a job's keys in etcd live under (etcd_store.hpp), shared by all its launchers: the
// first launcher to come creates "<prefix>lease" (a create-if-absent transaction) naming a lease
// it was granted; the others adopt that lease and revoke their own. Every launcher keeps the
// shared lease alive from a thread of its own (etcd_lease_rules.hpp), so the job's keys outlive any one
// launcher and vanish `ttl` after the last one ended, or at once when a successful job ends
// (revoke()). A new job with the same run id then starts from nothing; one started within the
// TTL of a failed job's end would find that job's rounds (the README says so).
// Thread-safe: id() and revoke() from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "launcher/etcd/etcd_client.hpp"

namespace ddp::launcher {

class EtcdJobLease {
 public:
  // Does not connect: the first id() does.
  EtcdJobLease(const EtcdClientOptions& client, std::string prefix, std::chrono::seconds ttl);
  // Stops the keep-alive thread (the lease then runs out after its TTL). Does not revoke.
  ~EtcdJobLease();
  EtcdJobLease(const EtcdJobLease&) = delete;
  EtcdJobLease& operator=(const EtcdJobLease&) = delete;

  // The lease; the first call creates or adopts it (blocking up to the client's timeout per etcd
  // call) and starts the keep-alive thread. Throws as EtcdClient does (and again on the next call).
  std::int64_t id();
  // Ends the lease now, if one was made: every key of the job vanishes. Never throws (a failure
  // is logged).
  void revoke();

 private:
  std::int64_t create_or_adopt();
  void keep_alive_loop();
  bool stopped();

  std::string key_;
  std::chrono::seconds ttl_;
  EtcdClient client_;         // id()'s (under mutex_), then the keep-alive thread's only
  EtcdClient revoke_client_;  // revoke()'s (under mutex_)
  std::int64_t id_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace ddp::launcher
