// See hang_watch.hpp.
#include "launcher/hang_watch.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "launcher/round_report.hpp"
#include "launcher/stack_dump.hpp"

namespace ddp::launcher {
namespace {

struct ProcStat {
  char state = '?';
  long long cpu_ticks = -1;  // utime + stime; -1: gone
};

ProcStat read_stat(int pid) {
  ProcStat s;
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(in, line)) return s;
  const std::size_t close = line.rfind(')');  // the command may hold spaces and parentheses
  if (close == std::string::npos) return s;
  std::istringstream rest(line.substr(close + 2));
  std::vector<std::string> f;
  for (std::string x; rest >> x && f.size() < 13;) f.push_back(x);
  if (f.size() < 13) return s;
  s.state = f[0].empty() ? '?' : f[0][0];
  // Fields 14 and 15 of proc(5) (utime, stime) are 11 and 12 after the state (field 3).
  s.cpu_ticks = std::stoll(f[11]) + std::stoll(f[12]);
  return s;
}

const char* describe_state(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping (waiting for an event)";
    case 'D':
      return "in uninterruptible I/O";
    case 'T':
      return "stopped (SIGSTOP or a job-control signal)";
    case 't':
      return "stopped by a debugger";
    case 'Z':
      return "exited";
    default:
      return "in an unknown state";
  }
}

}  // namespace

HangWatch::HangWatch(boost::asio::io_context& io, HangWatchOptions options,
                     std::function<void(const HangReport&)> on_report)
    : io_(io), o_(std::move(options)), on_report_(std::move(on_report)), timer_(io) {}

void HangWatch::watch(std::map<int, int> ranks_by_pid, int round) {
  ranks_ = std::move(ranks_by_pid);
  round_ = round;
  cpu_.clear();
  for (const auto& [pid, rank] : ranks_) cpu_[pid] = read_stat(pid).cpu_ticks;
  idle_since_ = std::chrono::steady_clock::now();
  reported_ = false;
  schedule();
}

void HangWatch::forget(int pid) {
  ranks_.erase(pid);
  cpu_.erase(pid);
}

void HangWatch::stop() {
  ranks_.clear();
  cpu_.clear();
  timer_.cancel();
}

void HangWatch::schedule() {
  // Five samples per timeout, between 0.2 s and 5 s apart.
  const auto every =
      std::clamp<std::chrono::milliseconds>(o_.timeout / 5, std::chrono::milliseconds(200), std::chrono::seconds(5));
  timer_.expires_after(every);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) sample();
  });
}

void HangWatch::sample() {
  if (ranks_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  bool busy = false;
  std::map<int, ProcStat> stats;
  for (auto& [pid, ticks] : cpu_) {
    const ProcStat s = read_stat(pid);
    stats[pid] = s;
    if (s.cpu_ticks > ticks) busy = true;
    ticks = s.cpu_ticks;
  }
  if (busy) {
    idle_since_ = now;
    reported_ = false;
  } else if (!reported_ && now - idle_since_ >= o_.timeout) {
    reported_ = true;
    std::vector<int> ranks;
    std::string states;
    for (const auto& [pid, rank] : ranks_) {
      ranks.push_back(rank);
      states += fmt::format("  rank {} (pid {}): {}\n", rank, pid, describe_state(stats[pid].state));
    }
    HangReport report;
    const std::string stacks = dump_stacks(ranks_, StackDumpOptions{o_.python, std::chrono::seconds(3)});
    report.stacks_file = fmt::format(
        "{}/hang_round{}_{}.txt", o_.run_dir, round_,
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    if (!(std::ofstream(report.stacks_file) << stacks)) report.stacks_file.clear();
    report.text = fmt::format(
        "suspected hang: no CPU time used by {} on this node for {:g} s (a heuristic: the job goes on)\n{}"
        "stacks{}:\n{}",
        ranks_phrase(ranks), std::chrono::duration<double>(now - idle_since_).count(), states,
        report.stacks_file.empty() ? "" : " (also in " + report.stacks_file + ")", stacks);
    // Taking stacks costs the workers a little CPU (ptrace stops): that is not progress.
    for (auto& [pid, ticks] : cpu_) ticks = read_stat(pid).cpu_ticks;
    on_report_(report);
  }
  schedule();
}

}  // namespace ddp::launcher
