// See output_file.hpp.
#include "launcher/report/output_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {

void check_output_file(const std::string& flag, const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  struct stat st {};
  // An existing file it may write needs no writable directory: /dev/stderr, where
  // --event_log_handler=console puts the event log (/dev is root's).
  if (::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && ::access(path.c_str(), W_OK) == 0) return;
  if (::stat(dir.c_str(), &st) != 0) {
    throw UsageError(fmt::format("{} {}: directory {} {}; create it or give a file in an existing directory", flag,
                                 path, dir, errno == ENOENT ? "does not exist" : std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw UsageError(
        fmt::format("{} {}: {} is not a directory; give a file in an existing directory", flag, path, dir));
  }
  // access() asks with the real ids, as the launcher (never set-uid) writes; root passes unless
  // the file system is read-only (EROFS).
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw UsageError(fmt::format("{} {}: cannot create files in {} ({}); give a file in a writable directory", flag,
                                 path, dir, std::strerror(errno)));
  }
  if (::stat(path.c_str(), &st) != 0) return;  // absent: created when written
  if (S_ISDIR(st.st_mode)) throw UsageError(fmt::format("{} {} is a directory; give a file name", flag, path));
  if (::access(path.c_str(), W_OK) != 0) {
    throw UsageError(
        fmt::format("{} {}: cannot write it ({}); give a writable file", flag, path, std::strerror(errno)));
  }
}

}  // namespace ddp::launcher
