// See straggler_watch.hpp.
#include "launcher/agent/straggler_watch.hpp"

#include <algorithm>

#include "common/collective_progress.hpp"
#include "common/log.hpp"
#include "ddplaunch/common/error.hpp"
#include "launcher/agent/straggler_exchange.hpp"
#include "launcher/rdzv/round_keys.hpp"

namespace ddp::launcher {
namespace {

constexpr std::size_t kClockSamples = 8;
constexpr std::chrono::seconds kServerTimeout{5};

double unix_now() {
  return static_cast<double>(realtime_ns()) / 1e9;
}

}  // namespace

StragglerWatch::StragglerWatch(StragglerWatchOptions options, const ProgressTable* table, OnScores on_scores)
    : o_(std::move(options)),
      on_scores_(std::move(on_scores)),
      reader_(table, kServerTimeout),
      scorer_state_(o_.scoring) {}

StragglerWatch::~StragglerWatch() {
  join();
}

std::chrono::milliseconds StragglerWatch::interval() const {
  return std::max<std::chrono::milliseconds>(std::chrono::milliseconds(500), o_.scoring.window / 3);
}

void StragglerWatch::watch(StragglerRound round) {
  join();  // the last round's threads, stopped with it
  // The threads are not running: their state is ours to reset.
  stopping_ = false;
  scorer_state_.reset();
  previous_.clear();
  clock_samples_.clear();
  clock_n_ = 0;
  last_read_.reset();
  reader_.reset(round.workers);
  if (round.nnodes > 1 && round.node > 0) clock_ = std::thread([this, round] { clock_loop(round); });
  scorer_ = std::thread([this, round = std::move(round)] { score_loop(round); });
}

void StragglerWatch::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (clock_store_) clock_store_->interrupt();
    if (score_store_) score_store_->interrupt();
  }
  wake_.notify_all();
}

void StragglerWatch::join() {
  stop();
  if (scorer_.joinable()) scorer_.join();
  if (clock_.joinable()) clock_.join();
  std::lock_guard lock(mutex_);
  clock_store_.reset();
  score_store_.reset();
}

bool StragglerWatch::pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mutex_);
  return !wake_.wait_for(lock, d, [this] { return stopping_; });
}

// Connects for this thread (several nodes) into `slot`, where stop() can interrupt it; nullptr
// when alone, stopping, or the store cannot be reached.
std::shared_ptr<rendezvous::Store> StragglerWatch::connect_into(std::shared_ptr<rendezvous::Store>& slot) {
  std::shared_ptr<rendezvous::Store> job;
  try {
    job = o_.connect();
  } catch (const Error& e) {
    log::debug("straggler detection: no store connection: {}", e.what());
    return nullptr;
  }
  std::lock_guard lock(mutex_);
  if (stopping_) return nullptr;
  slot = job;
  return job;
}

void StragglerWatch::clock_loop(StragglerRound r) {
  const std::shared_ptr<rendezvous::Store> job = connect_into(clock_store_);
  if (!job) return;
  const std::string prefix = round_prefix(r.round);
  long long n = 0;
  try {
    while (!stopped()) n = answer_clock(*job, prefix, r.node, n, interval() * 3);
  } catch (const Error& e) {
    // Interrupted by stop(), or the store is gone: the round's monitor says so if it matters.
    if (!stopped()) log::debug("straggler detection: clock answers end: {}", e.what());
  }
}

bool StragglerWatch::stopped() const {
  std::lock_guard lock(mutex_);
  return stopping_;
}

void StragglerWatch::score_loop(StragglerRound r) {
  std::shared_ptr<rendezvous::Store> job;
  if (r.nnodes > 1) {
    job = connect_into(score_store_);
    if (!job) return;
  }
  while (pause(interval())) {
    try {
      tick(r, job.get());
    } catch (const Error& e) {
      if (!stopped()) log::debug("straggler detection: this round's scoring ends: {}", e.what());
      return;
    }
  }
}

void StragglerWatch::tick(const StragglerRound& r, rendezvous::Store* job) {
  const std::string prefix = round_prefix(r.round);
  std::vector<EntryTime> local = reader_.read();
  std::vector<StragglerChange> changes;
  if (!job || r.node == 0) {
    std::vector<EntryTime> all = std::move(local);
    if (job) {
      for (int k = 1; k < r.nnodes; ++k) {
        if (const auto s = measure_clock(*job, prefix, k, clock_n_, interval())) {
          auto& samples = clock_samples_[k];
          samples.emplace_back(s->round_trip_ns, s->offset_ns);
          if (samples.size() > kClockSamples) samples.erase(samples.begin());
        }
        const auto entries = read_entries(*job, prefix, k);
        if (!entries) continue;
        const auto& samples = clock_samples_[k];
        // No offset measured yet: their entries wait (a wrong clock would name a false straggler).
        if (samples.empty()) continue;
        const std::int64_t offset = std::min_element(samples.begin(), samples.end())->second;
        for (EntryTime e : entries->entries) {
          e.entered_ns -= offset;
          all.push_back(std::move(e));
        }
      }
      ++clock_n_;
    }
    scorer_state_.add(all);
    StragglerScores scores = scorer_state_.score(unix_now(), r.places, changes);
    if (job) publish_scores(*job, prefix, scores);
    on_scores_(r.round, std::move(scores), std::move(changes));
    return;
  }
  NodeEntries mine{r.node, o_.host, previous_};
  mine.entries.insert(mine.entries.end(), local.begin(), local.end());
  publish_entries(*job, prefix, mine);
  previous_ = std::move(local);
  const std::optional<StragglerScores> scores = read_scores(*job, prefix);
  if (!scores || (last_read_ && scores->scored_at == last_read_->scored_at)) return;
  StragglerScores view = node_view(*scores, r.node);
  changes = changes_between(last_read_, view, r.node);
  last_read_ = view;
  on_scores_(r.round, std::move(view), std::move(changes));
}

std::vector<StragglerChange> changes_between(const std::optional<StragglerScores>& before, const StragglerScores& after,
                                             int node) {
  std::vector<StragglerChange> out;
  const double now = after.scored_at;
  bool node_found = false;
  for (const NodeLateness& n : after.nodes) {
    if (n.node != node) continue;
    bool before_flag = false;
    if (before) {
      for (const NodeLateness& m : before->nodes)
        if (m.node == node) before_flag = m.straggler;
    }
    if (n.straggler != before_flag) {
      out.push_back({n.straggler, true, -1, n.node, n.host, n.lateness_ms, std::nullopt, n.since ? now - *n.since : 0});
      node_found = n.straggler;
    }
  }
  for (const RankLateness& r : after.ranks) {
    bool before_flag = false;
    std::optional<double> since;
    if (before) {
      for (const RankLateness& q : before->ranks) {
        if (q.rank == r.rank) {
          before_flag = q.straggler;
          since = q.since;
        }
      }
    }
    if (r.straggler == before_flag || (r.straggler && node_found)) continue;
    const std::optional<double> from = r.straggler ? r.since : since;
    out.push_back({r.straggler, false, r.rank, r.node, r.host, r.lateness_ms, r.step_fraction, from ? now - *from : 0});
  }
  return out;
}

}  // namespace ddp::launcher
