// See worker_timers.hpp.
#include "launcher/watch/worker_timers.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <fmt/format.h>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "common/signals.hpp"
#include "common/worker_env.hpp"
#include "launcher/rdzv/outcome.hpp"
#include "launcher/watch/stack_dump.hpp"

namespace ddp::launcher {
namespace {

namespace asio = boost::asio;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string timer_file_path(const Environment& env, const std::string& run_dir) {
  const auto enabled = env.find("TORCHELASTIC_ENABLE_FILE_TIMER");
  if (enabled == env.end() || enabled->second != "1") return "";
  const auto given = env.find(worker_env::kTimerFile);
  return given != env.end() && !given->second.empty() ? given->second : run_dir + "/watchdog_timer";
}

std::unique_ptr<WorkerTimers> WorkerTimers::create(asio::io_context& io, const Environment& env,
                                                   const std::string& run_dir, const std::string& python) {
  WorkerTimersOptions o;
  o.path = timer_file_path(env, run_dir);
  if (o.path.empty()) return nullptr;
  o.python = python;
  return std::make_unique<WorkerTimers>(io, std::move(o));
}

WorkerTimers::WorkerTimers(asio::io_context& io, WorkerTimersOptions options)
    : io_(io), o_(std::move(options)), reader_(io), timer_(io) {
  // A stale pipe of an earlier run goes, as torchrun's server removes it; anything else at that
  // path is somebody's file, never removed.
  struct stat st {};
  if (::lstat(o_.path.c_str(), &st) == 0) {
    if (!S_ISFIFO(st.st_mode)) {
      throw UsageError(fmt::format("{} {} exists and is not a named pipe; remove it or give a path that does not exist",
                                   worker_env::kTimerFile, o_.path));
    }
    ::unlink(o_.path.c_str());
  }
  if (::mkfifo(o_.path.c_str(), 0600) != 0) {
    throw UsageError(
        fmt::format("{} {}: cannot make the named pipe: {}; unset it or give a path in a writable directory",
                    worker_env::kTimerFile, o_.path, std::strerror(errno)));
  }
  const int fd = ::open(o_.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  keep_open_ = ::open(o_.path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || keep_open_ < 0) {
    const int e = errno;
    if (fd >= 0) ::close(fd);
    if (keep_open_ >= 0) ::close(keep_open_);
    throw Error(
        fmt::format("{} {}: cannot open the named pipe: {}", worker_env::kTimerFile, o_.path, std::strerror(e)));
  }
  reader_.assign(fd);
  log::info("file timers: serving {}={}", worker_env::kTimerFile, o_.path);
  read();
}

WorkerTimers::~WorkerTimers() {
  *alive_ = false;
  boost::system::error_code ignored;
  reader_.close(ignored);
  if (keep_open_ >= 0) ::close(keep_open_);
  ::unlink(o_.path.c_str());
  for (std::thread& t : threads_) t.join();  // bounded by the stack tool's timeout
}

void WorkerTimers::watch(std::map<int, int> ranks_by_pid) {
  ranks_by_pid_ = std::move(ranks_by_pid);
  timers_.clear();
  arm();
}

void WorkerTimers::forget(int pid) {
  ranks_by_pid_.erase(pid);
  erase_timers(pid);
}

void WorkerTimers::erase_timers(int pid) {
  for (auto it = timers_.begin(); it != timers_.end();) it = it->first.first == pid ? timers_.erase(it) : ++it;
}

std::string WorkerTimers::note(int pid) const {
  const auto it = notes_.find(pid);
  return it == notes_.end() ? "" : it->second;
}

void WorkerTimers::read() {
  buffer_.resize(4096);
  reader_.async_read_some(asio::buffer(buffer_), [this](const boost::system::error_code& ec, std::size_t n) {
    if (ec) return;  // closed by the destructor
    pending_.append(buffer_.data(), n);
    for (std::size_t end; (end = pending_.find('\n')) != std::string::npos;) {
      handle(pending_.substr(0, end));
      pending_.erase(0, end + 1);
    }
    if (pending_.size() > 65536) pending_.clear();  // no line is this long: not a timer client
    arm();
    read();
  });
}

void WorkerTimers::handle(const std::string& line) {
  const nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (r.is_discarded() || !r.is_object() || !r.contains("pid") || !r["pid"].is_number_integer() ||
      !r.contains("scope_id") || !r["scope_id"].is_string() || !r.contains("expiration_time") ||
      !r["expiration_time"].is_number()) {
    log::warning("file timers: ignored a request that is not a FileTimerRequest: '{}'", printable(line.substr(0, 120)));
    return;
  }
  const int pid = r["pid"].get<int>();
  const std::string scope = r["scope_id"].get<std::string>();
  const double expiration = r["expiration_time"].get<double>();
  if (expiration < 0) {
    timers_.erase({pid, scope});
    return;
  }
  const int sig = r.contains("signal") && r["signal"].is_number_integer() ? r["signal"].get<int>() : 0;
  timers_[{pid, scope}] = Timer{expiration, sig};
}

void WorkerTimers::arm() {
  if (timers_.empty()) {
    timer_.cancel();
    return;
  }
  double earliest = timers_.begin()->second.expiration;
  for (const auto& [key, t] : timers_) earliest = std::min(earliest, t.expiration);
  const auto wait = std::chrono::duration<double>(std::max(0.0, earliest - now_seconds()));
  timer_.expires_after(std::chrono::duration_cast<std::chrono::milliseconds>(wait) + std::chrono::milliseconds(1));
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) expire();
  });
}

void WorkerTimers::expire() {
  const double now = now_seconds();
  // Per worker, its earliest expired scope (with a signal, as torchrun picks it).
  std::map<int, std::pair<std::string, Timer>> expired;
  for (const auto& [key, t] : timers_) {
    if (t.expiration > now) continue;
    auto& chosen = expired[key.first];
    const bool better = chosen.first.empty() || (t.signal > 0 && chosen.second.signal <= 0) ||
                        ((t.signal > 0) == (chosen.second.signal > 0) && t.expiration < chosen.second.expiration);
    if (better) chosen = {key.second, t};
  }
  for (const auto& [pid, chosen] : expired) {
    erase_timers(pid);  // as torchrun: every timer of a reaped worker goes
    const auto rank = ranks_by_pid_.find(pid);
    if (rank == ranks_by_pid_.end()) {
      if (!warned_unknown_)
        log::warning("file timers: pid {} is not a worker of this round; its timers are ignored", pid);
      warned_unknown_ = true;
      continue;
    }
    const auto& [scope, t] = chosen;
    if (t.signal <= 0) {
      log::warning("rank {} (pid {}): file timer '{}' expired {} ago; no signal was set, it keeps running",
                   rank->second, pid, printable(scope),
                   format_seconds_fixed(std::chrono::duration<double>(now - t.expiration), 1));
      continue;
    }
    log::error("rank {} (pid {}): file timer '{}' expired {} ago; taking its stack, then sending {}", rank->second, pid,
               printable(scope), format_seconds_fixed(std::chrono::duration<double>(now - t.expiration), 1),
               signal_name(t.signal));
    kill_after_stack(pid, rank->second, scope, t.signal);
  }
  arm();
}

void WorkerTimers::kill_after_stack(int pid, int rank, std::string scope, int signal) {
  notes_[pid] = "killed by ddplaunch: file timer '" + printable(scope) + "' expired";
  threads_.emplace_back([this, pid, rank, scope = std::move(scope), signal, alive = alive_, python = o_.python] {
    std::string stack = dump_stack(pid, StackDumpOptions{python});
    asio::post(io_, [this, pid, rank, scope, signal, alive, stack = std::move(stack)] {
      if (!*alive) return;
      log::error("rank {} (pid {}) in file timer '{}' when it expired:\n{}", rank, pid, printable(scope),
                 printable(stack));
      // Only a worker of this round, still unreaped (its pid cannot have been reused).
      if (ranks_by_pid_.count(pid)) ::kill(pid, signal);
    });
  });
}

}  // namespace ddp::launcher
