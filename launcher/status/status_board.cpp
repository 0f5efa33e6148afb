// See status_board.hpp.
#include "launcher/status/status_board.hpp"

#include <unistd.h>

#include <algorithm>
#include <type_traits>
#include <variant>

namespace ddp::launcher {

StatusBoard::StatusBoard() {
  s_.pid = static_cast<int>(::getpid());
  s_.started_ns = realtime_ns();
}

void StatusBoard::identify(StatusIdentity id, ProgressSources sources) {
  std::lock_guard lock(mutex_);
  s_.id = std::move(id);
  sources_ = sources;
}

void StatusBoard::joining(int round, int restarts) {
  std::lock_guard lock(mutex_);
  s_.state = "joining";
  s_.round = round;
  s_.restarts = restarts;
  s_.ranks.clear();
  s_.hang = "none";
  s_.hang_summary.clear();
  s_.hang_ns = 0;
  s_.stop_code = 0;
  s_.stop_origin = -1;
}

void StatusBoard::on_event(const RoundEvent& event) {
  std::visit(
      [this](const auto& e) {
        using E = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<E, RoundJoining>) {
          joining(e.round, e.restarts);
        } else if constexpr (std::is_same_v<E, RoundJoined>) {
          joined(e.view.round, e.view.ranks, e.view.group_rank, e.view.restarts);
        } else if constexpr (std::is_same_v<E, WorkersStarted>) {
          started(e.specs, e.pids);
        } else if constexpr (std::is_same_v<E, WorkerExited>) {
          exited(e.outcome.worker);
        } else if constexpr (std::is_same_v<E, RoundStopping>) {
          stopping(e.cause.code, e.cause.origin_node);
        } else if constexpr (std::is_same_v<E, HangFound>) {
          hang(e.collective, e.text);
        } else if constexpr (std::is_same_v<E, RoundFailed>) {
          failed(e.failed);
        } else if constexpr (std::is_same_v<E, JobEnded>) {
          ended(e.exit_code);
        } else if constexpr (std::is_same_v<E, StragglersScored>) {
          stragglers(e.scores);
        }
      },
      event);
}

void StatusBoard::stragglers(const StragglerScores& scores) {
  std::lock_guard lock(mutex_);
  s_.stragglers = scores;
}

void StatusBoard::joined(int round, const RankMap& ranks, int group_rank, int restarts) {
  std::lock_guard lock(mutex_);
  s_.round = round;
  s_.restarts = restarts;
  s_.group_rank = group_rank;
  s_.world_size = ranks.world_size();
  s_.nodes.clear();
  for (const NodeInfo& n : ranks.nodes()) {
    s_.nodes.push_back(NodeStatus{n.node_rank, n.host, ranks.base_rank(n.node_rank), n.standby ? 0 : n.nproc, n.standby});
  }
}

void StatusBoard::started(const std::vector<WorkerSpec>& specs, const std::vector<int>& pids) {
  std::lock_guard lock(mutex_);
  s_.state = "running";
  s_.ranks.clear();
  for (std::size_t i = 0; i < specs.size() && i < pids.size(); ++i) {
    RankStatus r;
    r.rank = specs[i].rank;
    r.local_rank = specs[i].local_rank;
    r.pid = pids[i];
    r.slot = static_cast<int>(i);
    r.state = "running";
    s_.ranks.push_back(r);
  }
}

void StatusBoard::exited(const WorkerResult& w) {
  std::lock_guard lock(mutex_);
  const auto it = std::find_if(s_.ranks.begin(), s_.ranks.end(), [&w](const RankStatus& r) { return r.pid == w.pid; });
  if (it == s_.ranks.end()) return;  // a previous round's worker, reaped late
  it->state = "exited";
  it->exit_code = w.exit_code;
  it->signal = w.term_signal;
  it->exited_ns = realtime_ns();
}

void StatusBoard::stopping(int code, int origin_node) {
  std::lock_guard lock(mutex_);
  s_.state = "stopping";
  s_.stop_code = code;
  s_.stop_origin = origin_node;
  for (RankStatus& r : s_.ranks) {
    if (r.state == "running") r.state = "stopping";
  }
}

void StatusBoard::hang(bool collective, const std::string& text) {
  std::lock_guard lock(mutex_);
  s_.hang = collective ? "collective" : "suspected";
  s_.hang_summary = text.substr(0, text.find('\n'));
  s_.hang_ns = realtime_ns();
}

void StatusBoard::failed(const FailedRound& round) {
  const RootCause& root = round.root;
  RoundCause c{round.round, round.code, kind_name(root.kind), root.node, root.host, -1, 0, 0, "", 0};
  if (root.kind == RootCause::Kind::Worker) {
    c.rank = root.rank;
    c.exit_code = root.exit_code;
    c.signal = root.signal;
    c.error_type = root.error_type;
  }
  if (root.time.time_since_epoch().count() != 0)
    c.time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(root.time.time_since_epoch()).count();
  std::lock_guard lock(mutex_);
  s_.causes.push_back(std::move(c));
}

void StatusBoard::ended(int exit_code) {
  std::lock_guard lock(mutex_);
  s_.ended = exit_code;
}

StatusSnapshot StatusBoard::snapshot() const {
  StatusSnapshot copy;
  ProgressSources sources;
  {
    std::lock_guard lock(mutex_);
    copy = s_;
    sources = sources_;
  }
  // Outside the lock: the slots are seqlocks, safe to read from any thread; the polls have their
  // own mutex.
  if (const ProgressTable* table = sources.collectives) {
    for (int slot = 0; slot < table->slots(); ++slot) copy.progress.push_back(table->read(slot));
  }
  if (sources.flight_recorders != nullptr) copy.flight_recorders = sources.flight_recorders->progress();
  copy.now_ns = realtime_ns();
  return copy;
}

}  // namespace ddp::launcher
