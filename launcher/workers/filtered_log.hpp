// --duplicate_stdout_filters / --duplicate_stderr_filters, as torchrun's PContext does them: the
// lines of a tee'd stream that contain any of the filters (plain substrings, no patterns) are
// also written, with the worker's console prefix, to one file per attempt and stream that every
// worker of the attempt shares (<attempt dir>/filtered_stdout.log, filtered_stderr.log). Each
// worker's stream holds its own FilteredLog on that file, opened for appending; all of them write
// from the agent's one event-loop thread, whole lines at a time, so lines never tear.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "launcher/workers/log_file.hpp"

namespace ddp::launcher {

class FilteredLog {
 public:
  // Opens `path` for appending (LogFile: an open failure is reported once and counted).
  // `tally` must outlive this object.
  FilteredLog(const std::string& path, std::vector<std::string> filters, LogFileTally& tally);

  // Writes, each after `prefix`, the lines of data[0..n) (whole lines, each ending in '\n') that
  // contain one of the filters; an empty filter matches every line, as in torchrun. Blocks only
  // as a regular file write does; not thread-safe.
  void write(const std::string& prefix, const char* data, std::size_t n);

  // Whether `line` contains one of `filters` (torchrun: `any(needle in line ...)`). Pure.
  static bool matches(std::string_view line, const std::vector<std::string>& filters);

 private:
  std::vector<std::string> filters_;
  LogFile file_;
  std::string block_;  // the matching lines of one write(), reused
};

}  // namespace ddp::launcher
