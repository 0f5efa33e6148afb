// See hang_watch.hpp.
#include "launcher/watch/hang_watch.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "common/format_duration.hpp"
#include "common/rank_ranges.hpp"
#include "launcher/watch/probe/proc_stat.hpp"
#include "launcher/watch/stack_dump.hpp"

namespace ddp::launcher {

HangWatch::HangWatch(boost::asio::io_context& io, HangWatchOptions options,
                     std::function<void(const HangReport&)> on_report)
    : io_(io),
      o_(std::move(options)),
      on_report_(std::move(on_report)),
      timer_(io),
      ticks_per_second_(static_cast<double>(::sysconf(_SC_CLK_TCK))) {}

void HangWatch::watch(std::map<int, WatchedWorker> workers, int round, int node) {
  workers_ = std::move(workers);
  round_ = round;
  node_ = node;
  cpu_.clear();
  for (const auto& [pid, w] : workers_) cpu_[pid] = 0;
  restart_window(std::chrono::steady_clock::now());
  reported_ = false;
  schedule();
}

void HangWatch::restart_window(std::chrono::steady_clock::time_point now) {
  idle_since_ = now;
  for (auto& [pid, ticks] : cpu_) ticks = read_proc_stat(pid).cpu_ticks;
}

void HangWatch::forget(int pid) {
  workers_.erase(pid);
  cpu_.erase(pid);
}

void HangWatch::stop() {
  workers_.clear();
  cpu_.clear();
  timer_.cancel();
}

std::vector<RankProgress> HangWatch::snapshot() const {
  if (o_.progress == nullptr) return {};
  return read_progress(*o_.progress, workers_, node_, o_.host);
}

void HangWatch::schedule() {
  // Ten samples per timeout, between 0.1 s and 2 s apart: a hang is reported within a tenth of
  // the timeout after it has lasted that long.
  const auto every =
      std::clamp<std::chrono::milliseconds>(o_.timeout / 10, std::chrono::milliseconds(100), std::chrono::seconds(2));
  timer_.expires_after(every);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) sample();
  });
}

bool HangWatch::collective_hang(std::int64_t now_ns) const {
  const std::int64_t timeout_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(o_.timeout).count();
  bool waiting_long = false;
  std::int64_t last_completion = 0;
  for (const RankProgress& r : snapshot()) {
    const CollectiveProgress& p = r.progress;
    if (!p.attached()) continue;
    last_completion = std::max(last_completion, p.completed_ns);
    if (p.inside() && now_ns - p.entered_ns >= timeout_ns) waiting_long = true;
  }
  return waiting_long && now_ns - last_completion >= timeout_ns;
}

std::string HangWatch::take_stacks() const {
  std::map<int, int> ranks;
  for (const auto& [pid, w] : workers_) ranks[pid] = w.rank;
  StackDumpOptions options;
  options.python = o_.python;
  options.timeout = std::chrono::seconds(3);
  if (o_.sockets) options.sockets = o_.sockets();
  options.no_server = o_.no_server;
  return dump_stacks(ranks, options).text;
}

void HangWatch::sample() {
  if (workers_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  // Busy: a worker used more than 5% of a core since the window began. A rank waiting for a peer
  // is not at 0 (gloo's loop thread wakes now and then: about 0.5% of a core).
  const double window_ticks = std::chrono::duration<double>(now - idle_since_).count() * ticks_per_second_;
  bool busy = false;
  bool publishing = false;
  for (const auto& [pid, ticks] : cpu_) {
    if (static_cast<double>(read_proc_stat(pid).cpu_ticks - ticks) > 0.05 * window_ticks + 1) busy = true;
  }
  for (const RankProgress& r : snapshot()) publishing = publishing || r.progress.attached();
  if (o_.exact && o_.exact()) {
    restart_window(now);  // the Flight Recorder's watch says it all
  } else if (publishing) {
    // The runtime says what each rank does: no guessing from CPU time.
    if (collective_hang(realtime_ns())) {
      HangReport report;
      report.collective = true;
      report.text = fmt::format(
          "hang: a rank has waited in a collective for {} and no collective completed on "
          "node {} in that time (--hang_timeout)",
          format_seconds(o_.timeout), node_);
      report.progress = snapshot();
      report.stacks = take_stacks();
      return on_report_(report);  // once per round: the job fails on it
    }
  } else if (busy) {
    restart_window(now);
    reported_ = false;
  } else if (!reported_ && now - idle_since_ >= o_.timeout) {
    report_suspected(now);
  }
  schedule();
}

void HangWatch::report_suspected(std::chrono::steady_clock::time_point now) {
  reported_ = true;
  std::vector<int> ranks;
  std::string states;
  for (const auto& [pid, w] : workers_) {
    ranks.push_back(w.rank);
    states += fmt::format("  rank {} (pid {}): {}\n", w.rank, pid, describe_state(read_proc_stat(pid).state));
  }
  HangReport report;
  report.stacks = take_stacks();
  report.stacks_file = fmt::format(
      "{}/hang_round{}_{}.txt", o_.run_dir, round_,
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  if (!(std::ofstream(report.stacks_file) << report.stacks)) report.stacks_file.clear();
  const std::string why = o_.unavailable ? o_.unavailable() : "";
  report.text = fmt::format(
      "suspected hang: {} on this node used almost no CPU time (under 5% of a core) for {} (a heuristic: "
      "the job goes on){}\n{}"
      "stacks{}:\n{}",
      ranks_phrase(ranks), format_seconds(now - idle_since_),
      why.empty()
          ? ""
          : fmt::format(
                "; exact hang reports need PyTorch's Flight Recorder and worker server, which these workers lack: {}",
                why),
      states, report.stacks_file.empty() ? "" : " (also in " + report.stacks_file + ")", report.stacks);
  // Taking stacks costs the workers a little CPU (ptrace stops): that is not progress.
  restart_window(std::chrono::steady_clock::now());
  on_report_(report);
}

}  // namespace ddp::launcher
