// See watch.hpp.
#include "launcher/watch/fr/watch.hpp"

#include <algorithm>
#include <fstream>
#include <future>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "common/collective_progress.hpp"
#include "common/log.hpp"
#include "launcher/watch/fr/recorder.hpp"
#include "launcher/watch/probe/proc_stat.hpp"
#include "launcher/watch/probe/worker_server.hpp"

namespace ddp::launcher {
namespace {

// Folds a rank's polled status into its progress, keeping the time of the last change.
void note_progress(FrProgress& p, const FrSnapshot& status) {
  FrProgress now;
  for (const auto& [id, g] : status.groups) {
    now.completed += std::max(0LL, g.last_completed);
    if (g.last_enqueued > g.last_completed && now.waiting_in.empty()) {
      now.waiting_in = fmt::format("#{} in group {}", g.last_enqueued, g.name.empty() ? g.id : g.name);
      now.group_id = id;
      now.seq = g.last_enqueued;
    }
  }
  if (now.waiting_in == p.waiting_in) now.op = p.op;  // the same wait: its name holds
  if (now.completed == p.completed && now.waiting_in == p.waiting_in && p.changed_ns != 0) return;
  now.changed_ns = realtime_ns();
  p = now;
}

// Names the op `p` waits in from a whole record of the rank, as --dump_stacks words it
// ("gloo:barrier #2"), when it is not named yet and the record holds it.
void name_from(FrProgress& p, const FrSnapshot& record) {
  if (p.waiting_in.empty() || !p.op.empty()) return;
  for (const FrEntry& e : record.entries) {
    if (!e.p2p && e.seq == p.seq && e.group_id == p.group_id) p.op = fmt::format("{} #{}", e.op, p.seq);
  }
}

using std::chrono::milliseconds;

// A status is small and the worker answers it without Python work beyond the dump: 2 s is
// already a stuck worker (its interpreter holding the GIL in a long C call).
constexpr milliseconds kStatusTimeout{2000};
// The whole record is JSON of up to 2000 entries (~40 ms in the worker).
constexpr milliseconds kFullTimeout{3000};
// A dump also writes torch's pickle; unpickling it may import much of torch the first time.
constexpr milliseconds kDumpTimeout{10000};

std::string read_note(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

FlightRecorderWatch::FlightRecorderWatch(FlightRecorderWatchOptions options, OnSuspect on_suspect)
    : o_(std::move(options)), on_suspect_(std::move(on_suspect)) {}

FlightRecorderWatch::~FlightRecorderWatch() {
  stop();
}

milliseconds FlightRecorderWatch::period() const {
  if (o_.hang_timeout.count() <= 0) return std::chrono::seconds(2);
  return std::clamp<milliseconds>(o_.hang_timeout / 10, milliseconds(200), std::chrono::seconds(2));
}

std::map<int, FrProgress> FlightRecorderWatch::progress() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return progress_;
}

void FlightRecorderWatch::watch(std::vector<FrWorker> workers, int node) {
  stop();
  std::lock_guard<std::mutex> lock(mutex_);
  workers_ = std::move(workers);
  node_ = node;
  waiting_.clear();
  checked_.clear();
  last_full_.clear();
  last_status_.clear();
  progress_.clear();
  answering_ = false;
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

long long FlightRecorderWatch::most_completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  long long most = -1;
  for (const auto& [rank, status] : last_status_) {
    for (const auto& [id, g] : status.groups) most = std::max(most, g.last_completed);
  }
  return most;
}

void FlightRecorderWatch::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void FlightRecorderWatch::recheck() {
  std::lock_guard<std::mutex> lock(mutex_);
  checked_.clear();
}

bool FlightRecorderWatch::answering() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return answering_;
}

std::string FlightRecorderWatch::unavailable() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return unavailable_;
}

void FlightRecorderWatch::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period(), [this] { return stopping_; })) {
    const std::vector<FrWorker> workers = workers_;
    lock.unlock();
    poll(workers);
    lock.lock();
  }
}

void FlightRecorderWatch::poll(const std::vector<FrWorker>& workers) {
  milliseconds longest{0};
  std::vector<std::pair<std::string, long long>> open;  // the longest waiters' (group, #N)
  std::vector<FrWorker> unnamed;                        // waiting as at the last poll, its op not named
  for (const FrWorker& w : workers) {
    const WorkerServerReply reply = ask_worker_server(w.socket, "ddplaunch_fr_status", kStatusTimeout);
    // Seen now, not when the poll began: a slow answer before this one must not make a wait
    // look older than it is.
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex_);
    if (!reply.ok) {
      // No server (yet): the script has not imported torch.distributed, or this torch has none.
      if (unavailable_.empty()) unavailable_ = read_note(w.socket + ".unavailable");
      continue;
    }
    const FrSnapshot status = parse_fr_status(reply.body);
    if (!status.valid) {
      log::debug("flight recorder: rank {}'s status is unreadable: {}", w.rank, status.error);
      continue;
    }
    answering_ = true;
    last_status_[w.rank] = status;
    FrProgress& progress = progress_[w.rank];
    const std::string was_in = progress.waiting_in;
    note_progress(progress, status);
    if (!progress.waiting_in.empty() && progress.waiting_in == was_in && progress.op.empty()) unnamed.push_back(w);
    for (const auto& [id, g] : status.groups) {
      const auto key = std::make_pair(w.rank, id);
      if (g.last_enqueued <= g.last_completed) {
        waiting_.erase(key);
        continue;
      }
      auto [it, fresh] = waiting_.try_emplace(key, Wait{g.last_enqueued, now});
      if (!fresh && it->second.seq != g.last_enqueued) it->second = Wait{g.last_enqueued, now};
      const auto waited = std::chrono::duration_cast<milliseconds>(now - it->second.since);
      if (waited > longest) longest = waited;
      open.emplace_back(id, it->second.seq);
    }
  }
  // The checks due: the desync check first, then the hang check, each once per (group, #N).
  std::vector<milliseconds> delays{
      std::min(o_.desync_after, o_.hang_timeout.count() > 0 ? o_.hang_timeout : o_.desync_after)};
  if (o_.hang_timeout.count() > 0 && o_.hang_timeout != delays.front()) delays.push_back(o_.hang_timeout);
  for (const milliseconds delay : delays) {
    if (longest < delay) continue;
    bool due = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [group, seq] : open) due = checked_.emplace(group, seq, delay.count()).second || due;
    }
    if (!due) continue;
    log::debug("flight recorder: a rank has waited {} ms in one collective: checking the records", longest.count());
    on_suspect_(collect(false), delay);
  }
  // After the checks, which they must not delay (and whose records may have named them already).
  for (const FrWorker& w : unnamed) name_op(w);
}

void FlightRecorderWatch::name_op(const FrWorker& w) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!progress_[w.rank].op.empty()) return;  // named by a check's records meanwhile
  }
  const WorkerServerReply reply = ask_worker_server(w.socket, "ddplaunch_fr", kFullTimeout);
  if (!reply.ok) return;
  const FrSnapshot record = parse_fr_trace(reply.body);
  std::lock_guard<std::mutex> lock(mutex_);
  name_from(progress_[w.rank], record);
}

RankFr FlightRecorderWatch::ask_full(const FrWorker& w, bool dump) {
  RankFr r;
  r.rank = w.rank;
  r.node = node_;
  r.host = o_.host;
  r.pid = w.pid;
  r.taken_ns = realtime_ns();
  const WorkerServerReply fr = dump ? ask_worker_server(w.socket, "ddplaunch_fr_dump", kDumpTimeout)
                                    : ask_worker_server(w.socket, "ddplaunch_fr", kFullTimeout);
  if (fr.ok) r.fr = parse_fr_trace(fr.body);
  const WorkerServerReply tb = ask_worker_server(w.socket, "dump_traceback", kStatusTimeout);
  if (tb.ok) r.traceback = tb.body;
  r.reachable = fr.ok && r.fr.valid;
  if (!r.reachable) {
    r.why_not = fr.ok ? "its Flight Recorder could not be read: " + r.fr.error : fr.error;
    r.why_not += std::string("; process: ") + describe_state(read_proc_stat(w.pid).state);
  }
  return r;
}

std::vector<RankFr> FlightRecorderWatch::collect(bool dump) {
  std::vector<FrWorker> workers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    workers = workers_;
  }
  std::vector<std::future<RankFr>> asked;
  for (const FrWorker& w : workers)
    asked.push_back(std::async(std::launch::async, [this, w, dump] { return ask_full(w, dump); }));
  std::vector<RankFr> out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& f : asked) {
    RankFr r = f.get();
    if (r.reachable) {
      last_full_[r.rank] = r;
      if (const auto p = progress_.find(r.rank); p != progress_.end()) name_from(p->second, r.fr);
    } else if (const auto kept = last_full_.find(r.rank); kept != last_full_.end()) {
      // Gone (it died, maybe of this very collective's timeout): what it said last, as of then.
      const std::string why = r.why_not;
      const std::string traceback = r.traceback;
      r = kept->second;
      r.reachable = false;
      r.traceback = traceback;
      r.why_not = "as of its last answer; it no longer answers: " + why;
    } else if (const auto status = last_status_.find(r.rank); status != last_status_.end()) {
      r.fr = status->second;  // its groups' counters, without entries
      r.why_not = "as of its last answer; it no longer answers: " + r.why_not;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ddp::launcher
