// Why ptrace is refused (launcher/watch/probe/ptrace_access.hpp): the most specific cause first,
// each with what lifts it; and the facts as /proc gives them for this process.
#include "launcher/watch/probe/ptrace_access.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>

using ddp::launcher::explain_ptrace_denial;
using ddp::launcher::PtraceFacts;

namespace {

PtraceFacts facts() {
  PtraceFacts f;
  f.self_uid = f.target_uid = 1000;
  return f;
}

}  // namespace

TEST_CASE("each cause of a refused ptrace is named with its fix", "[ptrace_access]") {
  PtraceFacts f = facts();
  f.yama_scope = 1;
  CHECK(explain_ptrace_denial(f).cause.rfind("kernel.yama.ptrace_scope is 1 (only a process's ancestors", 0) == 0);
  CHECK(explain_ptrace_denial(f).fix.rfind("sysctl kernel.yama.ptrace_scope=0, or run it with --cap-add SYS_PTRACE",
                                           0) == 0);
  f.yama_scope = 3;
  CHECK(explain_ptrace_denial(f).cause == "kernel.yama.ptrace_scope is 3 (ptrace is off until reboot)");
  f.yama_scope = 2;
  CHECK(explain_ptrace_denial(f).cause.find("and the launcher lacks CAP_SYS_PTRACE") != std::string::npos);
  f.cap_sys_ptrace = true;  // scope 2 with the capability: not the cause
  CHECK(explain_ptrace_denial(f).cause.rfind("a security profile", 0) == 0);

  f = facts();
  f.target_dumpable = false;
  CHECK(explain_ptrace_denial(f).cause ==
        "the worker is not dumpable (it called prctl(PR_SET_DUMPABLE, 0) or changed its user)");
  f = facts();
  f.target_uid = 0;
  CHECK(explain_ptrace_denial(f).cause ==
        "the worker runs as uid 0 and the launcher as uid 1000 without CAP_SYS_PTRACE");
  CHECK(explain_ptrace_denial(f).fix == "run ddplaunch as the workers' user");
  f = facts();
  CHECK(explain_ptrace_denial(f).cause == "the launcher lacks CAP_SYS_PTRACE (containers drop it by default)");
}

TEST_CASE("the facts of this process, read from /proc", "[ptrace_access]") {
  const PtraceFacts f = ddp::launcher::read_ptrace_facts(::getpid());
  CHECK(f.self_uid == static_cast<long>(::geteuid()));
  CHECK(f.target_uid == static_cast<long>(::geteuid()));
  CHECK(f.target_dumpable);
  CHECK(f.yama_scope >= -1);
  CHECK(f.yama_scope <= 3);
}
