// One running worker: started in the context's ProcessSet (common/process_set.hpp: its own
// session and process group, so a scheduler autogroup of its own; death with the launcher; only
// stdin/stdout/stderr inherited), its stdout/stderr read by the launcher's event loop and passed on
// as whole lines with a prefix. Each read becomes one block of prefixed whole lines for the
// console writer, so the cost per line is a scan and a copy, not a queue entry. Reads go through
// one buffer shared by every worker (the loop reads one pipe at a time), so a worker that prints
// nothing costs no buffer memory. Lives on the agent's event loop thread only.
#pragma once

#include <chrono>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "common/process_set.hpp"
#include "launcher/workers/console_writer.hpp"
#include "launcher/workers/filtered_log.hpp"
#include "launcher/workers/log_file.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddp::launcher {

// Where the routed lines go (the routing itself is the spec's: WorkerSpec::output).
struct OutputOptions {
  ConsoleWriter* console = nullptr;   // where console lines go (required)
  LogFileTally* log_tally = nullptr;  // counts lines that missed their log files (required with files)
  std::size_t tail_lines = 20;        // stderr lines kept for the failure summary
};

// What a worker that could not start says (exit 2): the program as given, the step and its
// error, and the fix (the process limit, --numa_binding's CPUs, or an executable program).
UsageError worker_start_error(const WorkerSpec& spec, const StartError& error);

class WorkerProcess {
 public:
  // Starts the worker in `processes`. Throws UsageError when the program cannot be found or
  // executed (nothing is left running then). In a ProcessSet::StartBatch, the steps after the
  // fork are reported by the batch's finish() instead (worker_start_error makes its message).
  WorkerProcess(boost::asio::io_context& io, const WorkerSpec& spec, OutputOptions output, ProcessSet& processes);

  int pid() const { return pid_; }
  std::size_t index() const { return index_; }  // in the ProcessSet
  const WorkerSpec& spec() const { return spec_; }
  // Called when the ProcessSet reported the exit.
  void set_exited(const ProcessSet::Exit& exit);
  bool exited() const { return exited_; }
  // Exit code as the launcher reports it: the code, or 128+N for signal N.
  int exit_code() const { return code_; }
  int term_signal() const { return term_signal_; }
  // The last stderr lines (at most tail_lines).
  const std::deque<std::string>& stderr_tail() const { return tail_; }
  // From its last stderr line to its exit (0 before either, or when it wrote none).
  std::chrono::milliseconds stderr_quiet() const;
  // True once both pipes reached end of file (all output was passed on).
  bool output_done() const { return open_pipes_ == 0; }
  void on_output_done(std::function<void()> callback) { output_done_cb_ = std::move(callback); }

 private:
  struct Stream {
    std::unique_ptr<boost::asio::posix::stream_descriptor> pipe;  // our (read) end
    std::string partial;                                          // a line not yet ended by '\n'
    std::unique_ptr<LogFile> file;                                // --redirects/--tee; null when the stream has none
    std::unique_ptr<FilteredLog> filtered;                        // --duplicate_*_filters; null when none
    bool console = true;
    bool is_err = false;
  };
  // Waits for the pipe to be readable, then reads what is there; ends the stream at EOF.
  void read(Stream& s);
  // Takes `n` bytes just read: splits them into whole lines, keeps the rest for later.
  void consume(Stream& s, const char* p, std::size_t n);
  void end_stream(Stream& s);
  // Passes on `n` bytes of whole lines (ending in '\n') that start at `data`.
  void emit_lines(Stream& s, const char* data, std::size_t n);
  void close_stream(Stream& s);

  WorkerSpec spec_;
  OutputOptions output_;
  int pid_ = -1;
  std::size_t index_ = 0;
  bool exited_ = false;
  int code_ = 0;
  int term_signal_ = 0;
  Stream out_;
  Stream err_;
  int open_pipes_ = 2;
  std::deque<std::string> tail_;
  std::chrono::steady_clock::time_point last_err_line_{};  // when the tail last grew
  std::chrono::steady_clock::time_point exited_at_{};      // when set_exited() was called
  std::function<void()> output_done_cb_;
};

}  // namespace ddp::launcher
