// See disk_check.hpp.
#include "launcher/health/disk_check.hpp"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace ddp::launcher {
namespace {

std::string mib(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

CheckResult failed(const std::string& summary) {
  return CheckResult{"log directory", CheckResult::Verdict::Failed, summary, {}};
}

// Whether a file can be created in `dir` (search and write permission, not a read-only mount):
// "" or why not. access(2) answers without touching the disk; a full disk or a lack of inodes is
// what statvfs finds below. (A file written and removed every round cost four system calls and
// a directory change on the path to the workers' start.)
std::string try_write(const std::string& dir) {
  if (::access(dir.c_str(), W_OK | X_OK) == 0) return "";
  return fmt::format("cannot create a file in {}: {}", dir, std::strerror(errno));
}

}  // namespace

CheckResult check_log_directory(const std::string& dir, std::uint64_t min_free_bytes) {
  const std::string fix = "; free space there or pass another --log_dir";
  if (std::string error = try_write(dir); !error.empty()) return failed(error + fix);
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return failed(fmt::format("statvfs {}: {}", dir, std::strerror(errno)));
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free_bytes < min_free_bytes) {
    return failed(fmt::format("only {} free in {} (at least {} needed){}, or lower --health_min_free_mb",
                              mib(free_bytes), dir, mib(min_free_bytes), fix));
  }
  if (fs.f_files > 0 && fs.f_favail == 0) return failed(fmt::format("no free inode left in {}{}", dir, fix));
  return CheckResult{
      "log directory", CheckResult::Verdict::Healthy, fmt::format("{} free in {}", mib(free_bytes), dir), {}};
}

}  // namespace ddp::launcher
