// One running worker: spawned with Boost.Process in its own process group, set to die with the
// launcher (PR_SET_PDEATHSIG), its stdout/stderr read by the launcher's event loop and passed on
// as whole lines with a prefix. Lives on the agent's event loop thread only.
#pragma once

#include <array>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/process/async_pipe.hpp>

#include "launcher/console_writer.hpp"
#include "launcher/worker_spec.hpp"

namespace ddp::launcher {

struct OutputOptions {
  ConsoleWriter* console = nullptr;  // where console lines go (required)
  std::string prefix;                // e.g. "[3]:"; "" for none
  bool to_console_out = true;
  bool to_console_err = true;
  std::string stdout_file;  // "" = none
  std::string stderr_file;
  std::size_t tail_lines = 20;  // stderr lines kept for the failure summary
};

class WorkerProcess {
 public:
  // Spawns the worker. Throws UsageError when the program cannot be found or executed.
  WorkerProcess(boost::asio::io_context& io, const WorkerSpec& spec, OutputOptions output);

  int pid() const { return pid_; }
  const WorkerSpec& spec() const { return spec_; }
  // Sends `signo` to the worker's process group (so its children get it too).
  void signal(int signo) const;
  // Called when waitpid reported the exit. `status` as from waitpid.
  void set_exited(int status);
  bool exited() const { return exited_; }
  // Exit code as the launcher reports it: the code, or 128+N for signal N.
  int exit_code() const;
  int term_signal() const { return term_signal_; }
  // The last stderr lines (at most tail_lines).
  const std::deque<std::string>& stderr_tail() const { return tail_; }
  // True once both pipes reached end of file (all output was passed on).
  bool output_done() const { return open_pipes_ == 0; }
  void on_output_done(std::function<void()> callback) { output_done_cb_ = std::move(callback); }

 private:
  struct Stream {
    std::unique_ptr<boost::process::async_pipe> pipe;
    std::array<char, 65536> buffer{};
    std::string partial;
    std::ofstream file;
    bool console = true;
    bool is_err = false;
  };
  void read(Stream& s);
  void emit(Stream& s, const std::string& line);
  void close_stream(Stream& s);

  WorkerSpec spec_;
  OutputOptions output_;
  int pid_ = -1;
  bool exited_ = false;
  int code_ = 0;
  int term_signal_ = 0;
  Stream out_;
  Stream err_;
  int open_pipes_ = 2;
  std::deque<std::string> tail_;
  std::function<void()> output_done_cb_;
};

}  // namespace ddp::launcher
