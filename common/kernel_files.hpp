// Small files the kernel writes (/proc, cgroupfs), read with plain system calls: the reaper and the
// launcher read them on the way out of every job, where iostreams cost page faults (code nothing
// else ran, pages copied after the reaper's fork) on the path the launcher's exit waits for.
// Pure functions of what the files hold; thread-safe; never throw (an unreadable file reads "").
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace ddp {

// The whole of `name` relative to the directory `dir_fd` (AT_FDCWD: the working directory, or an
// absolute name); "" when it cannot be opened. Blocks only on the file system.
std::string read_kernel_file(int dir_fd, const char* name);

// The decimal pids in `text`, separated by spaces or newlines (cgroup.procs, a task's `children`),
// in order; parsing stops at the first thing that is not one.
std::vector<pid_t> parse_pids(std::string_view text);

}  // namespace ddp
