// JobMonitor's report of a silent peer, over an in-memory store. The first test's timeout is
// 1 ms, so the report comes at once and the test waits on it as an event (a future), never with a
// sleep; 1 ms also pins the message format: "0.001 s", which std::to_string(x).substr(0, 4)
// printed "0.00". The others put a StallingStore (below) between each node and the store, to
// hold up one node's reads or beats the way a loaded machine or a stalled store loop would, and
// check that a node is blamed only for its own silence.
#include "launcher/rdzv/job_monitor.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ddplaunch/rendezvous/memory_store.hpp"

namespace {

using ddp::launcher::JobMonitor;
using ddp::launcher::JobMonitorOptions;
using ddp::rendezvous::MemoryStore;
using ddp::rendezvous::Store;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A gate: pass() blocks while it is closed. Thread-safe.
class Gate {
 public:
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = false;
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }
  void pass() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = true;
};

// How the store treats one node's connections: its beats (SETs of heartbeat keys) and its reads
// of heartbeat keys pass their gates, reads also take `read_delay`; every beat is counted. Once
// armed, the next read that passes runs `after_read` (set it before arming), once.
struct NodeLink {
  Gate beats;
  Gate reads;
  std::atomic<int> read_delay_ms{0};
  std::atomic<int> beats_sent{0};
  std::function<void()> after_read;
  std::atomic<bool> armed{false};
};

// One connection of a node to the shared MemoryStore, through its NodeLink. Only heartbeat keys
// ("hb/" in them) are held up; the outcome watcher's keys pass at once.
class StallingStore final : public Store {
 public:
  StallingStore(std::shared_ptr<MemoryStore> store, std::shared_ptr<NodeLink> link)
      : store_(std::move(store)), link_(std::move(link)) {}

  void set(const std::string& key, const std::string& value) override {
    if (is_beat(key)) {
      link_->beats.pass();
      ++link_->beats_sent;
    }
    store_->set(key, value);
  }
  std::string get(const std::string& key, Duration timeout) override {
    if (is_beat(key)) read_pause();
    return store_->get(key, timeout);
  }
  bool check(const std::vector<std::string>& keys) override {
    if (is_beat(keys.front())) read_pause();
    return store_->check(keys);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return store_->add(key, delta); }
  std::string compare_set(const std::string& key, const std::string& expected, const std::string& desired) override {
    return store_->compare_set(key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys, Duration timeout) override { store_->wait(keys, timeout); }
  bool delete_key(const std::string& key) override { return store_->delete_key(key); }
  std::int64_t num_keys() override { return store_->num_keys(); }

 private:
  static bool is_beat(const std::string& key) { return key.find("hb/") != std::string::npos; }
  void read_pause() {
    link_->reads.pass();
    if (link_->armed.exchange(false)) link_->after_read();
    // A slow reply has no event to wait for: the fake store simply takes its time.
    std::this_thread::sleep_for(std::chrono::milliseconds(link_->read_delay_ms.load()));
  }

  std::shared_ptr<MemoryStore> store_;
  std::shared_ptr<NodeLink> link_;
};

// One node's monitor over `store` through `link`; a loss is recorded with when it came.
struct Node {
  struct Loss {
    std::string message;
    Clock::time_point when;
    ddp::launcher::NodeLoss loss;
  };
  std::mutex mutex;
  std::optional<Loss> loss;
  std::promise<void> lost;
  std::unique_ptr<JobMonitor> monitor;

  Node(const std::shared_ptr<MemoryStore>& store, const std::shared_ptr<NodeLink>& link, JobMonitorOptions o) {
    monitor = std::make_unique<JobMonitor>([store, link] { return std::make_shared<StallingStore>(store, link); },
                                           std::move(o), [](const std::string&) {},
                                           [this](const ddp::launcher::NodeLoss& l) {
                                             std::lock_guard<std::mutex> lock(mutex);
                                             if (loss) return;
                                             loss = Loss{l.message, Clock::now(), l};
                                             lost.set_value();
                                           });
  }
  std::optional<Loss> reported() {
    std::lock_guard<std::mutex> lock(mutex);
    return loss;
  }
};

JobMonitorOptions options(int node, std::chrono::milliseconds interval, std::chrono::milliseconds timeout) {
  JobMonitorOptions o;
  o.outcome_key = "r0/outcome";
  o.heartbeat_prefix = "r0/hb/";
  o.node = node;
  o.nnodes = 2;
  o.interval = interval;
  o.timeout = timeout;
  return o;
}

TEST_CASE("a silent peer is reported lost with the timeout in plain seconds", "[job_monitor]") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  JobMonitorOptions o;
  o.outcome_key = "r0/outcome";
  o.heartbeat_prefix = "r0/hb/";
  o.node = 0;
  o.nnodes = 2;  // node 1 never beats
  o.interval = 1ms;
  o.timeout = 1ms;
  std::promise<std::pair<std::string, bool>> lost;
  auto reported = lost.get_future();
  JobMonitor monitor([store] { return store; }, o, [](const std::string&) {},
                     [&lost](const ddp::launcher::NodeLoss& loss) {
                       lost.set_value({loss.message, loss.store_lost});
                     });

  REQUIRE(reported.wait_for(10s) == std::future_status::ready);
  const auto [message, store_lost] = reported.get();
  CHECK(message == "lost node 1: no heartbeat for 0.001 s");
  CHECK_FALSE(store_lost);
  // An in-memory store has no connection to break: setting the key ends the outcome watcher.
  store->set(o.outcome_key, "done");
  monitor.stop();
}

TEST_CASE("a node whose last beat says it left (the exit barrier) is never reported lost", "[job_monitor]") {
  // Node 1's workers succeeded and it left after --exit_barrier_timeout: its beat stands still
  // at kLeftBeat. Ten timeouts pass without a loss (a beat standing still otherwise is lost
  // after one: the test above).
  auto store = std::make_shared<MemoryStore>();
  store->set("r0/hb/1", std::string(ddp::launcher::kLeftBeat));
  std::promise<std::string> lost;
  auto reported = lost.get_future();
  JobMonitor monitor([store] { return store; }, options(0, 5ms, 20ms), [](const std::string&) {},
                     [&lost](const ddp::launcher::NodeLoss& loss) { lost.set_value(loss.message); });
  CHECK(reported.wait_for(200ms) == std::future_status::timeout);
  store->set("r0/outcome", "done");
  monitor.stop();
}

TEST_CASE("a node's beats keep their schedule while its reads of the others are slow", "[job_monitor]") {
  // Each read of the peer's beat takes 3 intervals (a store that answers slowly). The beats must
  // not wait for the reads: about one per interval, not one per (interval + reads).
  auto store = std::make_shared<MemoryStore>();
  auto slow = std::make_shared<NodeLink>();
  auto peer = std::make_shared<NodeLink>();
  slow->read_delay_ms = 150;
  Node a(store, slow, options(0, 50ms, 5000ms));
  Node b(store, peer, options(1, 50ms, 5000ms));
  const int before = slow->beats_sent.load();
  std::this_thread::sleep_for(1s);  // the test measures a rate over a span of time
  const int beats = slow->beats_sent.load() - before;
  CHECK(beats >= 12);  // 20 on time; with reads between beats it was at most 1000 / 350 = 3
  CHECK_FALSE(a.reported());
  CHECK_FALSE(b.reported());
  store->set("r0/outcome", "done");
}

TEST_CASE("a checker whose reads were held up is not fooled into blaming the peer", "[job_monitor]") {
  // The store stalls for both nodes for 3 timeouts, and when it resumes it answers node 0's read
  // before it takes in node 1's queued beat (a stalled loop serves its connections in any order).
  // Node 1 beat all along as far as it could; node 0 must not report it, since its own reads were
  // late by far more than the timeout.
  auto store = std::make_shared<MemoryStore>();
  auto link0 = std::make_shared<NodeLink>();
  auto link1 = std::make_shared<NodeLink>();
  Node a(store, link0, options(0, 40ms, 200ms));
  Node b(store, link1, options(1, 40ms, 200ms));
  std::this_thread::sleep_for(200ms);  // both beating and reading
  link0->reads.close();
  link1->reads.close();
  link1->beats.close();
  link0->beats.close();
  std::this_thread::sleep_for(600ms);  // the stall
  // Node 0's first read after the stall sees node 1's stale beat; only then does the store take
  // in node 1's (from within that read, so that a late test thread cannot widen the window).
  link0->after_read = [&link1] {
    link1->beats.open();
    link1->reads.open();
  };
  link0->armed = true;
  link0->reads.open();
  link0->beats.open();
  std::this_thread::sleep_for(400ms);  // two timeouts of normal running
  CHECK_FALSE(a.reported());
  CHECK_FALSE(b.reported());
  store->set("r0/outcome", "done");
}

TEST_CASE("a node whose beats stop is reported after about the timeout, with since when it was silent",
          "[job_monitor]") {
  // Node 1's launcher stops as a whole (kill -STOP): neither its beats nor its reads go on.
  auto store = std::make_shared<MemoryStore>();
  auto link0 = std::make_shared<NodeLink>();
  auto link1 = std::make_shared<NodeLink>();
  Node a(store, link0, options(0, 40ms, 200ms));
  Node b(store, link1, options(1, 40ms, 200ms));
  std::this_thread::sleep_for(200ms);
  link1->beats.close();
  link1->reads.close();
  const auto stopped = Clock::now();
  const auto stopped_wall = std::chrono::system_clock::now();
  REQUIRE(a.lost.get_future().wait_for(5s) == std::future_status::ready);
  const auto after = a.reported()->when - stopped;
  CHECK(a.reported()->message == "lost node 1: no heartbeat for 0.2 s");
  // The silent node and when its silence began: the read that first saw its last beat, which came
  // up to an interval before it stopped and was read up to an interval later; not when it was
  // found lost (a timeout, 200 ms, after that).
  CHECK(a.reported()->loss.node == 1);
  CHECK_FALSE(a.reported()->loss.store_lost);
  const auto since = a.reported()->loss.silent_since;
  CHECK(since >= stopped_wall - 150ms);
  CHECK(since <= stopped_wall + 100ms);
  CHECK(after >= 160ms);  // its last beat may have come up to an interval before it stopped
  CHECK(after < 1000ms);  // the timeout, one interval and the slack (100 ms), with room for a busy machine
  store->set("r0/outcome", "done");
  a.monitor->stop();
  link1->beats.open();
  link1->reads.open();
}

TEST_CASE("a node silent for two intervals but not yet lost is named by silent_before(), since when", "[job_monitor]") {
  auto store = std::make_shared<MemoryStore>();
  auto link0 = std::make_shared<NodeLink>();
  auto link1 = std::make_shared<NodeLink>();
  Node a(store, link0, options(0, 40ms, 5000ms));
  Node b(store, link1, options(1, 40ms, 5000ms));
  std::this_thread::sleep_for(200ms);  // both beating and reading
  link1->beats.close();                // node 1 stops answering
  const auto stopped_wall = std::chrono::system_clock::now();
  std::this_thread::sleep_for(400ms);  // ten intervals, far from the timeout: not lost
  const auto silent = a.monitor->silent_before(std::chrono::system_clock::now());
  REQUIRE(silent);
  CHECK(silent->node == 1);
  CHECK(silent->silent_since >= stopped_wall - 300ms);  // an interval, and a busy machine's delays
  CHECK(silent->silent_since <= stopped_wall + 300ms);
  CHECK(silent->message.rfind("node 1 stopped answering: no heartbeat for ", 0) == 0);
  CHECK(silent->message.find("(not yet lost: --heartbeat_timeout=5 s)") != std::string::npos);
  // A failure from before the silence began is not its consequence.
  CHECK_FALSE(a.monitor->silent_before(stopped_wall - 1s));
  CHECK_FALSE(a.reported());
  link1->beats.open();  // it answers again: a failure just after may still be of its silence
  std::this_thread::sleep_for(200ms);
  const auto back = a.monitor->silent_before(std::chrono::system_clock::now());
  REQUIRE(back);
  CHECK(back->silent_since == silent->silent_since);
  CHECK(back->message.find("(it came back before --heartbeat_timeout=5 s)") != std::string::npos);
  // but not one more than a heartbeat timeout after it came back.
  CHECK_FALSE(a.monitor->silent_before(std::chrono::system_clock::now() + 6s));
  store->set("r0/outcome", "done");
}

}  // namespace
