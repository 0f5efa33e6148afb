// One worker stream's log file (--redirects/--tee), written with write(2) so that a failure
// (ENOSPC, EIO, EROFS, ...) is seen at the write that failed, not lost in a buffer. The first
// failure of any file is reported once on the console, naming the file and the error; from then
// on the file takes no more writes and the caller routes those lines to the console if they were
// meant for the file only. Every line that did not reach its file is counted in LogFileTally, and
// the agent ends the run with "log files incomplete: N lines not written to DIR (error)".
#pragma once

#include <cstddef>
#include <string>

namespace ddp::launcher {

// Lines that never reached their log files, over the whole run. Not thread-safe: the agent's loop
// thread writes every worker's files.
struct LogFileTally {
  std::size_t lines_lost = 0;
  std::string first_error;  // "<file>: <strerror>" of the first failure, "" when none
};

class LogFile {
 public:
  // Opens (creates, truncates) `path`, or with `append` creates it or adds to its end (a file
  // several writers share, each write whole lines). An open failure counts as the first failed
  // write: it is reported, and ok() is false from the start; so does anything there but a
  // regular file or /dev/null (a FIFO put where a later attempt's file goes is refused, never
  // waited on: config/file_flag.hpp). `tally` must outlive the file.
  LogFile(const std::string& path, LogFileTally& tally, bool append = false);
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  // Writes whole lines; returns false when they (or some of them) did not reach the file, which
  // is then counted and, the first time, reported. Blocks only as a regular file write does.
  bool write(const char* data, std::size_t n);
  bool ok() const { return fd_ >= 0 && error_ == 0; }
  const std::string& path() const { return path_; }

 private:
  // `why`: "<file>: <why>" when the error number alone would not say it (a FIFO, a directory).
  void fail(int error, std::size_t lines, const std::string& why = "");

  std::string path_;
  LogFileTally& tally_;
  int fd_ = -1;
  int error_ = 0;
};

}  // namespace ddp::launcher
