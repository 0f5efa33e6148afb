// A system call that leaves errno alone: it returns the kernel's result, a negative errno on
// failure. For code that runs in a child sharing our memory and our thread's TLS while we run on
// (child_process.cpp's children started without waiting for their exec): glibc's wrappers would
// write errno into the parent thread's variable under its feet. x86-64 makes the call itself;
// elsewhere it goes through syscall(2) and reads errno (used there only where the parent waits).
// Async-signal-safe; never throws; thread-safe.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace ddp {

inline long raw_syscall(long number, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
#if defined(__x86_64__)
  long ret;
  register long r10 asm("r10") = d;
  register long r8 asm("r8") = e;
  register long r9 asm("r9") = f;
  asm volatile("syscall"
               : "=a"(ret)
               : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
               : "rcx", "r11", "memory");
  return ret;
#else
  const long ret = ::syscall(number, a, b, c, d, e, f);
  return ret == -1 ? -errno : ret;
#endif
}

// Whether this machine can make the calls a child sharing our TLS needs without touching errno.
inline constexpr bool kRawSyscalls =
#if defined(__x86_64__)
    true;
#else
    false;
#endif

}  // namespace ddp
