// Closing every descriptor a new child must not inherit, between vfork (or fork) and exec.
//
// Close-on-exec on what we open is not enough: a library may open a descriptor without
// O_CLOEXEC (Asio's sockets are an example), and a worker holding the store's listening socket
// keeps the port taken after the launcher died. So the child closes everything above 2 except
// the descriptors it is explicitly given, in the first way that works:
//   1. close_range(2) over the gaps between the kept descriptors (Linux 5.9);
//   2. the entries of /proc/self/fd, read with getdents64 into a stack buffer;
//   3. every number from 3 to the soft RLIMIT_NOFILE.
// Everything here is async-signal-safe: system calls only, no allocation, no locks.
#pragma once

#include <cstddef>

namespace ddp {

enum class CloseMethod {
  Auto,    // close_range, else /proc/self/fd, else the loop
  ProcFd,  // /proc/self/fd, else the loop (for tests and for kernels without close_range)
  Loop,    // 3 .. RLIMIT_NOFILE
};

// Closes every descriptor >= 3 not listed in `keep[0..n)` (sorted ascending, each >= 3), and
// clears close-on-exec on the kept ones. Returns 0, or the errno of the step that failed.
// Async-signal-safe; never throws; meant for the child side of vfork/fork.
int close_descriptors_except(const int* keep, std::size_t n, CloseMethod method = CloseMethod::Auto);

}  // namespace ddp
