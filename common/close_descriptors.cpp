// See close_descriptors.hpp. No libc wrapper that may allocate (opendir, readdir) is used:
// getdents64 goes through syscall(2), into a buffer on the stack.
#include "common/close_descriptors.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>

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
    if (first <= last && ::close_range(first, last, 0) != 0) return errno;
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
  const int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return errno;
  alignas(8) char buf[4096];
  for (;;) {
    const long got = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int e = got < 0 ? errno : 0;
      ::close(dir);
      return e;
    }
    for (long off = 0; off < got;) {
      const auto* d = reinterpret_cast<const Dirent64*>(buf + off);
      off += d->reclen;
      int fd = 0;
      const char* p = d->name;
      if (*p < '0' || *p > '9') continue;  // "." and ".."
      for (; *p >= '0' && *p <= '9'; ++p) fd = fd * 10 + (*p - '0');
      // Closing while reading is safe: /proc/self/fd lists by number, after the offset.
      if (fd > 2 && fd != dir && !kept(fd, keep, n)) ::close(fd);
    }
  }
}

int by_loop(const int* keep, std::size_t n) {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return errno;
  const rlim_t top = files.rlim_cur == RLIM_INFINITY ? INT_MAX : files.rlim_cur;
  for (rlim_t fd = 3; fd < top; ++fd) {
    // EBADF for the numbers not open: expected, nothing to do.
    if (!kept(static_cast<int>(fd), keep, n)) ::close(static_cast<int>(fd));
  }
  return 0;
}

}  // namespace

int close_descriptors_except(const int* keep, std::size_t n, CloseMethod method) {
  for (std::size_t i = 0; i < n; ++i) {
    if (::fcntl(keep[i], F_SETFD, 0) != 0) return errno;
  }
  int e = ENOSYS;
  if (method == CloseMethod::Auto) e = by_close_range(keep, n);
  // ENOSYS: a kernel before 5.9; EINVAL: one that rejects the flags. Either way, the next way.
  if (e != 0 && method != CloseMethod::Loop) e = by_proc_fd(keep, n);
  if (e != 0) e = by_loop(keep, n);
  return e;
}

}  // namespace ddp
