// Spawning and output forwarding; see worker_process.hpp.
#include "launcher/worker_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "launcher/spawn_process.hpp"

namespace ddp::launcher {

namespace {

// A pipe whose two ends close on exec (the child gets its end through dup2).
struct Pipe {
  int read_end = -1;
  int write_end = -1;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
    read_end = fds[0];
    write_end = fds[1];
  }
  ~Pipe() {
    if (read_end >= 0) ::close(read_end);
    if (write_end >= 0) ::close(write_end);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  int release_read() { return std::exchange(read_end, -1); }
};

}  // namespace

WorkerProcess::WorkerProcess(boost::asio::io_context& io, const WorkerSpec& spec, OutputOptions output)
    : spec_(spec), output_(std::move(output)) {
  DDP_ASSERT(output_.console != nullptr, "worker output needs a console writer");
  const std::string exe = resolve_program(spec.argv.front());
  out_.console = output_.to_console_out;
  err_.console = output_.to_console_err;
  err_.is_err = true;
  if (!spec.log_dir.empty()) std::filesystem::create_directories(spec.log_dir);
  if (!output_.stdout_file.empty()) out_.file.open(output_.stdout_file, std::ios::trunc);
  if (!output_.stderr_file.empty()) err_.file.open(output_.stderr_file, std::ios::trunc);

  // The child's argv and environment as execve wants them, built before the vfork (the child
  // may not allocate). argv[0] is the resolved path, as Boost.Process gave it before.
  std::vector<std::string> env_strings;
  env_strings.reserve(spec.env.size());
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args(spec.argv);
  args.front() = exe;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  Pipe out_pipe, err_pipe;
  try {
    pid_ = spawn_process(SpawnRequest{exe.c_str(), argv.data(), envp.data(), out_pipe.write_end, err_pipe.write_end,
                                      spec.open_files_limit});
  } catch (const std::system_error& e) {
    throw UsageError("cannot start '" + spec.argv.front() + "': " + e.code().message() +
                     "; check that it is an executable program");
  }
  // Our copies of the write ends close with the Pipe objects, so end of file comes when the
  // worker (and whatever inherited its output) is gone.
  out_.pipe = std::make_unique<boost::asio::posix::stream_descriptor>(io, out_pipe.release_read());
  err_.pipe = std::make_unique<boost::asio::posix::stream_descriptor>(io, err_pipe.release_read());
  // Our ends only: the worker's ends stay blocking, as programs expect of their stdout.
  out_.pipe->non_blocking(true);
  err_.pipe->non_blocking(true);
  read(out_);
  read(err_);
}

void WorkerProcess::signal(int signo) const {
  if (exited_ || pid_ <= 0) return;
  if (::kill(-pid_, signo) != 0 && errno == ESRCH) {
    // The group is gone already (the worker exited but is not reaped yet): nothing to signal.
    ::kill(pid_, signo);
  }
}

void WorkerProcess::set_exited(int status) {
  exited_ = true;
  if (WIFEXITED(status)) code_ = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) term_signal_ = WTERMSIG(status);
}

int WorkerProcess::exit_code() const {
  return term_signal_ ? 128 + term_signal_ : code_;
}

namespace {

// The read buffer every worker's pipes share: the loop thread reads one pipe at a time and
// passes the bytes on before the next read. Allocated at the first output, never zero-filled, so
// only the pages that output touches count.
constexpr std::size_t kReadBytes = 256 * 1024;
char* read_buffer() {
  static const std::unique_ptr<char[]> buffer(new char[kReadBytes]);
  return buffer.get();
}

// Reads per wake-up of one pipe at most, so one chatty worker cannot hold up the loop.
constexpr int kReadsPerWake = 4;

}  // namespace

void WorkerProcess::read(Stream& s) {
  s.pipe->async_wait(boost::asio::posix::stream_descriptor::wait_read, [this, &s](const boost::system::error_code& ec) {
    if (ec) return end_stream(s);
    for (int i = 0; i < kReadsPerWake; ++i) {
      const ssize_t n = ::read(s.pipe->native_handle(), read_buffer(), kReadBytes);
      if (n > 0) {
        consume(s, read_buffer(), static_cast<std::size_t>(n));
        if (static_cast<std::size_t>(n) < kReadBytes) break;  // drained
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      return end_stream(s);  // end of file, or an error that ends the stream just the same
    }
    read(s);
  });
}

void WorkerProcess::consume(Stream& s, const char* p, std::size_t n) {
  const char* const end = p + n;
  if (!s.partial.empty()) {
    // Finish the line carried over from the last read first.
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', n));
    const char* stop = nl ? nl + 1 : end;
    s.partial.append(p, stop);
    p = stop;
    if (!nl) return;
    emit_lines(s, s.partial.data(), s.partial.size());
    s.partial.clear();
  }
  if (p == end) return;
  const char* last_nl = static_cast<const char*>(::memrchr(p, '\n', end - p));
  if (last_nl) {
    emit_lines(s, p, last_nl + 1 - p);
    p = last_nl + 1;
  }
  s.partial.append(p, end);
}

void WorkerProcess::end_stream(Stream& s) {
  if (!s.partial.empty()) {
    s.partial.push_back('\n');
    emit_lines(s, s.partial.data(), s.partial.size());
  }
  s.partial.clear();
  close_stream(s);
}

void WorkerProcess::emit_lines(Stream& s, const char* data, std::size_t n) {
  if (s.file.is_open()) s.file.write(data, static_cast<std::streamsize>(n));
  const char* const end = data + n;
  if (s.is_err && output_.tail_lines > 0) {
    // Only the last tail_lines lines of this block can stay in the tail: find where they start.
    const char* start = end - 1;  // the final '\n'
    for (std::size_t lines = 1;; ++lines) {
      const char* nl = static_cast<const char*>(::memrchr(data, '\n', start - data));
      if (!nl || lines == output_.tail_lines) {
        start = nl ? nl + 1 : data;
        break;
      }
      start = nl;
    }
    for (const char* line = start; line < end;) {
      const char* nl = static_cast<const char*>(std::memchr(line, '\n', end - line));
      tail_.emplace_back(line, nl);
      line = nl + 1;
    }
    while (tail_.size() > output_.tail_lines) tail_.pop_front();
  }
  if (!s.console) return;
  const int fd = s.is_err ? 2 : 1;
  const std::string& prefix = output_.prefix;
  if (prefix.empty()) {
    std::string block = output_.console->recycled_buffer();
    block.assign(data, n);
    return output_.console->write(fd, std::move(block));
  }
  // Sized once, filled with memcpy: this loop runs for every line a worker prints.
  const auto lines = static_cast<std::size_t>(std::count(data, end, '\n'));
  std::string block = output_.console->recycled_buffer();
  block.resize(n + prefix.size() * lines);
  char* out = block.data();
  for (const char* line = data; line < end;) {
    const char* next = static_cast<const char*>(std::memchr(line, '\n', end - line)) + 1;
    std::memcpy(out, prefix.data(), prefix.size());
    out += prefix.size();
    std::memcpy(out, line, next - line);
    out += next - line;
    line = next;
  }
  output_.console->write(fd, std::move(block));
}

void WorkerProcess::close_stream(Stream& s) {
  boost::system::error_code ignored;  // closing a pipe at EOF cannot fail meaningfully
  s.pipe->close(ignored);
  if (s.file.is_open()) s.file.close();
  if (--open_pipes_ == 0 && output_done_cb_) output_done_cb_();
}

}  // namespace ddp::launcher
