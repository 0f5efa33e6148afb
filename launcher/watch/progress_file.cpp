// See progress_file.hpp.
#include "launcher/watch/progress_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "launcher/config/file_flag.hpp"
#include "launcher/rdzv/outcome.hpp"  // printable

namespace ddp::launcher {

ProgressFileReading read_progress_file(const std::string& path) {
  ProgressFileReading r;
  // Opened non-blocking and checked on the descriptor (config/file_flag.hpp): a FIFO or a device
  // put there while the job runs is unusable, never waited on or read for ever.
  const OpenedFile file = open_file(FileFlag{"--progress_file", path, FileUse::ReadLater}, O_RDONLY);
  if (file.fd < 0) {
    if (file.error == ENOENT) return r;  // Missing
    r.state = ProgressFileReading::State::Unusable;
    r.problem = file.refused;
    return r;
  }
  std::string text;
  read_at_most(file.fd, 4096, text);  // a failed read leaves what came before: judged below
  ::close(file.fd);
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
