// Small files the kernel writes (/proc, cgroupfs), read with plain system calls: the reaper and the
// launcher read them on the way out of every job, where iostreams cost page faults on the path the
// launcher's exit waits for. for_each_pid_in_file allocates nothing and leaves errno alone (raw
// system calls): the reaper, which may run on the launcher's memory, reads cgroup.procs with it.
// Never throw (an unreadable file reads "", or as no pids); thread-safe.
#pragma once

#include <fcntl.h>
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/raw_syscall.hpp"

namespace ddp {

// The whole of `name` relative to the directory `dir_fd` (AT_FDCWD: the working directory, or an
// absolute name); "" when it cannot be opened. Blocks only on the file system.
std::string read_kernel_file(int dir_fd, const char* name);

// Reads the decimal pids of a text that arrives in pieces (a number may be cut between two),
// separated by spaces or newlines (cgroup.procs, a task's `children`); it stops at the first
// thing that is not one. Allocates nothing.
class PidScanner {
 public:
  // visit(pid) for each pid the piece completes.
  template <class Visit>
  void feed(std::string_view piece, Visit&& visit) {
    for (const char c : piece) {
      if (stopped_) return;
      if (c >= '0' && c <= '9') {
        value_ = value_ * 10 + (c - '0');
        digits_ = true;
        stopped_ = value_ > kMaxPid;  // not a pid: it and what follows are not read
        continue;
      }
      end_number(visit);
      stopped_ = !(c == ' ' || c == '\n');
    }
  }
  // The end of the text: visit(pid) for the number it ends.
  template <class Visit>
  void finish(Visit&& visit) {
    if (!stopped_) end_number(visit);
    stopped_ = true;
  }

 private:
  static constexpr long kMaxPid = 1L << 22;  // PID_MAX_LIMIT: a longer number is not a pid
  template <class Visit>
  void end_number(Visit& visit) {
    if (digits_) visit(static_cast<pid_t>(value_));
    value_ = 0;
    digits_ = false;
  }
  long value_ = 0;
  bool digits_ = false;
  bool stopped_ = false;
};

// The pids in `text` as PidScanner reads them, in order.
std::vector<pid_t> parse_pids(std::string_view text);

// visit(pid) for each pid in the file `name` relative to `dir_fd`, read in pieces into a buffer on
// the stack through raw system calls; false when the file cannot be opened. Blocks only on the
// file system.
template <class Visit>
bool for_each_pid_in_file(int dir_fd, const char* name, Visit&& visit) {
  const long fd = raw_syscall(SYS_openat, dir_fd, reinterpret_cast<long>(name), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  PidScanner scanner;
  char buf[1024];
  for (long n; (n = raw_syscall(SYS_read, fd, reinterpret_cast<long>(buf), sizeof buf)) != 0;) {
    if (n == -EINTR) continue;
    if (n < 0) break;
    scanner.feed(std::string_view(buf, static_cast<std::size_t>(n)), visit);
  }
  scanner.finish(visit);
  raw_syscall(SYS_close, fd);
  return true;
}

}  // namespace ddp
