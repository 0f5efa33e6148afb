// Passes worker output to the launcher's stdout/stderr without ever blocking the event loop:
// blocks of whole lines are queued and a writer thread does the (possibly slow) writes, so a
// worker that writes fast never waits for a slow console. The thread is the only writer of
// worker output and writes whole lines only, so lines from different workers never tear; queued
// blocks for the same descriptor go out together in one writev(2), so a busy console costs a
// system call per batch, not per line. The thread starts with the first write that needs it: a
// short block (at most kDirectBytes) written while nothing is queued goes out at once from the
// caller when poll(2) says the descriptor is writable. A pipe then takes it whole and a socket or
// a terminal has the room, so that write does not wait; a job that prints only a few short lines
// (the launcher's own, say) never starts the thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ddp::launcher {

class ConsoleWriter {
 public:
  // Queued bytes above which further blocks are dropped (their lines counted) instead of growing
  // memory without bound when the console is stuck.
  static constexpr std::size_t kMaxQueuedBytes = 256u << 20;
  // Capacity of written blocks kept for reuse; beyond it they are freed.
  static constexpr std::size_t kMaxRecycledBytes = 4u << 20;
  // The largest block written by the caller itself (see above): a few lines, under PIPE_BUF.
  static constexpr std::size_t kDirectBytes = 512;

  ConsoleWriter() = default;
  // Flushes what is queued, then joins the writer thread.
  ~ConsoleWriter();
  ConsoleWriter(const ConsoleWriter&) = delete;
  ConsoleWriter& operator=(const ConsoleWriter&) = delete;

  // Thread-safe, never blocks on I/O. `fd` is 1 or 2; `lines` is one or more whole lines, each
  // ending in '\n', written in order and never split from one another's bytes.
  void write(int fd, std::string lines);
  // Blocks until everything queued so far is written.
  void flush();
  // A string to build the next block in: one that was already written, recycled so that
  // building a block neither allocates nor faults in fresh pages. Its contents are stale and its
  // size is the old block's: resize() it (which fills only past that size) and overwrite it.
  // Thread-safe.
  std::string recycled_buffer();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable drained_;
  std::deque<std::pair<int, std::string>> queue_;
  std::size_t queued_bytes_ = 0;
  std::size_t dropped_lines_ = 0;
  std::vector<std::string> free_;  // written blocks kept for reuse
  std::size_t free_bytes_ = 0;
  bool writing_ = false;
  bool stop_ = false;
  std::thread thread_;  // started by the first write()
};

}  // namespace ddp::launcher
