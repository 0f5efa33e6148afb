// Unit tests of common/kernel_files.hpp: reading a kernel file whole, and pid lists.
#include "common/kernel_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
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
