// Outcome watcher and heartbeats; see job_monitor.hpp.
#include "launcher/rdzv/job_monitor.hpp"

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

// The default liveness: heartbeat values in the job's store. Heartbeats are inherently periodic:
// the store has no event for "a peer went silent". Each is a value (a sequence number), not a
// counter, so that a SignedStore can sign it.
class StoreHeartbeats : public NodeLiveness {
 public:
  StoreHeartbeats(std::shared_ptr<rendezvous::Store> store, const JobMonitorOptions& o)
      : store_(std::move(store)), o_(o) {}

  std::optional<NodeLoss> run() override {
    std::map<int, std::pair<std::string, Clock::time_point>> seen;
    std::int64_t sequence = 0;
    try {
      do {
        store_->set(o_.heartbeat_prefix + std::to_string(o_.node), std::to_string(++sequence));
        const auto now = Clock::now();
        for (int n = 0; n < o_.nnodes; ++n) {
          if (n == o_.node) continue;
          const std::string beat = read_beat(*store_, o_.heartbeat_prefix + std::to_string(n), o_.interval);
          auto& s = seen[n];
          if (s.second == Clock::time_point{} || beat != s.first) {
            s = {beat, now};
          } else if (now - s.second > o_.timeout) {
            return NodeLoss{fmt::format("lost node {}: no heartbeat for {:g} s", n, o_.timeout.count() / 1000.0),
                            n == 0};
          }
        }
      } while (!sleep_for(o_.interval));
    } catch (const ddp::Error& e) {
      throw ddp::Error("lost node 0, which hosts the store (" + std::string(e.what()) + ")");
    }
    return std::nullopt;
  }

  void interrupt() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      interrupted_ = true;
    }
    cv_.notify_all();
  }

 private:
  // Sleeps up to `d`; true when interrupted.
  bool sleep_for(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, d, [&] { return interrupted_; });
  }

  std::shared_ptr<rendezvous::Store> store_;
  JobMonitorOptions o_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool interrupted_ = false;
};
}  // namespace

struct JobMonitor::Shared {
  std::mutex mutex;
  bool stopped = false;
  std::shared_ptr<rendezvous::Store> watcher_store;
  std::shared_ptr<NodeLiveness> liveness;

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
      if (!shared->is_stopped()) on_lost(o.store_lost + " (" + std::string(e.what()) + ")", true);
    }
  });
  if (o.nnodes <= 1) return;
  liveness_ = std::thread([shared, connect, o, on_lost] {
    try {
      std::shared_ptr<NodeLiveness> liveness =
          o.liveness ? o.liveness(o) : std::make_unique<StoreHeartbeats>(connect(), o);
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        if (shared->stopped) return;
        shared->liveness = liveness;
      }
      const std::optional<NodeLoss> loss = liveness->run();
      if (loss && !shared->is_stopped()) on_lost(loss->message, loss->store_lost);
    } catch (const ddp::Error& e) {
      if (!shared->is_stopped()) on_lost(e.what(), true);
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
    if (shared_->liveness) shared_->liveness->interrupt();
  }
  if (watcher_.joinable()) watcher_.join();
  if (liveness_.joinable()) liveness_.join();
}

}  // namespace ddp::launcher
