// posix_spawn with three pipes, poll()-driven reads, and a pidfd so that waiting for the child is
// an event too (Linux has no waitpid with a timeout).
#include "tests/support/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace ddp::testing {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what, int err) {
  throw std::runtime_error("child process: " + what + ": " + std::strerror(err));
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Milliseconds until `deadline` for poll(), rounded up so that we never spin on 0 before it.
int poll_timeout(Clock::time_point deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, 60'000));
}

}  // namespace

std::string describe(const ChildExit& e) {
  if (e.exited) return "exit code " + std::to_string(e.code);
  return "killed by signal " + std::to_string(e.signal) + " (" + ::strsignal(e.signal) + ")";
}

ChildProcess::ChildProcess(std::vector<std::string> argv) {
  if (argv.empty()) throw std::runtime_error("child process: empty argv");
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) fail("pipe2", errno);
  if (::pipe2(out, O_CLOEXEC) != 0) fail("pipe2", errno);
  if (::pipe2(err, O_CLOEXEC) != 0) fail("pipe2", errno);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears FD_CLOEXEC on the target; every other pipe end closes at exec.
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) sigaddset(&defaults, s);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const int rc = ::posix_spawn(&pid_, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  stdin_ = in[1];
  stdout_ = out[0];
  stderr_ = err[0];
  if (rc != 0) {
    close_fd(stdin_);
    close_fd(stdout_);
    close_fd(stderr_);
    pid_ = -1;
    fail("cannot spawn " + argv[0], rc);
  }
  pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd_ < 0) {
    const int e = errno;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);  // just killed: returns at once
    pid_ = -1;
    fail("pidfd_open", e);
  }
  // Non-blocking reads: drain() reads until EAGAIN.
  ::fcntl(stdout_, F_SETFL, ::fcntl(stdout_, F_GETFL) | O_NONBLOCK);
  ::fcntl(stderr_, F_SETFL, ::fcntl(stderr_, F_GETFL) | O_NONBLOCK);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exit_) {
    ::kill(pid_, SIGKILL);
    if (!wait_for(Duration(10'000))) {
      // SIGKILL cannot be ignored; only a process stuck in the kernel gets here. Reap it anyway
      // rather than leave a zombie.
      ::waitpid(pid_, nullptr, 0);
    }
  }
  close_fd(stdin_);
  close_fd(stdout_);
  close_fd(stderr_);
  close_fd(pidfd_);
}

void ChildProcess::drain(int& fd, std::string& buf) {
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n > 0) {
      buf.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close_fd(fd);  // EOF or a read error: nothing more will come
    return;
  }
}

bool ChildProcess::try_reap() {
  if (exit_) return true;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  ChildExit e;
  if (WIFEXITED(status)) {
    e.exited = true;
    e.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    e.signal = WTERMSIG(status);
  }
  exit_ = e;
  close_fd(pidfd_);
  return true;
}

template <class Done>
bool ChildProcess::pump(Clock::time_point deadline, Done done) {
  for (;;) {
    if (done()) return true;
    pollfd fds[3];
    nfds_t n = 0;
    if (stdout_ >= 0) fds[n++] = {stdout_, POLLIN, 0};
    if (stderr_ >= 0) fds[n++] = {stderr_, POLLIN, 0};
    if (!exit_ && pidfd_ >= 0) fds[n++] = {pidfd_, POLLIN, 0};
    if (n == 0) return done();
    const int timeout = poll_timeout(deadline);
    const int r = ::poll(fds, n, timeout);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail("poll", errno);
    for (nfds_t i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == stdout_) {
        drain(stdout_, out_);
      } else if (fds[i].fd == stderr_) {
        drain(stderr_, err_);
      } else {
        try_reap();
      }
    }
    if (r == 0 && Clock::now() >= deadline) return done();
  }
}

std::optional<std::string> ChildProcess::read_stdout_line(Duration timeout) {
  pump(Clock::now() + timeout, [&] { return out_.find('\n') != std::string::npos || stdout_ < 0; });
  const auto nl = out_.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  std::string line = out_.substr(0, nl);
  out_.erase(0, nl + 1);
  return line;
}

void ChildProcess::close_stdin() {
  close_fd(stdin_);
}

void ChildProcess::send_signal(int signo) {
  if (pid_ > 0 && !exit_) ::kill(pid_, signo);
}

std::optional<ChildExit> ChildProcess::wait_for(Duration timeout) {
  if (pid_ <= 0) return std::nullopt;
  if (!pump(Clock::now() + timeout, [&] { return exit_.has_value(); })) return std::nullopt;
  // The child is gone; collect the rest of its output (a grandchild could hold the pipes open,
  // hence the bound).
  pump(Clock::now() + std::chrono::seconds(2), [&] { return stdout_ < 0 && stderr_ < 0; });
  return exit_;
}

}  // namespace ddp::testing
