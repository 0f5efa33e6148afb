// See kernel_files.hpp.
#include "common/kernel_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace ddp {

std::string read_kernel_file(int dir_fd, const char* name) {
  std::string out;
  const int fd = ::openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

std::vector<pid_t> parse_pids(std::string_view text) {
  std::vector<pid_t> out;
  const auto keep = [&](pid_t pid) { out.push_back(pid); };
  PidScanner scanner;
  scanner.feed(text, keep);
  scanner.finish(keep);
  return out;
}

}  // namespace ddp
