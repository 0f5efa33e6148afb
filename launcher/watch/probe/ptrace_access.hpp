// Why a stack tool (py-spy, eu-stack, gdb) run by the launcher may not ptrace a worker, said in
// one line with the fix: Yama's kernel.yama.ptrace_scope, CAP_SYS_PTRACE (a container drops it by
// default), the worker's user, whether it is dumpable. read_ptrace_facts reads /proc (never
// throws; thread-safe); explain_ptrace_denial is pure.
#pragma once

#include <string>

namespace ddp::launcher {

// What decides whether the launcher may ptrace one worker. Says nothing of which worker: ranks
// refused for the same reason share one note.
struct PtraceFacts {
  int yama_scope = -1;          // kernel.yama.ptrace_scope; -1: no Yama
  bool cap_sys_ptrace = false;  // the launcher (and so its tools) holds CAP_SYS_PTRACE
  long self_uid = -1;           // the launcher's effective uid
  long target_uid = -1;         // the worker's effective uid; -1: gone
  bool target_dumpable = true;  // false: /proc/<pid>/status is root's, the worker's not (PR_SET_DUMPABLE 0)
};

struct PtraceDenial {
  std::string cause;  // "kernel.yama.ptrace_scope is 1 (...) and the launcher lacks CAP_SYS_PTRACE"
  std::string fix;    // "allow it with sysctl kernel.yama.ptrace_scope=0, or ..."
};

PtraceFacts read_ptrace_facts(int pid);

// The first cause that explains the refusal, most specific first, and what lifts it.
PtraceDenial explain_ptrace_denial(const PtraceFacts& facts);

}  // namespace ddp::launcher
