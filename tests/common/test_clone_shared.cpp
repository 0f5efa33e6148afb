// clone_shared(): the child shares the caller's memory and runs on its own stack; with
// CLONE_VFORK the call returns after the child has exited; a refused clone3 comes back as -1
// with errno. (On an architecture without the assembly every call reports ENOSYS.)
#include "common/clone_shared.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cerrno>
#include <memory>

namespace {

struct Shared {
  volatile int written = 0;
  volatile char* stack_seen = nullptr;
};

void child(void* arg) {
  auto* s = static_cast<Shared*>(arg);
  char local = 0;
  s->stack_seen = &local;
  s->written = 42;
  ::_exit(7);
}

constexpr std::size_t kStack = 64 * 1024;

}  // namespace

TEST_CASE("the child writes our memory from its own stack, and has exited when the call returns") {
  Shared shared;
  const std::unique_ptr<char[]> stack(new char[kStack]);
  clone_args args{};
  args.flags = CLONE_VFORK;
  args.exit_signal = SIGCHLD;
  const pid_t pid = ddp::clone_shared(args, stack.get(), kStack, child, &shared);
  if (pid < 0 && errno == ENOSYS) {
    WARN("no clone3 with a stack on this architecture or kernel: nothing to test");
    return;
  }
  REQUIRE(pid > 0);
  CHECK(shared.written == 42);  // CLONE_VFORK: already done, in our memory
  CHECK(shared.stack_seen >= stack.get());
  CHECK(shared.stack_seen < stack.get() + kStack);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
}

TEST_CASE("a clone3 the kernel refuses returns -1 with its errno") {
  Shared shared;
  const std::unique_ptr<char[]> stack(new char[kStack]);
  clone_args args{};
  args.flags = CLONE_VFORK | CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = 987654;  // not a descriptor
  const pid_t pid = ddp::clone_shared(args, stack.get(), kStack, child, &shared);
  CHECK(pid == -1);
  CHECK(errno != 0);
  CHECK(shared.written == 0);
}
