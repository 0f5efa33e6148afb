// See ssh_session.hpp.
#include "launcher/fleet/ssh_session.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <boost/asio/buffer.hpp>

#include "common/child_process.hpp"
#include "common/exit_codes.hpp"
#include "common/find_executable.hpp"

namespace ddp::launcher {

SshSession::SshSession(boost::asio::io_context& io, SshSessionOptions options, LineSink on_line, ExitSink on_exit)
    : io_(io), options_(std::move(options)), on_line_(std::move(on_line)), on_exit_(std::move(on_exit)) {}

SshSession::~SshSession() {
  if (pid_ > 0 && !exited_) {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  close_input();
}

void SshSession::start() {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw StartError(options_.argv.front(), "pipe2", errno);
  }
  ChildOptions child;
  child.exe = find_on_path(options_.argv.front());
  child.argv = options_.argv;
  child.env = options_.env;
  child.stdin_fd = in[0];
  child.stdout_fd = out[1];
  child.stderr_fd = err[1];
  try {
    pid_ = start_child(child);
  } catch (...) {
    for (const int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) ::close(fd);
    throw;
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  input_ = in[1];
  // A write to a remote side that is gone must fail (EPIPE), not kill the controller.
  ::signal(SIGPIPE, SIG_IGN);
  outputs_[0] = std::make_unique<boost::asio::posix::stream_descriptor>(io_, out[0]);
  outputs_[1] = std::make_unique<boost::asio::posix::stream_descriptor>(io_, err[0]);
  read(0);
  read(1);
}

void SshSession::send(std::string_view text) {
  while (input_ >= 0 && !text.empty()) {
    const ssize_t n = ::write(input_, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // the remote side is gone (EPIPE): its end is reported by reap()
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

void SshSession::close_input() {
  if (input_ >= 0) ::close(input_);
  input_ = -1;
}

void SshSession::kill() {
  // ESRCH: it has exited already, which is what we want.
  if (pid_ > 0 && !exited_) ::kill(-pid_, SIGKILL);
}

void SshSession::reap() {
  if (pid_ <= 0 || exited_) return;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return;
  exited_ = true;
  code_ = exit_code_from_wait_status(status);
  maybe_end();
}

void SshSession::read(int index) {
  // Each stream has its own half of the buffer, so both may be read at once.
  const std::size_t half = buffer_.size() / 2;
  outputs_[index]->async_read_some(
      boost::asio::buffer(buffer_.data() + index * half, half),
      [this, index, half](const boost::system::error_code& ec, std::size_t n) {
        std::string& partial = partial_[index];
        partial.append(buffer_.data() + index * half, n);
        std::size_t start = 0;
        for (std::size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
          on_line_(index + 1, std::string_view(partial).substr(start, nl - start));
        }
        partial.erase(0, start);
        if (!ec) return read(index);
        if (!partial.empty()) on_line_(index + 1, partial);  // a last line without its '\n'
        partial.clear();
        eof_[index] = true;
        maybe_end();
      });
}

void SshSession::maybe_end() {
  if (ended_ || !exited_ || !eof_[0] || !eof_[1]) return;
  ended_ = true;
  close_input();
  on_exit_(code_);
}

}  // namespace ddp::launcher
