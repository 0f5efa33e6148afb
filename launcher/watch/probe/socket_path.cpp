// See socket_path.hpp.
#include "launcher/watch/probe/socket_path.hpp"

#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace ddp::launcher {

SocketPath::SocketPath(const std::string& path) {
  if (path.size() < sizeof(sockaddr_un::sun_path)) {
    usable_ = path;
    return;
  }
  const std::size_t slash = path.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  dir_fd_ = ::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) {
    error_ = fmt::format("cannot open the directory {}: {}", parent, std::strerror(errno));
    return;
  }
  std::string proc = fmt::format("/proc/self/fd/{}/{}", dir_fd_, name);
  if (proc.size() >= sizeof(sockaddr_un::sun_path)) {
    error_ = fmt::format("the socket name {} is too long ({} bytes) to connect to", name, name.size());
    return;
  }
  usable_ = std::move(proc);
}

SocketPath::~SocketPath() {
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

}  // namespace ddp::launcher
