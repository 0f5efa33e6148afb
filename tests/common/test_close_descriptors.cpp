// close_descriptors_except(): every way of closing leaves exactly stdin/stdout/stderr and the
// kept descriptors, with close-on-exec cleared on the kept ones. Each case runs in a forked
// child (it closes descriptors Catch2 may hold) and reports through its exit status.
#include "common/close_descriptors.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <vector>

namespace {

// In a child: opens descriptors 20..24 without close-on-exec and 30 with it, closes with
// `method` keeping 21 and 30; exit 0 when exactly 0, 1, 2, 21, 30 remain and 30 lost its
// close-on-exec, else the first wrong descriptor's number (or 200 + errno).
int run(ddp::CloseMethod method) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    for (int fd = 20; fd <= 24; ++fd) ::dup2(0, fd);
    ::dup3(0, 30, O_CLOEXEC);
    const int keep[] = {21, 30};
    if (const int e = ddp::close_descriptors_except(keep, 2, method); e != 0) ::_exit(200 + e % 50);
    for (int fd = 3; fd < 1024; ++fd) {
      const bool open = ::fcntl(fd, F_GETFD) != -1;
      if (open != (fd == 21 || fd == 30)) ::_exit(fd % 200);
    }
    if (::fcntl(30, F_GETFD) & FD_CLOEXEC) ::_exit(199);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

TEST_CASE("close_descriptors_except: close_range keeps only stdio and the kept ones", "[close]") {
  CHECK(run(ddp::CloseMethod::Auto) == 0);
}

TEST_CASE("close_descriptors_except: /proc/self/fd, for kernels without close_range", "[close]") {
  CHECK(run(ddp::CloseMethod::ProcFd) == 0);
}

TEST_CASE("close_descriptors_except: the plain loop, for machines without /proc", "[close]") {
  CHECK(run(ddp::CloseMethod::Loop) == 0);
}

}  // namespace
