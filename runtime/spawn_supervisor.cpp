// The poll() loop of SpawnSupervisor. The copies are started and signalled through a ProcessSet,
// the same one the launcher drives; this file only decides when to stop them and what to return.
#include "runtime/spawn_supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "common/signals.hpp"
#include "ddplaunch/spawn.hpp"

namespace ddp::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// The write end of the live supervisor's self-pipe, read by the signal handler (a lock-free
// atomic is safe to read there); -1 when no supervisor exists.
std::atomic<int> g_signal_pipe{-1};
static_assert(std::atomic<int>::is_always_lock_free);

void write_to_pipe(int signo) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(signo);
  const int fd = g_signal_pipe.load();
  // A full pipe already holds plenty of undelivered signals, so losing this one loses nothing
  // (SIGCHLD included: one byte is enough for collect() to see every ended copy).
  if (fd >= 0) {
    [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1);
  }
  errno = saved;
}

std::string ranks(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " rank" : " ranks");
}

void install(int signo, struct sigaction* old) {
  struct sigaction forward {};
  forward.sa_handler = write_to_pipe;
  ::sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART | (signo == SIGCHLD ? SA_NOCLDSTOP : 0);
  if (::sigaction(signo, &forward, old) != 0)
    throw SpawnError("spawn: cannot install the " + signal_name(signo) + " handler: " + std::strerror(errno));
}

}  // namespace

SpawnSupervisor::SpawnSupervisor(std::chrono::milliseconds grace) : grace_(grace) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw SpawnError(std::string("spawn: cannot create the signal pipe: ") + std::strerror(errno));
  pipe_read_ = fds[0];
  pipe_write_ = fds[1];
  int none = -1;
  DDP_ASSERT(g_signal_pipe.compare_exchange_strong(none, pipe_write_),
             "spawn() called while another spawn() is running in this process");
  install(SIGINT, &old_int_);
  install(SIGTERM, &old_term_);
  install(SIGCHLD, &old_chld_);
}

SpawnSupervisor::~SpawnSupervisor() {
  // Only on an early exit (start() or wait() threw) are copies still running here. They are
  // killed and reaped now, while our SIGCHLD handler is in place: the disposition restored below
  // may be SIG_IGN, which would let the kernel reap them and free their pids before the set's
  // destructor signals their groups.
  processes_.signal_all(SIGKILL);
  processes_.reap();
  g_signal_pipe.store(-1);
  // Restoring dispositions we read in the constructor cannot fail.
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGCHLD, &old_chld_, nullptr);
  ::close(pipe_read_);
  ::close(pipe_write_);
}

void SpawnSupervisor::start(int rank, const std::string& exe, const std::vector<std::string>& argv,
                            const Environment& env) {
  ChildOptions child;
  child.exe = exe;
  child.argv = argv;
  child.env = env;
  try {
    processes_.start(child);
  } catch (const StartError& e) {
    throw SpawnError("spawn: cannot start rank " + std::to_string(rank) + ": " + e.what() +
                     "; check the process limit (ulimit -u) and free memory");
  }
}

int SpawnSupervisor::wait() {
  // Copies that ended before the handler saw them are found by this first collect().
  for (const auto& exit : processes_.collect()) on_exit(exit);
  while (processes_.running() > 0) {
    pollfd fd{pipe_read_, POLLIN, 0};
    int timeout_ms = -1;
    if (stopping_ && !killed_) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(kill_at_ - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<long long>(left, 0, 60'000));
    }
    if (::poll(&fd, 1, timeout_ms) < 0) {
      if (errno == EINTR) continue;  // our own handler ran; its byte is in the pipe
      throw SpawnError(std::string("spawn: poll: ") + std::strerror(errno));
    }
    if (fd.revents != 0) {
      unsigned char buf[64];
      ssize_t n;
      while ((n = ::read(pipe_read_, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; ++i)
          if (buf[i] != SIGCHLD) on_signal(buf[i]);
    }
    for (const auto& exit : processes_.collect()) on_exit(exit);
    if (stopping_ && !killed_ && processes_.running() > 0 && Clock::now() >= kill_at_) {
      log::warning("spawn: {} still running {} ms after the stop signal; sending SIGKILL", ranks(processes_.running()),
                   grace_.count());
      processes_.signal_all(SIGKILL);
      killed_ = true;
    }
  }
  processes_.reap();
  return result_;
}

void SpawnSupervisor::on_exit(const ProcessSet::Exit& exit) {
  if (exit.exit_code == kExitOk || stopping_) return;
  result_ = exit.exit_code;
  const std::string how = exit.term_signal != 0 ? fmt::format("was killed by signal {} ({})", exit.term_signal,
                                                              signal_name(exit.term_signal))
                                                : fmt::format("exited with code {}", exit.exit_code);
  const std::size_t others = processes_.running();
  const std::string stop = others == 0   ? "no other rank is running"
                           : others == 1 ? "stopping the other rank"
                                         : "stopping the other " + ranks(others);
  // Ranks are started in order, so a copy's index in the set is its rank.
  log::error("spawn: rank {} (pid {}) {}; {}", exit.index, exit.pid, how, stop);
  begin_stop(SIGTERM);
}

void SpawnSupervisor::on_signal(int signo) {
  if (stopping_) {
    if (!killed_ && processes_.running() > 0) {
      log::warning("spawn: received {} while stopping; sending SIGKILL to {}", signal_name(signo),
                   ranks(processes_.running()));
      processes_.signal_all(SIGKILL);
      killed_ = true;
    }
    return;
  }
  result_ = exit_code_for_signal(signo);
  log::info("spawn: received {}; forwarding it to {}", signal_name(signo), ranks(processes_.running()));
  begin_stop(signo);
}

void SpawnSupervisor::begin_stop(int signo) {
  stopping_ = true;
  kill_at_ = Clock::now() + grace_;
  processes_.signal_all(signo);
}

}  // namespace ddp::runtime
