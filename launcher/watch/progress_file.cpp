// See progress_file.hpp.
#include "launcher/watch/progress_file.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "launcher/rdzv/outcome.hpp"  // printable

namespace ddp::launcher {

ProgressFileReading read_progress_file(const std::string& path) {
  ProgressFileReading r;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return r;  // Missing
    r.state = ProgressFileReading::State::Unusable;
    r.problem = fmt::format("--progress_file {}: cannot read it: {}", path, std::strerror(errno));
    return r;
  }
  std::string text(4096, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  const std::size_t last = text.find_last_not_of(" \t\r\n");
  const std::string word = first == std::string::npos ? "" : text.substr(first, last - first + 1);
  long long value = -1;
  const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (word.empty() || ec != std::errc() || ptr != word.data() + word.size() || value < 0) {
    r.state = ProgressFileReading::State::Unusable;
    r.problem = fmt::format(
        "--progress_file {} holds '{}', not an iteration (one integer); progress from it is "
        "unknown on this node",
        path, printable(word.substr(0, 40)));
    return r;
  }
  r.state = ProgressFileReading::State::Iteration;
  r.iteration = value;
  return r;
}

}  // namespace ddp::launcher
