// See log_file.hpp.
#include "launcher/workers/log_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.hpp"

namespace ddp::launcher {

LogFile::LogFile(const std::string& path, LogFileTally& tally, bool append) : path_(path), tally_(tally) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd_ < 0) fail(errno, 0);
}

LogFile::~LogFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool LogFile::write(const char* data, std::size_t n) {
  if (!ok()) {
    fail(error_ ? error_ : EBADF, static_cast<std::size_t>(std::count(data, data + n, '\n')));
    return false;
  }
  std::size_t done = 0;
  while (done < n) {
    const ssize_t w = ::write(fd_, data + done, n - done);
    if (w > 0) {
      done += static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    // Lines not written in full are lost to the file (a partial last line counts as lost).
    const char* first_lost = static_cast<const char*>(::memrchr(data, '\n', done));
    const char* from = first_lost ? first_lost + 1 : data;
    fail(w < 0 ? errno : ENOSPC, static_cast<std::size_t>(std::count(from, data + n, '\n')));
    return false;
  }
  return true;
}

void LogFile::fail(int error, std::size_t lines) {
  tally_.lines_lost += lines;
  if (error_ != 0) return;
  error_ = error;
  const std::string what = path_ + ": " + std::strerror(error);
  if (tally_.first_error.empty()) {
    tally_.first_error = what;
    log::error("cannot write the log file {}; its lines go to the console from now on", what);
  } else {
    log::debug("cannot write the log file {}", what);
  }
}

}  // namespace ddp::launcher
