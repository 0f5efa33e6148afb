// See site_command.hpp. The wait is on events: poll(2) on the output pipe and a pidfd (the
// command's exit), bounded by the deadline.
#include "launcher/health/site_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <vector>

#include <fmt/format.h>

#include "common/child_process.hpp"
#include "common/format_duration.hpp"
#include "common/process_set.hpp"
#include "common/signals.hpp"

namespace ddp::launcher {
namespace {

constexpr std::size_t kLineChars = 300;

// The output as lines: the first one and the last kOutputLines ones, each cut at kLineChars.
class OutputLines {
 public:
  void add(const char* data, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      if (data[i] == '\n') {
        end_line();
      } else if (partial_.size() < kLineChars) {
        partial_ += data[i];
      }
    }
  }
  void end_line() {
    if (first_.empty() && !partial_.empty()) first_ = partial_;
    last_.push_back(std::move(partial_));
    partial_.clear();
    if (last_.size() > kOutputLines) last_.pop_front();
  }
  void finish() {
    if (!partial_.empty()) end_line();
  }
  const std::string& first() const { return first_; }
  std::vector<std::string> last() const { return {last_.begin(), last_.end()}; }

 private:
  std::string partial_, first_;
  std::deque<std::string> last_;
};

// Reads what is available from `fd` into `lines`; false at end of file (or an error).
bool read_some(int fd, OutputLines& lines) {
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (n > 0) lines.add(buf, static_cast<std::size_t>(n));
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
}

CheckResult failed(const std::string& name, const std::string& why, const OutputLines& lines) {
  const std::string first = lines.first().empty() ? why : lines.first();
  return CheckResult{name, CheckResult::Verdict::Failed, first == why ? why : why + ": " + first, lines.last()};
}

}  // namespace

CheckResult run_site_command(const std::string& command, const Environment& env, std::chrono::milliseconds timeout,
                             const SiteCommandControl& control) {
  const std::string name = "command '" + command + "'";
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return failed(name, fmt::format("pipe: {}", std::strerror(errno)), {});
  const auto start = std::chrono::steady_clock::now();
  // In a ProcessSet, so that the launcher's reaping of adopted orphans (workers/job_lifetime.hpp)
  // leaves its exit status to us.
  ProcessSet set;
  if (control.lifetime) control.lifetime->adopt(set);
  pid_t pid = -1;
  try {
    ChildOptions o;
    o.exe = "/bin/sh";
    o.argv = {"sh", "-c", command};
    o.env = env;
    o.stdout_fd = pipe_fds[1];
    o.stderr_fd = pipe_fds[1];
    pid = set.pid(set.start(o));
    if (control.lifetime) {
      control.lifetime->worker_started(pid, set);
      control.lifetime->flush();
    }
  } catch (const Error& e) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return failed(name, fmt::format("cannot start /bin/sh: {}", e.what()), {});
  }
  ::close(pipe_fds[1]);
  const int out = pipe_fds[0];
  // Without pidfd_open (Linux < 5.3) the end of output stands for the command's end.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  OutputLines lines;
  bool output_open = true, exited = false, timed_out = false, interrupted = false;
  const int cancel_fd = control.cancel ? control.cancel->fd() : -1;
  while (!exited && (output_open || pidfd >= 0)) {
    const auto left =
        timeout - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[3] = {{output_open ? out : -1, POLLIN, 0}, {pidfd, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
    if (::poll(fds, 3, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    if (fds[2].revents != 0) {
      interrupted = true;
      break;
    }
    if (fds[0].revents != 0) output_open = read_some(out, lines);
    if (fds[1].revents != 0) exited = true;
  }
  // The command's group goes: all of it on a timeout or a cancel, else whatever it left running
  // (a group already empty is skipped). Without a pidfd and at the end of output, the wait is plain.
  if (timed_out || interrupted || exited) set.signal_all(SIGKILL);
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  const std::vector<ProcessSet::Exit> ends = set.collect();
  if (control.lifetime) {  // before the reap, while the group's number is still ours
    control.lifetime->worker_exited(pid);
    control.lifetime->flush();
  }
  set.reap();
  // What the command wrote before it ended is still in the pipe; a leftover holding the pipe
  // open (a daemon it started in another group) must not hold the check.
  ::fcntl(out, F_SETFL, O_NONBLOCK);
  char buf[4096];
  for (ssize_t n = 0; output_open && (n = ::read(out, buf, sizeof buf)) > 0;)
    lines.add(buf, static_cast<std::size_t>(n));
  lines.finish();
  ::close(out);
  if (pidfd >= 0) ::close(pidfd);
  const auto took = std::chrono::steady_clock::now() - start;
  if (timed_out) return failed(name, "timed out after " + format_seconds(timeout), lines);
  if (interrupted) return failed(name, "interrupted after " + format_seconds_fixed(took, 2), lines);
  if (ends.empty()) return failed(name, "its end was not seen", lines);
  if (ends[0].term_signal != 0) return failed(name, "killed by " + signal_name(ends[0].term_signal), lines);
  if (ends[0].exit_code != 0) return failed(name, fmt::format("exited with {}", ends[0].exit_code), lines);
  return CheckResult{name, CheckResult::Verdict::Healthy, "exit 0 in " + format_seconds_fixed(took, 2), lines.last()};
}

}  // namespace ddp::launcher
