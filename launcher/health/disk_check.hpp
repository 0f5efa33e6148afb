// The built-in check of the run's log directory: a file can be written there and the file system
// has room: at least --health_min_free_mb (default 16 MiB: a full disk, not a tight quota, is what
// fails jobs over and over; 0 leaves only the write).
#pragma once

#include <cstdint>
#include <string>

#include "launcher/health/check_result.hpp"

namespace ddp::launcher {

// Asks access(2) whether a file can be created in `dir` (write and search permission, a writable
// mount), then statvfs(2) for the free space and inodes an unprivileged user has there. (A quota
// reached, EDQUOT, shows only when the workers write.) Failed when any of that fails or less than
// `min_free_bytes` (or no inode) is left; the summary names the directory, the numbers and a fix.
// Blocks for a few file-system calls; never throws; thread-safe.
CheckResult check_log_directory(const std::string& dir, std::uint64_t min_free_bytes);

}  // namespace ddp::launcher
