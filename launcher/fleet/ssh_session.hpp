// One `ssh` child of the controller: its stdin a pipe we write (control_channel.hpp), its stdout
// and stderr pipes read by the event loop and handed on a whole line at a time. Its end is
// reported once the process has exited AND both streams have reached end of file, so that no
// line it wrote is lost (a last line without '\n' is handed on too). The child is in its own
// process group (a Ctrl-C at the terminal reaches only the controller, which decides what each
// host is told) and dies with the controller (parent-death signal), which ends the remote
// launcher through its channel. Runs on one io_context's thread; not thread-safe.
#pragma once

#include <sys/types.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "ddplaunch/common/env_lookup.hpp"

namespace ddp::launcher {

struct SshSessionOptions {
  std::string host;               // for the caller's messages
  std::vector<std::string> argv;  // ssh and its arguments (argv[0] searched in PATH)
  Environment env;                // ssh's own environment (the controller's: SSH_AUTH_SOCK, HOME, ...)
};

class SshSession {
 public:
  // `stream` is 1 for stdout, 2 for stderr; `line` has no '\n'.
  using LineSink = std::function<void(int stream, std::string_view line)>;
  // The ssh process's exit code (exit_code_from_wait_status: 255 for ssh's own failures).
  using ExitSink = std::function<void(int code)>;

  SshSession(boost::asio::io_context& io, SshSessionOptions options, LineSink on_line, ExitSink on_exit);
  ~SshSession();  // kills the child (SIGKILL) if still running and reaps it
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  // Starts ssh. Throws StartError (common/child_process.hpp) when it cannot be started.
  void start();
  // Writes `text` on ssh's stdin. A few hundred bytes: the pipe's buffer takes them without
  // blocking. Ignored once the input is closed or the child is gone.
  void send(std::string_view text);
  // Closes ssh's stdin: the remote side sees end of file.
  void close_input();
  // SIGKILL to ssh's process group (the remote side then sees end of file).
  void kill();
  // Called by the owner on SIGCHLD: reaps the child if it has exited. Never blocks.
  void reap();

  const std::string& host() const { return options_.host; }
  bool ended() const { return ended_; }
  int exit_code() const { return code_; }

 private:
  void read(int index);
  void maybe_end();

  boost::asio::io_context& io_;
  SshSessionOptions options_;
  LineSink on_line_;
  ExitSink on_exit_;
  pid_t pid_ = -1;
  int input_ = -1;
  std::array<std::unique_ptr<boost::asio::posix::stream_descriptor>, 2> outputs_;
  std::array<std::string, 2> partial_;
  std::array<char, 8192> buffer_{};
  std::array<bool, 2> eof_{false, false};
  bool exited_ = false;
  bool ended_ = false;
  int code_ = -1;
};

}  // namespace ddp::launcher
