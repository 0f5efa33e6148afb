// See filtered_log.hpp.
#include "launcher/workers/filtered_log.hpp"

#include <algorithm>
#include <cstring>

namespace ddp::launcher {

FilteredLog::FilteredLog(const std::string& path, std::vector<std::string> filters, LogFileTally& tally)
    : filters_(std::move(filters)), file_(path, tally, /*append=*/true) {}

bool FilteredLog::matches(std::string_view line, const std::vector<std::string>& filters) {
  return std::any_of(filters.begin(), filters.end(),
                     [line](const std::string& needle) { return line.find(needle) != std::string_view::npos; });
}

void FilteredLog::write(const std::string& prefix, const char* data, std::size_t n) {
  block_.clear();
  const char* const end = data + n;
  for (const char* line = data; line < end;) {
    const char* next = static_cast<const char*>(std::memchr(line, '\n', end - line)) + 1;
    // The line with its '\n', as torchrun's readline() gives it to the filter.
    if (matches(std::string_view(line, next - line), filters_)) block_.append(prefix).append(line, next);
    line = next;
  }
  if (!block_.empty()) file_.write(block_.data(), block_.size());
}

}  // namespace ddp::launcher
