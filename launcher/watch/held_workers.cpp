// See held_workers.hpp.
#include "launcher/watch/held_workers.hpp"

#include <fcntl.h>

#include <algorithm>

#include <fmt/format.h>

#include "common/format_duration.hpp"
#include "common/kernel_files.hpp"
#include "launcher/watch/probe/proc_stat.hpp"

namespace ddp::launcher {
namespace {

// "in the kernel function X" when the kernel said where; wchan reads "0" for a running task.
std::string where(const HeldWorker& w) {
  return w.wchan.empty() || w.wchan == "0" ? std::string("where the kernel does not say")
                                            : "in the kernel function " + w.wchan;
}

std::string state_words(const HeldWorker& w) {
  if (w.state == 'D') return "uninterruptible sleep (state D)";
  if (w.state == 0) return "gone just now";
  return fmt::format("{} (state {})", describe_state(w.state), w.state);
}

}  // namespace

HeldWorker read_held_worker(int pid, int rank, int local_rank) {
  HeldWorker w{pid, rank, local_rank, read_proc_stat(pid).state, ""};
  // An unreadable file leaves it empty: "where the kernel does not say".
  w.wchan = read_kernel_file(AT_FDCWD, fmt::format("/proc/{}/wchan", pid).c_str());
  w.wchan.erase(std::min(w.wchan.find('\n'), w.wchan.size()));
  return w;
}

std::string held_workers_report(const std::vector<HeldWorker>& held, const std::string& host,
                                std::chrono::milliseconds waited, int exit_code) {
  std::string out;
  for (const HeldWorker& w : held) {
    out += fmt::format("worker rank {} (local rank {}, pid {}) on {} outlived SIGKILL by {}: {} {}\n", w.rank,
                       w.local_rank, w.pid, host, format_seconds(waited), state_words(w), where(w));
  }
  out += fmt::format(
      "the kernel holds {} in a system call that does not return (a hung file system such as NFS or FUSE, or a "
      "GPU or NIC driver call), so {} GPU, memory or files may still be in use: no new round starts on {}, and the "
      "launcher exits {}; drain or reboot {} before it runs a job again (docs/worker-stops.md)",
      held.size() == 1 ? "it" : "them", held.size() == 1 ? "its" : "their", host, exit_code, host);
  return out;
}

std::string held_workers_line(const std::vector<HeldWorker>& held, std::chrono::milliseconds waited) {
  std::string ranks;
  for (const HeldWorker& w : held) {
    if (!ranks.empty()) ranks += ", ";
    ranks += fmt::format("rank {} (pid {}, state {}, wchan {})", w.rank, w.pid, w.state ? w.state : '?',
                         w.wchan.empty() ? "?" : w.wchan);
  }
  return fmt::format("worker {} outlived SIGKILL by {}, held by the kernel; the host needs draining", ranks,
                     format_seconds(waited));
}

}  // namespace ddp::launcher
