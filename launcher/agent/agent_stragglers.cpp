// The agent's part of straggler detection (docs/stragglers.md): the watch made with the node
// (straggler_watch.hpp), started with each round's workers and stopped with the round, and its
// scores, on the loop, to the console (one line per straggler found or recovered) and to the
// round's listeners (the live status, the event log and the summary). Part of the Agent class.
#include <fmt/format.h>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "launcher/agent/agent.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddp::launcher {

void Agent::prepare_stragglers() {
  StragglerScores none;
  none.mode = c_.stragglers;
  none.window_s = std::chrono::duration<double>(c_.straggler_window).count();
  status_board_.stragglers(none);
  if (c_.stragglers == StragglerMode::Off) return;
  StragglerWatchOptions so;
  so.scoring.mode = c_.stragglers;
  so.scoring.window = c_.straggler_window;
  so.scoring.min_ms = c_.straggler_min_ms;
  so.scoring.min_fraction = c_.straggler_fraction;
  so.host = eff_.host;
  so.connect = [this] { return connect_job(); };
  stragglers_ = std::make_unique<StragglerWatch>(
      std::move(so), &watch_->progress_table(),
      [this](int round, StragglerScores scores, std::vector<StragglerChange> changes) {
        post_for_round(round, [this, scores = std::move(scores), changes = std::move(changes)] {
          on_stragglers(scores, changes);
        });
      });
}

void Agent::watch_stragglers(const std::vector<WorkerSpec>& specs, const std::vector<int>& pids) {
  if (!stragglers_) return;
  StragglerRound r;
  r.round = view_.round;
  r.node = view_.group_rank;
  r.nnodes = view_.active_nodes();
  for (const NodeInfo& n : view_.ranks.nodes()) {
    if (n.standby) continue;
    for (int i = 0; i < n.nproc; ++i) r.places[view_.ranks.base_rank(n.node_rank) + i] = RankPlace{n.node_rank, n.host};
  }
  for (std::size_t i = 0; i < specs.size() && i < pids.size(); ++i) {
    const std::string socket =
        python_hook_dir_.empty() ? std::string() : worker_socket_path(eff_.log_root, static_cast<int>(i));
    r.workers.push_back({specs[i].rank, pids[i], static_cast<int>(i), socket});
  }
  // The watch's threads start after its first interval, when there can be something to score: a
  // job that ends sooner (a launch, a failure at start) pays no thread and no join at its end.
  straggler_timer_.expires_after(stragglers_->interval());
  straggler_timer_.async_wait([this, r = std::move(r)](const boost::system::error_code& ec) mutable {
    if (ec || r.round != view_.round || !status_.stoppable()) return;
    stragglers_->watch(std::move(r));
  });
}

HealthGate Agent::straggler_gate(HealthGate inner) {
  if (c_.stragglers != StragglerMode::Exclude && c_.stragglers != StragglerMode::Replace) return inner;
  return [inner = std::move(inner), excluded = straggler_excluded_](
             int round, const CancelEvent& cancel) -> std::optional<SelfExclusion> {
    if (std::optional<std::string> why = excluded->take()) return SelfExclusion{*why, "ddplaunch: " + *why};
    return inner ? inner(round, cancel) : std::nullopt;
  };
}

void Agent::stop_stragglers() {
  straggler_timer_.cancel();  // a start already queued sees the round stopping (watch_stragglers)
  if (stragglers_) stragglers_->stop();
}

void Agent::on_stragglers(const StragglerScores& scores, const std::vector<StragglerChange>& changes) {
  for (const StragglerChange& c : changes) {
    if (c.found) {
      log::warning("straggler: {} (docs/stragglers.md)", describe(c));
    } else {
      log::info("straggler gone: {}", describe(c));
    }
  }
  events_.emit(StragglersScored{view_, scores, changes});
  act_on_stragglers(scores);
}

void Agent::act_on_stragglers(const StragglerScores& scores) {
  if (c_.stragglers != StragglerMode::Exclude && c_.stragglers != StragglerMode::Replace) return;
  const NodeLateness* me = nullptr;
  for (const NodeLateness& n : scores.nodes) {
    if (n.node == view_.group_rank) me = &n;
  }
  if (!me || !me->straggler || !me->since) {
    straggler_excluded_->set(std::nullopt);
    return;
  }
  const double late_for = scores.scored_at - *me->since;
  if (view_.group_rank == 0) {
    // Node 0 hosts the store the others meet in: the job cannot go on without it.
    if (!straggler_host_noted_) log::info("straggler: node 0 stays in the job: it hosts the store the nodes meet in");
    straggler_host_noted_ = true;
    return;
  }
  const std::string why =
      fmt::format("node {} ({}) excluded itself: a straggler for {:.0f} s, {:.0f} ms late (--stragglers={})",
                  view_.group_rank, eff_.host, late_for, me->lateness_ms, to_string(c_.stragglers));
  straggler_excluded_->set(why);
  const double after = std::chrono::duration<double>(c_.straggler_replace_after).count();
  if (c_.stragglers != StragglerMode::Replace || late_for < after || !status_.stoppable()) return;
  const std::string summary = fmt::format(
      "node {} ({}) has entered collectives {:.0f} ms late for {:.0f} s (--straggler_replace_after={:.0f}): "
      "restarting the round with a spare in its place (--stragglers=replace)",
      view_.group_rank, eff_.host, me->lateness_ms, late_for, after);
  log::warning("straggler: {}", summary);
  stop_round(Outcome::failure(kExitFailure, summary, view_.group_rank), true, true);
}

}  // namespace ddp::launcher
