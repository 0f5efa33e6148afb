// See log_file.hpp.
#include "launcher/workers/log_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.hpp"
#include "launcher/config/file_flag.hpp"

namespace ddp::launcher {

LogFile::LogFile(const std::string& path, LogFileTally& tally, bool append) : path_(path), tally_(tally) {
  // Workers may write the run directory, so what stands at a later attempt's path is checked on
  // the descriptor, opened non-blocking (a FIFO there would block the launcher for ever).
  const OpenedFile opened =
      open_file(FileFlag{"a worker's log file", path, FileUse::Log}, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC));
  fd_ = opened.fd;
  if (fd_ >= 0) return;
  const FoundFile found = find_file(path);
  fail(opened.error != 0 ? opened.error : EINVAL, 0,
       found.error == 0 && !S_ISREG(found.mode) ? fmt::format("{}: {}, not a file", path, file_kind(found.mode)) : "");
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

void LogFile::fail(int error, std::size_t lines, const std::string& why) {
  tally_.lines_lost += lines;
  if (error_ != 0) return;
  error_ = error;
  const std::string what = why.empty() ? path_ + ": " + std::strerror(error) : why;
  if (tally_.first_error.empty()) {
    tally_.first_error = what;
    log::error("cannot write the log file {}; its lines go to the console from now on", what);
  } else {
    log::debug("cannot write the log file {}", what);
  }
}

}  // namespace ddp::launcher
