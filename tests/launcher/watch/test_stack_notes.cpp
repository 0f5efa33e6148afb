// The notes under a dump of every rank's stack (launcher/watch/stack_notes.hpp): one line per
// cause, not per rank, naming why and what would give Python lines or any stack.
#include "launcher/watch/stack_notes.hpp"

#include <catch2/catch.hpp>

using ddp::launcher::stack_notes;
using ddp::launcher::StackDumpOptions;
using ddp::launcher::StackReading;

namespace {

StackReading native_python() {
  StackReading r;
  r.read = r.python = true;  // eu-stack's native frames
  return r;
}

}  // namespace

TEST_CASE("Python ranks with native frames only share one note with both causes and fixes", "[stack_notes]") {
  StackDumpOptions o;
  o.python = "/usr/bin/python3";
  o.no_server = "--no_worker_server";
  const std::string text = stack_notes({{0, native_python()}, {1, native_python()}}, o);
  CHECK(text ==
        "note: no Python lines for ranks 0-1 (2 ranks): the job runs with --no_worker_server and py-spy is not "
        "installed (not beside /usr/bin/python3, nor on PATH); drop --no_worker_server, or pip install py-spy into "
        "the workers' environment\n");
}

TEST_CASE("a worker server that did not answer is named, and py-spy's own failure is not a fix", "[stack_notes]") {
  StackReading r = native_python();
  r.server_error = "cannot connect to /run/w0.sock";
  r.spy_found = true;
  CHECK(stack_notes({{3, r}}, StackDumpOptions{}) ==
        "note: no Python lines for rank 3: no worker server answered (cannot connect to /run/w0.sock) and py-spy gave "
        "none (said above)\n");
}

TEST_CASE("a Python rank whose server was not asked (it did not answer before) gets the same note", "[stack_notes]") {
  StackReading r = native_python();
  CHECK(stack_notes({{0, r}}, StackDumpOptions{}) ==
        "note: no Python lines for rank 0: no worker server answered and py-spy is not on PATH; pip install py-spy "
        "into the workers' environment\n");
}

TEST_CASE("Python lines, native programs and exited ranks need no note", "[stack_notes]") {
  StackReading served;
  served.read = served.python = served.python_frames = true;
  StackReading native;
  native.read = true;
  CHECK(stack_notes({{0, served}, {1, native}, {2, StackReading{}}}, StackDumpOptions{}).empty());
}

TEST_CASE("ranks refused ptrace for one cause share one line with the fix", "[stack_notes]") {
  StackReading r;
  r.denied_tool = "eu-stack";
  r.denial = {"the launcher lacks CAP_SYS_PTRACE (containers drop it by default)",
              "run it with --cap-add SYS_PTRACE in a container, or as root"};
  const std::string text = stack_notes({{0, r}, {1, r}, {2, r}, {3, native_python()}}, StackDumpOptions{});
  CHECK(text.find("note: ranks 0-2 (3 ranks) could not be read: eu-stack may not ptrace them: the launcher lacks "
                  "CAP_SYS_PTRACE (containers drop it by default); run it with --cap-add SYS_PTRACE in a container, or "
                  "as root\n") != std::string::npos);
  CHECK(text.find("note: no Python lines for rank 3:") != std::string::npos);  // not the refused ones
}
