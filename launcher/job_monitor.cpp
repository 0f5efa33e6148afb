// Outcome watcher and heartbeats; see job_monitor.hpp.
#include "launcher/job_monitor.hpp"

#include <condition_variable>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::launcher {

using Clock = std::chrono::steady_clock;

namespace {
// A node's last heartbeat: "" before its first one, or while the key holds only a value that a
// SignedStore rejects (which then counts as no beat).
std::string read_beat(rendezvous::Store& store, const std::string& key, std::chrono::milliseconds wait) {
  if (!store.check({key})) return "";
  try {
    return store.get(key, wait);
  } catch (const rendezvous::TimeoutError&) {
    return "";
  }
}
}  // namespace

struct JobMonitor::Shared {
  std::mutex mutex;
  std::condition_variable cv;
  bool stopped = false;
  std::shared_ptr<rendezvous::Store> watcher_store;

  // Sleeps up to `d`; true when stopped.
  bool sleep_for(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, d, [&] { return stopped; });
  }
  bool is_stopped() {
    std::lock_guard<std::mutex> lock(mutex);
    return stopped;
  }
};

JobMonitor::JobMonitor(StoreConnector connect, JobMonitorOptions o, OnOutcome on_outcome, OnLost on_lost)
    : shared_(std::make_shared<Shared>()) {
  auto shared = shared_;
  watcher_ = std::thread([shared, connect, o, on_outcome, on_lost] {
    try {
      auto store = connect();
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        if (shared->stopped) return;
        shared->watcher_store = store;
      }
      // Parked on the server until some node publishes the outcome: no polling. The wait is
      // "for ever"; stop() ends it by setting the key or breaking the connection.
      store->wait({o.outcome_key}, std::chrono::milliseconds::max());
      const std::string value = store->get(o.outcome_key, std::chrono::seconds(10));
      if (!shared->is_stopped()) on_outcome(value);
    } catch (const ddp::Error& e) {
      if (!shared->is_stopped()) on_lost("lost the store on node 0 (" + std::string(e.what()) + ")", true);
    }
  });
  if (o.nnodes <= 1) return;
  heartbeat_ = std::thread([shared, connect, o, on_lost] {
    std::map<int, std::pair<std::string, Clock::time_point>> seen;
    try {
      auto store = connect();
      // Heartbeats are inherently periodic: there is no event for "a peer went silent". Each is a
      // value (a sequence number), not a counter, so that a SignedStore can sign it.
      std::int64_t sequence = 0;
      do {
        store->set(o.heartbeat_prefix + std::to_string(o.node), std::to_string(++sequence));
        const auto now = Clock::now();
        for (int n = 0; n < o.nnodes; ++n) {
          if (n == o.node) continue;
          const std::string beat = read_beat(*store, o.heartbeat_prefix + std::to_string(n), o.interval);
          auto& s = seen[n];
          if (s.second == Clock::time_point{} || beat != s.first) {
            s = {beat, now};
          } else if (now - s.second > o.timeout) {
            if (!shared->is_stopped()) {
              on_lost(fmt::format("lost node {}: no heartbeat for {:g} s", n, o.timeout.count() / 1000.0), n == 0);
            }
            return;
          }
        }
      } while (!shared->sleep_for(o.interval));
    } catch (const ddp::Error& e) {
      if (!shared->is_stopped()) on_lost("lost node 0, which hosts the store (" + std::string(e.what()) + ")", true);
    }
  });
}

JobMonitor::~JobMonitor() {
  stop();
}

void JobMonitor::stop() {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->stopped = true;
    // A connection that a cut link left silent would keep the watcher parked: break it.
    if (shared_->watcher_store) shared_->watcher_store->interrupt();
  }
  shared_->cv.notify_all();
  if (watcher_.joinable()) watcher_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
}

}  // namespace ddp::launcher
