// A unix socket's path as a sockaddr_un can hold it. sun_path holds 108 bytes; a run directory
// under a long --log_dir makes longer paths, so a longer one is reached through its directory:
// opened O_PATH and named /proc/self/fd/<n>/<name>, which bind() and connect() resolve as the
// path itself (Linux). Only the name must then fit. Used by the worker-server client and by the
// launcher's status endpoint (status/).
#pragma once

#include <string>

namespace ddp::launcher {

// Holds the directory descriptor (when one is needed) for as long as the object lives: bind or
// connect with usable() before it goes. Never throws (but std::bad_alloc). Not thread-safe.
class SocketPath {
 public:
  explicit SocketPath(const std::string& path);
  ~SocketPath();
  SocketPath(const SocketPath&) = delete;
  SocketPath& operator=(const SocketPath&) = delete;

  // The path to give bind() or connect(); "" when none can be made (see error()).
  const std::string& usable() const { return usable_; }
  // Why not: "cannot open the directory /x: No such file or directory", "the socket name ... is
  // too long (200 bytes) to connect to".
  const std::string& error() const { return error_; }

 private:
  int dir_fd_ = -1;
  std::string usable_;
  std::string error_;
};

}  // namespace ddp::launcher
