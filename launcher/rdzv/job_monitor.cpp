// Outcome watcher and heartbeats; see job_monitor.hpp.
#include "launcher/rdzv/job_monitor.hpp"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::launcher {

using Clock = std::chrono::steady_clock;

namespace {

// A node's last heartbeat: "" before its first one, or while the key holds only a value that a
// SignedStore rejects (which then counts as no beat). A reply slower than `wait` also gives "";
// the caller counts such a slow read as no evidence against the node.
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
//
// Two threads, two connections, so that neither waits for the other:
//   - the beater only sets this node's key every interval. A SET has no reply, so a beat never
//     waits for the store to answer anything, nor for the reads below (which, on one thread and
//     one connection, used to come between two beats: under load each read's round trip
//     stretched the beat period past the timeout);
//   - the checker (the thread that calls run()) reads the other nodes' beats every interval and
//     holds a node's silence against it only for the time it could itself observe: a round in
//     which the checker woke late, or in which the store answered late, proves nothing about the
//     peer (the same starvation or stall would have held up the peer's beat), so its span is not
//     counted. A node is lost once its beat stood still over more than the timeout of counted
//     time. On a machine that is not overloaded every round counts and a silent node is
//     reported after the timeout plus at most one interval.
class StoreHeartbeats : public NodeLiveness {
 public:
  // Connects the beats' connection (blocks; throws ddp::Error); run() connects the reads' one once
  // the first beat is on its way, so that a slow connect does not delay it.
  StoreHeartbeats(const StoreConnector& connect, const JobMonitorOptions& o)
      : connect_(connect), beats_(connect()), o_(o) {}

  std::optional<NodeLoss> run() override {
    std::thread beater([this] { beat(); });
    std::optional<NodeLoss> loss;
    std::optional<std::string> error;
    try {
      std::shared_ptr<rendezvous::Store> reads = connect_();
      bool interrupted = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        reads_ = reads;
        interrupted = interrupted_;
      }
      if (!interrupted) loss = check(*reads);
    } catch (const ddp::Error& e) {
      error = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      interrupted_ = true;
    }
    cv_.notify_all();
    beats_->interrupt();  // a SET held up by a full socket buffer
    beater.join();
    if (!error && !loss) error = beat_error_;  // the beater has ended: no lock needed
    if (error) throw ddp::Error("lost node 0, which hosts the store (" + *error + ")");
    return loss;
  }

  std::optional<NodeLoss> silent_before(std::chrono::system_clock::time_point t) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<NodeLoss> earliest;
    for (const auto& [n, s] : silences_) {
      const bool counts = s.stood_still >= 2 * o_.interval && s.since < t && (!s.until || t <= *s.until + o_.timeout);
      if (!counts || (earliest && earliest->silent_since <= s.since)) continue;
      const auto lasted = (s.until ? *s.until : t) - s.since;
      earliest = NodeLoss{fmt::format("node {} stopped answering: no heartbeat for {} ({} --heartbeat_timeout={})", n,
                                      format_seconds_fixed(lasted, 1),
                                      s.until ? "it came back before" : "not yet lost:", format_seconds(o_.timeout)),
                          n == 0, n, s.since};
    }
    return earliest;
  }

  // Also breaks both connections, so that a read waiting for the store ends at once.
  void interrupt() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      interrupted_ = true;
    }
    cv_.notify_all();
    beats_->interrupt();
    std::shared_ptr<rendezvous::Store> reads;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      reads = reads_;
    }
    if (reads) reads->interrupt();
  }

 private:
  // How late a round may be (waking, or the store's reply to its CHECK) and still count.
  Clock::duration slack() const { return std::max<Clock::duration>(o_.interval / 2, std::chrono::milliseconds(100)); }

  // The beater thread: sets this node's beat on a fixed schedule. A beat that is late (this
  // thread starved) goes out at once; missed ones are not sent in a burst.
  void beat() {
    const std::string key = o_.heartbeat_prefix + std::to_string(o_.node);
    std::int64_t sequence = 0;
    auto due = Clock::now();
    try {
      do {
        beats_->set(key, std::to_string(++sequence));
        due = std::max(due + o_.interval, Clock::now());
      } while (!sleep_until(due));
    } catch (const ddp::Error& e) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!interrupted_) beat_error_ = e.what();  // after interrupt(): the connection was broken on purpose
        interrupted_ = true;
      }
      cv_.notify_all();
    }
  }

  struct Peer {
    std::string beat;
    bool seen = false;
    Clock::time_point last_read;     // when the previous read of it was sent
    Clock::time_point changed;       // when the read that first saw this beat was sent
    Clock::duration silent{0};       // counted time the beat has stood still
    Clock::duration stood_still{0};  // all time it has stood still, counted or not
    bool told = false;               // the "not counted" line was logged for this silence
  };

  std::optional<NodeLoss> check(rendezvous::Store& reads) {
    std::map<int, Peer> peers;
    auto due = Clock::now();
    do {
      const Clock::duration woke_late = Clock::now() - due;
      for (int n = 0; n < (o_.watched > 0 ? o_.watched : o_.nnodes); ++n) {
        if (n == o_.node) continue;
        const auto sent = Clock::now();
        const bool answered = reads.check({o_.heartbeat_prefix + std::to_string(n)});
        const auto answer = Clock::now();
        const std::string beat =
            answered ? read_beat(reads, o_.heartbeat_prefix + std::to_string(n), o_.interval) : std::string();
        if (beat == kLeftBeat) continue;  // it left after its workers succeeded: not lost
        Peer& p = peers[n];
        const Clock::duration span = sent - p.last_read;
        if (!p.seen || beat != p.beat) {
          p = Peer{beat, true, sent, sent};
          note_silence(n, p);
          continue;
        }
        p.last_read = sent;
        p.stood_still += span;
        if (woke_late <= slack() && answer - sent <= slack()) {
          // This round woke on time and the store answered at once: the span since the previous
          // read counts, up to an interval plus the slack (a checker stalled between two prompt
          // reads counts no more).
          p.silent += std::min<Clock::duration>(span, o_.interval + slack());
        }
        if (p.stood_still > o_.timeout && p.silent <= o_.timeout && !p.told) {
          p.told = true;
          log::info(
              "node {}'s heartbeat has not changed for {}, but this launcher's own heartbeat checks were late "
              "for part of that time (woken late or answered late by the store): only {} count against it",
              n, format_seconds_fixed(p.stood_still, 1), format_seconds_fixed(p.silent, 1));
        }
        note_silence(n, p);
        if (p.silent > o_.timeout) {
          // Its last beat came at most one interval before the read that first saw it.
          const auto since = std::chrono::system_clock::now() -
                             std::chrono::duration_cast<std::chrono::system_clock::duration>(Clock::now() - p.changed);
          return NodeLoss{fmt::format("lost node {}: no heartbeat for {}", n, format_seconds(o_.timeout)), n == 0, n,
                          since};
        }
      }
      due = std::max(due + o_.interval, Clock::now());
    } while (!sleep_until(due));
    return std::nullopt;
  }

  // What silent_before() reads: peer `n`'s silence so far. One that lasted two intervals or more
  // is kept for a heartbeat timeout after its beat moved again (a rank may fail of it just after).
  void note_silence(int n, const Peer& p) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::system_clock::now();
    const bool long_enough = p.stood_still >= 2 * o_.interval;
    auto it = silences_.find(n);
    if (it != silences_.end() && it->second.until) {
      if (now - *it->second.until <= o_.timeout && !long_enough) return;  // an ended one, still kept
      silences_.erase(it);
      it = silences_.end();
    }
    if (p.stood_still == Clock::duration::zero()) {  // its beat moved
      if (it != silences_.end() && it->second.stood_still >= 2 * o_.interval) {
        it->second.until = now;
      } else if (it != silences_.end()) {
        silences_.erase(it);
      }
      return;
    }
    if (it != silences_.end()) {  // the same silence, longer: since when stays as first computed
      it->second.stood_still = p.stood_still;
      return;
    }
    const auto ago = std::chrono::duration_cast<std::chrono::system_clock::duration>(Clock::now() - p.changed);
    silences_[n] = Silence{now - ago, p.stood_still, std::nullopt};
  }

  // Sleeps until `t`; true when interrupted.
  bool sleep_until(Clock::time_point t) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_until(lock, t, [&] { return interrupted_; });
  }

  StoreConnector connect_;
  std::shared_ptr<rendezvous::Store> beats_;
  std::shared_ptr<rendezvous::Store> reads_;  // set by run(), under mutex_
  JobMonitorOptions o_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool interrupted_ = false;
  std::optional<std::string> beat_error_;
  struct Silence {
    std::chrono::system_clock::time_point since;                 // as NodeLoss::silent_since
    Clock::duration stood_still;                                 // as Peer::stood_still
    std::optional<std::chrono::system_clock::time_point> until;  // when its beat moved again
  };
  std::map<int, Silence> silences_;  // under mutex_ (the checker writes, silent_before() reads)
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
      if (!shared->is_stopped()) on_lost(NodeLoss{o.store_lost + " (" + std::string(e.what()) + ")", true});
    }
  });
  if (o.nnodes <= 1) return;
  liveness_ = std::thread([shared, connect, o, on_lost] {
    try {
      std::shared_ptr<NodeLiveness> liveness =
          o.liveness ? o.liveness(o) : std::make_unique<StoreHeartbeats>(connect, o);
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        if (shared->stopped) return;
        shared->liveness = liveness;
      }
      const std::optional<NodeLoss> loss = liveness->run();
      if (loss && !shared->is_stopped()) on_lost(*loss);
    } catch (const ddp::Error& e) {
      // Its first connection failed (the store's host stopped before this node's heartbeats
      // began): said as the watcher says it.
      if (!shared->is_stopped()) on_lost(NodeLoss{o.store_lost + " (" + std::string(e.what()) + ")", true});
    }
  });
}

std::optional<NodeLoss> JobMonitor::silent_before(std::chrono::system_clock::time_point t) const {
  std::shared_ptr<NodeLiveness> liveness;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    liveness = shared_->liveness;
  }
  return liveness ? liveness->silent_before(t) : std::nullopt;
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
