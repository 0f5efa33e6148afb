// Spawning and output forwarding; see worker_process.hpp.
#include "launcher/workers/worker_process.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

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

UsageError worker_start_error(const WorkerSpec& spec, const StartError& e) {
  const bool limit = e.process_limit();
  const bool cpus = std::strcmp(e.step(), "sched_setaffinity") == 0;
  return UsageError("cannot start '" + spec.argv.front() + "': " + e.step() + ": " + std::strerror(e.error_number()) +
                    "; " +
                    (limit  ? process_limit_hint()
                     : cpus ? "--numa_binding chose CPUs this machine lacks (a DDPLAUNCH_HWLOC_XML topology?)"
                            : "check that it is an executable program"));
}

WorkerProcess::WorkerProcess(boost::asio::io_context& io, const WorkerSpec& spec, OutputOptions output,
                             ProcessSet& processes)
    : spec_(spec), output_(std::move(output)) {
  DDP_ASSERT(output_.console != nullptr, "worker output needs a console writer");
  const std::string exe = resolve_program(spec.argv.front());
  const OutputRouting& route = spec.output;
  out_.console = route.to_console_out;
  err_.console = route.to_console_err;
  err_.is_err = true;
  if (!spec.log_dir.empty()) {
    std::error_code ignored;  // a directory that cannot be made shows as the files' open error
    std::filesystem::create_directories(spec.log_dir, ignored);
  }
  if (!route.stdout_file.empty() || !route.stderr_file.empty() || !route.filtered_stdout_file.empty() ||
      !route.filtered_stderr_file.empty())
    DDP_ASSERT(output_.log_tally != nullptr, "worker log files need a tally");
  if (!route.stdout_file.empty()) out_.file = std::make_unique<LogFile>(route.stdout_file, *output_.log_tally);
  if (!route.stderr_file.empty()) err_.file = std::make_unique<LogFile>(route.stderr_file, *output_.log_tally);
  if (!route.filtered_stdout_file.empty())
    out_.filtered = std::make_unique<FilteredLog>(route.filtered_stdout_file, route.stdout_filters, *output_.log_tally);
  if (!route.filtered_stderr_file.empty())
    err_.filtered = std::make_unique<FilteredLog>(route.filtered_stderr_file, route.stderr_filters, *output_.log_tally);

  Pipe out_pipe, err_pipe;
  ChildOptions child;
  child.exe = exe;
  child.argv = spec.argv;
  child.argv.front() = exe;  // the resolved path, as execvp would show it
  child.env = spec.env;
  child.stdout_fd = out_pipe.write_end;
  child.stderr_fd = err_pipe.write_end;
  child.open_files_limit = spec.open_files_limit;
  child.keep_fds = spec.keep_fds;
  child.cpus = spec.cpus;
  child.new_session = true;  // a scheduler autogroup of its own, as torchrun's workers (child_process.hpp)
  try {
    index_ = processes.start(std::move(child));
  } catch (const StartError& e) {
    throw worker_start_error(spec, e);
  }
  pid_ = processes.pid(index_);
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

void WorkerProcess::set_exited(const ProcessSet::Exit& exit) {
  exited_ = true;
  code_ = exit.exit_code;
  term_signal_ = exit.term_signal;
  exited_at_ = std::chrono::steady_clock::now();
}

std::chrono::milliseconds WorkerProcess::stderr_quiet() const {
  const std::chrono::steady_clock::time_point none{};
  if (last_err_line_ == none || exited_at_ == none || exited_at_ < last_err_line_) return std::chrono::milliseconds(0);
  return std::chrono::duration_cast<std::chrono::milliseconds>(exited_at_ - last_err_line_);
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
  // Lines meant for a file only (--redirects) that it cannot take go to the console instead.
  const bool file_failed = s.file && !s.file->write(data, n);
  if (s.filtered) s.filtered->write(spec_.output.prefix, data, n);
  const bool to_console = s.console || file_failed;
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
    last_err_line_ = std::chrono::steady_clock::now();
  }
  if (!to_console) return;
  const int fd = s.is_err ? 2 : 1;
  const std::string& prefix = spec_.output.prefix;
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
  s.file.reset();
  s.filtered.reset();
  if (--open_pipes_ == 0 && output_done_cb_) output_done_cb_();
}

}  // namespace ddp::launcher
