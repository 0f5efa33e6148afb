// Passes worker output lines to the launcher's stdout/stderr without ever blocking the event
// loop: lines are queued and a writer thread does the (possibly slow) writes, so a worker that
// writes fast never waits for a slow console. Each line is written with one write(2), so lines
// from different workers never tear.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace ddp::launcher {

class ConsoleWriter {
 public:
  // Queued bytes above which further lines are dropped (and counted) instead of growing memory
  // without bound when the console is stuck.
  static constexpr std::size_t kMaxQueuedBytes = 256u << 20;

  ConsoleWriter();
  // Flushes what is queued, then joins the writer thread.
  ~ConsoleWriter();
  ConsoleWriter(const ConsoleWriter&) = delete;
  ConsoleWriter& operator=(const ConsoleWriter&) = delete;

  // Thread-safe, never blocks on I/O. `fd` is 1 or 2; `line` includes its newline.
  void write(int fd, std::string line);
  // Blocks until everything queued so far is written.
  void flush();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable drained_;
  std::deque<std::pair<int, std::string>> queue_;
  std::size_t queued_bytes_ = 0;
  std::size_t dropped_ = 0;
  bool writing_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ddp::launcher
