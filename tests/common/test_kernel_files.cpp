// Unit tests of common/kernel_files.hpp: reading a kernel file whole, and pid lists.
#include "common/kernel_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

TEST_CASE("parse_pids: cgroup.procs lines, a children file's spaces, and the end of what it can read",
          "[kernel_files]") {
  using V = std::vector<pid_t>;
  CHECK(ddp::parse_pids("") == V{});
  CHECK(ddp::parse_pids("\n") == V{});
  CHECK(ddp::parse_pids("12\n345\n6\n") == (V{12, 345, 6}));  // cgroup.procs
  CHECK(ddp::parse_pids("7 8 9 ") == (V{7, 8, 9}));           // /proc/<pid>/task/<tid>/children
  CHECK(ddp::parse_pids(" 1") == V{1});
  CHECK(ddp::parse_pids("4\nx\n5\n") == V{4});  // stops at what is not a pid
}

TEST_CASE("read_kernel_file: the whole file, relative to a directory or absolute, empty when missing",
          "[kernel_files]") {
  // Our own status is longer than one read of a small buffer would need to be careful about.
  const std::string status = ddp::read_kernel_file(AT_FDCWD, "/proc/self/status");
  CHECK(status.rfind("Name:", 0) == 0);
  CHECK(status.find("\nPid:\t" + std::to_string(::getpid()) + "\n") != std::string::npos);
  const int proc = ::open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(proc >= 0);
  CHECK(ddp::read_kernel_file(proc, "stat").rfind(std::to_string(::getpid()) + " (", 0) == 0);
  CHECK(ddp::read_kernel_file(proc, "no-such-file").empty());
  ::close(proc);
}

TEST_CASE("PidScanner: a number cut between two pieces is read whole, and a longer number is no pid",
          "[kernel_files]") {
  std::vector<pid_t> got;
  const auto keep = [&](pid_t pid) { got.push_back(pid); };
  ddp::PidScanner scanner;
  scanner.feed("12\n3", keep);
  scanner.feed("45\n", keep);
  scanner.feed("6", keep);
  scanner.finish(keep);
  CHECK(got == (std::vector<pid_t>{12, 345, 6}));
  got.clear();
  ddp::PidScanner too_long;
  too_long.feed("1 99999999999999999999 2", keep);
  too_long.finish(keep);
  CHECK(got == std::vector<pid_t>{1});  // stops there, as at anything else that is not a pid
}

TEST_CASE("for_each_pid_in_file: a file longer than its buffer, read as parse_pids reads it, errno untouched",
          "[kernel_files]") {
  char name[] = "/tmp/ddp-pids-XXXXXX";
  const int fd = ::mkstemp(name);
  REQUIRE(fd >= 0);
  std::string text;
  std::vector<pid_t> expected;
  for (pid_t pid = 1; pid <= 1000; ++pid) {  // ~4 KiB: several reads, numbers cut between them
    text += std::to_string(pid * 37) + (pid % 2 ? "\n" : " ");
    expected.push_back(pid * 37);
  }
  REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  ::close(fd);
  std::vector<pid_t> got;
  CHECK(ddp::for_each_pid_in_file(AT_FDCWD, name, [&](pid_t pid) { got.push_back(pid); }));
  CHECK(got == expected);
  CHECK(got == ddp::parse_pids(ddp::read_kernel_file(AT_FDCWD, name)));
  ::unlink(name);
  errno = 0;
  CHECK_FALSE(ddp::for_each_pid_in_file(AT_FDCWD, name, [](pid_t) {}));  // gone: ENOENT, not in errno
  CHECK(errno == 0);
}
