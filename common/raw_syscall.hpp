// A system call that leaves errno alone: it returns the kernel's result, a negative errno on
// failure. For code that runs in a child sharing our memory and our thread's TLS while we run on
// (child_process.cpp's children started without waiting for their exec): glibc's wrappers would
// write errno into the parent thread's variable under its feet. x86-64 makes the call itself;
// elsewhere it goes through syscall(2) and reads errno (used there only where the parent waits).
// Async-signal-safe; never throws; thread-safe. raw_poll and the signal helpers below are made of it.
#pragma once

#include <poll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>

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

// poll(2) through ppoll (which every architecture has): `timeout_ms` < 0 waits without end.
// The number of ready descriptors, 0 on timeout, or a negative errno (-EINTR).
inline long raw_poll(pollfd* fds, int count, int timeout_ms) {
  if (timeout_ms < 0) return raw_syscall(SYS_ppoll, reinterpret_cast<long>(fds), count, 0, 0, 0);
  const timespec wait{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000L};
  return raw_syscall(SYS_ppoll, reinterpret_cast<long>(fds), count, reinterpret_cast<long>(&wait), 0, 0);
}

// The kernel's struct for rt_sigaction (x86-64 and the generic layout), for the dispositions
// that need no restorer: SIG_DFL and SIG_IGN set, a handler read back.
struct KernelSigaction {
  void (*handler)(int) = SIG_DFL;
  unsigned long flags = 0;
  void (*restorer)() = nullptr;
  std::uint64_t mask = 0;
};
inline constexpr long kKernelSigsetBytes = 8;  // the kernel's sigset_t

// `sig`'s disposition read into `now`; 0 or a negative errno (EINVAL for a number glibc reserves).
inline long raw_get_disposition(int sig, KernelSigaction& now) {
  return raw_syscall(SYS_rt_sigaction, sig, 0, reinterpret_cast<long>(&now), kKernelSigsetBytes);
}

// Sets `sig` to `disposition` (SIG_DFL or SIG_IGN only); 0 or a negative errno.
inline long raw_set_disposition(int sig, void (*disposition)(int)) {
  KernelSigaction to;
  to.handler = disposition;
  return raw_syscall(SYS_rt_sigaction, sig, reinterpret_cast<long>(&to), 0, kKernelSigsetBytes);
}

// Unblocks every signal in the calling thread; 0 or a negative errno.
inline long raw_unblock_signals() {
  const std::uint64_t none = 0;
  return raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&none), 0, kKernelSigsetBytes);
}

}  // namespace ddp
