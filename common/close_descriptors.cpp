// See close_descriptors.hpp. No libc wrapper is used (opendir and readdir allocate; every wrapper
// writes errno, which a child sharing our thread's TLS must not): raw system calls only
// (raw_syscall.hpp), getdents64 into a buffer on the stack.
#include "common/close_descriptors.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>

#include "common/raw_syscall.hpp"

namespace ddp {
namespace {

bool kept(int fd, const int* keep, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (keep[i] == fd) return true;
  return false;
}

// close_range over [3, keep[0]), (keep[0], keep[1]), ..., (keep[n-1], ~0U].
int by_close_range(const int* keep, std::size_t n) {
  unsigned first = 3;
  for (std::size_t i = 0; i <= n; ++i) {
    const unsigned last = i < n ? static_cast<unsigned>(keep[i]) - 1 : ~0U;
    if (first <= last) {
      if (const long r = raw_syscall(SYS_close_range, first, last, 0); r != 0) return static_cast<int>(-r);
    }
    if (i < n) first = static_cast<unsigned>(keep[i]) + 1;
  }
  return 0;
}

// The layout getdents64 fills in (struct linux_dirent64).
struct Dirent64 {
  std::uint64_t ino;
  std::int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

int by_proc_fd(const int* keep, std::size_t n) {
  const long opened = raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/self/fd"),
                                  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (opened < 0) return static_cast<int>(-opened);
  const int dir = static_cast<int>(opened);
  alignas(8) char buf[4096];
  for (;;) {
    const long got = raw_syscall(SYS_getdents64, dir, reinterpret_cast<long>(buf), sizeof buf);
    if (got == -EINTR) continue;
    if (got <= 0) {
      raw_syscall(SYS_close, dir);
      return static_cast<int>(-got);
    }
    for (long off = 0; off < got;) {
      const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
      off += d->reclen;
      int fd = 0;
      const char* p = d->name;
      if (*p < '0' || *p > '9') continue;  // "." and ".."
      for (; *p >= '0' && *p <= '9'; ++p) fd = fd * 10 + (*p - '0');
      // Closing while reading is safe: /proc/self/fd lists by number, after the offset.
      if (fd > 2 && fd != dir && !kept(fd, keep, n)) raw_syscall(SYS_close, fd);
    }
  }
}

int by_loop(const int* keep, std::size_t n) {
  rlimit files{};
  if (const long r = raw_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, reinterpret_cast<long>(&files)); r != 0)
    return static_cast<int>(-r);
  const rlim_t top = files.rlim_cur == RLIM_INFINITY ? INT_MAX : files.rlim_cur;
  for (rlim_t fd = 3; fd < top; ++fd) {
    // EBADF for the numbers not open: expected, nothing to do.
    if (!kept(static_cast<int>(fd), keep, n)) raw_syscall(SYS_close, static_cast<long>(fd));
  }
  return 0;
}

}  // namespace

int close_descriptors_except(const int* keep, std::size_t n, CloseMethod method) {
  for (std::size_t i = 0; i < n; ++i) {
    if (const long r = raw_syscall(SYS_fcntl, keep[i], F_SETFD, 0); r != 0) return static_cast<int>(-r);
  }
  int e = ENOSYS;
  if (method == CloseMethod::Auto) e = by_close_range(keep, n);
  // ENOSYS: a kernel before 5.9; EINVAL: one that rejects the flags. Either way, the next way.
  if (e != 0 && method != CloseMethod::Loop) e = by_proc_fd(keep, n);
  if (e != 0) e = by_loop(keep, n);
  return e;
}

}  // namespace ddp
